/**
 * The Hermes Extension API on the wire: every method with its Schemas, defined once, and the two kernel protocols
 * built from them (the host's and its flip, the extension's). `docs/protocol.md` describes the same methods in prose.
 *
 * @since 0.1.0
 */
import * as Bounds from "@lifeline/kernel/Bounds"
import * as Method from "@lifeline/kernel/Method"
import * as Protocol from "@lifeline/kernel/Protocol"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as SchemaGetter from "effect/SchemaGetter"

/**
 * The version of this protocol, sent in `initialize`.
 *
 * @since 0.1.0
 * @category models
 */
export const PROTOCOL_VERSION = "1.0"

/**
 * How long the host waits for the answer to `initialize` before it marks the extension failed (docs/protocol.md,
 * "Lifecycle").
 *
 * @since 0.1.0
 * @category models
 */
export const INITIALIZE_TIMEOUT: Duration.Duration = Bounds.handshakeTimeout

/**
 * How long the host waits for the answer to `shutdown` before it kills the process (docs/protocol.md, "Lifecycle").
 *
 * @since 0.1.0
 * @category models
 */
export const SHUTDOWN_TIMEOUT: Duration.Duration = Bounds.shutdownTimeout

/**
 * The error code of a `shutdown` whose cleanup failed; the host logs it and still terminates the process
 * (docs/protocol.md, "shutdown").
 *
 * @since 0.1.0
 * @category models
 */
export const SHUTDOWN_FAILED = -32000

/**
 * The environment variable naming Hermes' data directory; extensions keep their files under
 * `$HERMES_DATA_DIR/extensions/<name>/`, and default to `~/.hermes` (docs/protocol.md, "initialize").
 *
 * @since 0.1.0
 * @category models
 */
export const DATA_DIR_VARIABLE = "HERMES_DATA_DIR"

// -- initialize ------------------------------------------------------------------------------------------------

/**
 * What `hermesVersion` and `protocolVersion` read as when the host leaves them out (docs/protocol.md, "initialize").
 *
 * @since 0.1.0
 * @category models
 */
export const UNKNOWN_VERSION = "unknown"

/**
 * The most UTF-8 bytes the `settings` object of `initialize` may take as JSON: 64 KiB, far more than the settings of
 * one extension need, little enough that neither side holds much for it (docs/protocol.md, "initialize"). A host
 * refuses to send more; an extension answers more with -32602.
 *
 * @since 0.1.0
 * @category models
 */
export const MAX_SETTINGS_BYTES = 64 * 1024

/**
 * How many UTF-8 bytes `settings` takes as JSON, or `undefined` when it is not JSON (a cycle, a `bigint`).
 *
 * @since 0.1.0
 * @category models
 */
export const settingsBytes = (settings: unknown): number | undefined => {
  try {
    const json = JSON.stringify(settings)
    return json === undefined ? undefined : new TextEncoder().encode(json).length
  } catch {
    return undefined
  }
}

/**
 * The user's settings of an extension, as the host passes them in `initialize` (defined here): a JSON object of at
 * most {@link MAX_SETTINGS_BYTES}. What the keys mean is the extension's business.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Settings = Schema.Record(Schema.String, Schema.Unknown).check(
  Schema.makeFilter((settings) => {
    const bytes = settingsBytes(settings)
    return bytes === undefined
      ? "settings must be JSON"
      : bytes <= MAX_SETTINGS_BYTES || `settings take ${bytes} bytes of JSON, over ${MAX_SETTINGS_BYTES}`
  })
)

/**
 * @since 0.1.0
 * @category schemas
 */
export type Settings = typeof Settings.Type

const InitializeFields = Schema.Struct({
  /** The version of the Hermes application (or headless host) that starts the extension; default "unknown". */
  hermesVersion: Schema.String.pipe(Schema.withDecodingDefaultKey(Effect.succeed(UNKNOWN_VERSION))),
  /** {@link PROTOCOL_VERSION} of the host; default "unknown". */
  protocolVersion: Schema.String.pipe(Schema.withDecodingDefaultKey(Effect.succeed(UNKNOWN_VERSION))),
  /**
   * Hermes' data directory (what `HERMES_DATA_DIR` holds); the extension's own is `<dataDir>/extensions/<name>`.
   * Left out (or empty), the extension uses `HERMES_DATA_DIR` from its environment, else `~/.hermes`.
   */
  dataDir: Schema.optionalKey(Schema.String),
  /** The host's process id, so an extension can notice it is orphaned; 0 (the default) means unknown. */
  hostPid: Schema.Int.pipe(Schema.withDecodingDefaultKey(Effect.succeed(0))),
  /** The user's settings of the extension (defined here); left out, the extension has none. */
  settings: Schema.optionalKey(Settings)
})

/**
 * Every field may be left out, and so may the params themselves: the protocol's own example frame sends
 * `"params": {}` (docs/protocol.md, "initialize"). Decoding fills in the defaults, except for `dataDir`, whose
 * default comes from the extension's environment.
 *
 * @since 0.1.0
 * @category schemas
 */
export const InitializeParams = Schema.UndefinedOr(Schema.toEncoded(InitializeFields)).pipe(
  Schema.decodeTo(InitializeFields, {
    decode: SchemaGetter.transform((params) => params ?? {}),
    encode: SchemaGetter.passthroughSubtype()
  })
)

/**
 * @since 0.1.0
 * @category schemas
 */
export type InitializeParams = typeof InitializeParams.Type

/**
 * A command an extension offers: a stable id (`hl7.anonymise`) and a title for menus.
 *
 * @since 0.1.0
 * @category schemas
 */
export const CommandInfo = Schema.Struct({
  id: Schema.String.check(Schema.isMinLength(1)),
  title: Schema.String,
  description: Schema.optional(Schema.String)
})

/**
 * @since 0.1.0
 * @category schemas
 */
export type CommandInfo = typeof CommandInfo.Type

/**
 * The longest extension name a host accepts: the name becomes a directory name, and names are short words.
 *
 * @since 0.1.0
 * @category models
 */
export const MAX_NAME_LENGTH = 128

const namePattern = new RegExp(`^[A-Za-z0-9._-]{1,${MAX_NAME_LENGTH}}$`)

/**
 * Whether `name` can name an extension: 1 to {@link MAX_NAME_LENGTH} letters, digits, ".", "_" or "-", not dots only.
 * The name becomes the extension's data directory, `<dataDir>/extensions/<name>`, so it must be one path segment (no
 * separator) and not "." or "..", the directory itself or its parent (Windows also drops the trailing dots of a
 * segment). The host refuses an `initialize` answer whose name breaks the rule; the SDK refuses to run such an
 * extension.
 *
 * @example
 * ```ts
 * import { HermesProtocol } from "@lifeline/hermes"
 *
 * HermesProtocol.isExtensionName("hl7-tools") // true
 * HermesProtocol.isExtensionName("..") // false
 * HermesProtocol.isExtensionName("../../x") // false
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const isExtensionName = (name: string): boolean => namePattern.test(name) && !/^\.+$/.test(name)

/**
 * @since 0.1.0
 * @category schemas
 */
export const InitializeResult = Schema.Struct({
  name: Schema.String.check(Schema.isMinLength(1)),
  version: Schema.String,
  commands: Schema.Array(CommandInfo)
})

/**
 * @since 0.1.0
 * @category schemas
 */
export type InitializeResult = typeof InitializeResult.Type

/**
 * Host → extension request, sent right after the process starts. The extension answers with its name, version and
 * commands within {@link INITIALIZE_TIMEOUT}.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Initialize = Method.request("initialize", {
  params: InitializeParams,
  result: InitializeResult,
  timeout: INITIALIZE_TIMEOUT
})

/**
 * Host → extension notification: the host has read the `initialize` answer; commands may follow.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Initialized = Method.notification("initialized", { params: Method.NoParams })

// -- shutdown --------------------------------------------------------------------------------------------------

/**
 * The reasons for a shutdown that the protocol names (docs/protocol.md, "shutdown"). The host sends one of them; an
 * extension accepts any string, and reads one it does not know as `closing`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ShutdownReason = Schema.Literals(["closing", "disabled", "reload", "error"])

/**
 * @since 0.1.0
 * @category schemas
 */
export type ShutdownReason = typeof ShutdownReason.Type

/**
 * Whether `reason` is one of the four {@link ShutdownReason}s.
 *
 * @since 0.1.0
 * @category models
 */
export const isShutdownReason: (reason: unknown) => reason is ShutdownReason = Schema.is(ShutdownReason)

/**
 * `reason` is any string: a reason outside {@link ShutdownReason} must not make the extension refuse to shut down
 * (the host would kill it, and its state would be lost). Params may be `{}` or left out.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ShutdownParams = Schema.UndefinedOr(Schema.Struct({ reason: Schema.optional(Schema.String) }))

/**
 * @since 0.1.0
 * @category schemas
 */
export type ShutdownParams = typeof ShutdownParams.Type

/**
 * Why a state file could not be read: it could not be opened or read at all (`Unreadable`: permissions, a directory
 * in its place), it is not JSON (`InvalidJson`: truncated, corrupt), or its JSON does not match the extension's
 * Schema (`SchemaMismatch`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const StateProblem = Schema.Literals(["Unreadable", "InvalidJson", "SchemaMismatch"])

/**
 * @since 0.1.0
 * @category schemas
 */
export type StateProblem = typeof StateProblem.Type

/**
 * What the host should know about a shutdown that succeeded (docs/protocol.md, "shutdown"): `stateSetAside` when the
 * state file could not be read at start and was moved to `path` rather than overwritten.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ShutdownData = Schema.Struct({
  stateSetAside: Schema.optional(Schema.Struct({ path: Schema.String, reason: StateProblem, detail: Schema.String }))
})

/**
 * @since 0.1.0
 * @category schemas
 */
export type ShutdownData = typeof ShutdownData.Type

/**
 * `{ success }`, and `data` only when there is something the host should know although the cleanup succeeded.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ShutdownResult = Schema.Struct({ success: Schema.Boolean, data: Schema.optional(ShutdownData) })

/**
 * @since 0.1.0
 * @category schemas
 */
export type ShutdownResult = typeof ShutdownResult.Type

/**
 * Host → extension request: clean up and answer within {@link SHUTDOWN_TIMEOUT}, then exit. A failed cleanup
 * answers error {@link SHUTDOWN_FAILED} with the reason in `data`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Shutdown = Method.request("shutdown", {
  params: ShutdownParams,
  result: ShutdownResult,
  timeout: SHUTDOWN_TIMEOUT
})

// -- commands and windows --------------------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category schemas
 */
export const ExecuteCommandParams = Schema.Struct({
  command: Schema.String,
  arguments: Schema.optional(Schema.Array(Schema.Unknown))
})

/**
 * @since 0.1.0
 * @category schemas
 */
export type ExecuteCommandParams = typeof ExecuteCommandParams.Type

/**
 * Host → extension notification: run a command. Fire and forget: never answered; the extension does its work by
 * calling `editor/*` and `ui/*` (docs/protocol.md, "command/execute").
 *
 * @since 0.1.0
 * @category schemas
 */
export const ExecuteCommand = Method.notification("command/execute", { params: ExecuteCommandParams })

/**
 * @since 0.1.0
 * @category schemas
 */
export const WindowClosedParams = Schema.Struct({ windowId: Schema.String })

/**
 * Host → extension notification: a window the extension opened was closed (by the user, or by the host).
 *
 * @since 0.1.0
 * @category schemas
 */
export const WindowClosed = Method.notification("window/closed", { params: WindowClosedParams })

// -- editor ----------------------------------------------------------------------------------------------------

/**
 * `raw`: the HL7 v2 text, segments separated by `\r`. `json`: the JSON view described in `Hl7.toJson`, as a string.
 *
 * @since 0.1.0
 * @category schemas
 */
export const MessageFormat = Schema.Literals(["json", "raw"])

/**
 * @since 0.1.0
 * @category schemas
 */
export type MessageFormat = typeof MessageFormat.Type

/**
 * @since 0.1.0
 * @category schemas
 */
export const GetMessageParams = Schema.UndefinedOr(Schema.Struct({ format: Schema.optional(MessageFormat) }))

/**
 * Extension → host request: the current message, `raw` unless asked otherwise.
 *
 * @since 0.1.0
 * @category schemas
 */
export const GetMessage = Method.request("editor/getMessage", {
  params: GetMessageParams,
  result: Schema.Struct({ message: Schema.String })
})

/**
 * One edit: a path in HL7 notation (`PID-5.1`) and the plain value to put there; `null` clears it.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Patch = Schema.Struct({ path: Schema.String, value: Schema.NullOr(Schema.String) })

/**
 * @since 0.1.0
 * @category schemas
 */
export type Patch = typeof Patch.Type

/**
 * @since 0.1.0
 * @category schemas
 */
export const PatchMessageParams = Schema.Struct({ patches: Schema.Array(Patch) })

/**
 * Extension → host request: applies every patch, in order, or none of them. A bad path or a current message that is
 * not HL7 answers -32602 with an `Hl7Error` in `data` (plus the failing patch's `index`), and the message is left
 * unchanged. The result is the number of patches applied.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PatchMessage = Method.request("editor/patchMessage", {
  params: PatchMessageParams,
  result: Schema.Struct({ applied: Schema.Int })
})

/**
 * Extension → host request: replaces the whole message with raw HL7 text; text that is not HL7 answers -32602.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SetMessage = Method.request("editor/setMessage", {
  params: Schema.Struct({ message: Schema.String }),
  result: Schema.Struct({ success: Schema.Boolean })
})

// -- ui --------------------------------------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category schemas
 */
export const OpenWindowParams = Schema.Struct({
  url: Schema.String,
  title: Schema.optional(Schema.String),
  width: Schema.optional(Schema.Int),
  height: Schema.optional(Schema.Int)
})

/**
 * @since 0.1.0
 * @category schemas
 */
export type OpenWindowParams = typeof OpenWindowParams.Type

/**
 * Extension → host request: opens a browser window on `url` (usually served by the extension on a loopback port).
 * The answer carries the window's id; `window/closed` with that id follows when it is closed.
 *
 * @since 0.1.0
 * @category schemas
 */
export const OpenWindow = Method.request("ui/openWindow", {
  params: OpenWindowParams,
  result: Schema.Struct({ windowId: Schema.String })
})

// -- protocols -------------------------------------------------------------------------------------------------

/**
 * The protocol seen from Hermes: it serves `editor/*` and `ui/*`, and calls the rest.
 *
 * @example
 * ```ts
 * import { HermesProtocol } from "@lifeline/hermes"
 *
 * HermesProtocol.Host.serves.map((method) => method.name) // editor/getMessage, ..., ui/openWindow
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const Host = Protocol.make({
  serves: [GetMessage, PatchMessage, SetMessage, OpenWindow],
  calls: [Initialize, Initialized, Shutdown, ExecuteCommand, WindowClosed]
})

/**
 * The protocol seen from an extension: {@link Host} flipped.
 *
 * @example
 * ```ts
 * import { HermesProtocol } from "@lifeline/hermes"
 *
 * HermesProtocol.Extension.serves.map((method) => method.name) // initialize, initialized, shutdown, ...
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const Extension = Protocol.flip(Host)

/**
 * The methods Hermes serves.
 *
 * @since 0.1.0
 * @category models
 */
export type HostServes = typeof Host extends Protocol.Protocol<infer S, any> ? S : never

/**
 * The methods Hermes calls (what an extension serves).
 *
 * @since 0.1.0
 * @category models
 */
export type HostCalls = typeof Host extends Protocol.Protocol<any, infer C> ? C : never
