/**
 * How a client opens an MCP conversation over stdio with a server of either era: MCP 2026-07-28 has no `initialize`
 * (each request names its version and the client's capabilities in `params._meta`), and a client probes with
 * `server/discover`; a server that refuses the probe with any error but "unsupported protocol version" (-32022), or
 * does not answer it within `discoverTimeout`, speaks an older version, and the client falls back to `initialize` and
 * `notifications/initialized` (up to 2025-11-25). What the server answers is untrusted: validated with Schema, its
 * texts bounded; an answer outside the bounds fails with a `NegotiationError` that says which. docs/mcp.md, "MCP
 * 2026-07-28 and the fallback".
 *
 * @since 0.2.0
 */
import type * as Message from "@lifeline/jsonrpc/Message"
import type * as RpcError from "@lifeline/jsonrpc/RpcError"
import type * as Peer from "@lifeline/kernel/Peer"
import type * as PeerError from "@lifeline/kernel/PeerError"
import * as UntrustedText from "@lifeline/kernel/UntrustedText"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

/**
 * The version without `initialize`.
 *
 * @since 0.2.0
 * @category models
 */
export const modernVersion = "2026-07-28"

/**
 * The versions of `initialize` a client of this module speaks, newest first; the first is what it offers.
 *
 * @since 0.2.0
 * @category models
 */
export const legacyVersions = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] as const

/**
 * @since 0.2.0
 * @category models
 */
export type Version = typeof modernVersion | typeof legacyVersions[number]

/**
 * The error a 2026-07-28 server answers a request whose version it does not speak with (`data`: `supported`,
 * `requested`): the one refusal of `server/discover` that does not mean "older server".
 *
 * @since 0.2.0
 * @category models
 */
export const unsupportedProtocolVersionCode = -32022

/**
 * What negotiating needs of a peer: the kernel's `Peer` has it.
 *
 * @since 0.2.0
 * @category models
 */
export type Caller = Pick<Peer.Peer<any, any>, "callUntyped" | "notifyUntyped">

/**
 * @since 0.2.0
 * @category models
 */
export interface Options {
  readonly clientInfo: { readonly name: string; readonly version: string }
  /** What the client offers (`roots`, `sampling`, ...): in `initialize`, or in each 2026-07-28 request. Default `{}`. */
  readonly capabilities?: Readonly<Record<string, unknown>> | undefined
  /**
   * `"auto"` (the default): probe with `server/discover`, fall back to `initialize`. `"modern"`: no fallback (an
   * older server is an `UnsupportedVersion` error). `"legacy"`: `initialize` only, no probe.
   */
  readonly mode?: "auto" | "modern" | "legacy" | undefined
  /**
   * How long `server/discover` may go unanswered before the server is taken for an older one (the specification's
   * "reasonable timeout"; the probe is then cancelled with `notifications/cancelled`). Default 10 seconds, as the
   * Rust and Dart SDKs: long enough for a server that is slow to start.
   */
  readonly discoverTimeout?: Duration.Input | undefined
  /** The longest text of the server's identity (`name`, `version`, `title`) and of a version. Default 256. */
  readonly maxTextLength?: number | undefined
  /** The longest `instructions` the server may give. Default 65,536 characters. */
  readonly maxInstructionsLength?: number | undefined
  /** The most versions `server/discover` may list. Default 64. */
  readonly maxVersions?: number | undefined
}

/**
 * What the `server/discover` probe gave: an answer, a refusal (the server is older), no answer in time, or no probe.
 *
 * @since 0.2.0
 * @category models
 */
export type Probe =
  | { readonly _tag: "Answered" }
  /** No answer in time, then `initialize` refused with -32022: a 2026-07-28 server slow to start, asked again. */
  | { readonly _tag: "AnsweredOnRetry"; readonly timeoutMillis: number }
  | { readonly _tag: "Refused"; readonly code: number; readonly message: string }
  | { readonly _tag: "Silent"; readonly timeoutMillis: number }
  | { readonly _tag: "Skipped" }

/**
 * @since 0.2.0
 * @category models
 */
export interface Negotiated {
  readonly protocolVersion: Version
  readonly era: "modern" | "legacy"
  readonly serverInfo: { readonly name: string; readonly version: string; readonly title?: string | undefined } | null
  /** The server's capabilities, as it sent them (a JSON object). */
  readonly capabilities: Readonly<Record<string, unknown>>
  readonly instructions: string | null
  /** What `server/discover` listed; for an older server, the version `initialize` agreed on. */
  readonly supportedVersions: ReadonlyArray<string>
  readonly probe: Probe
  /**
   * The params of a request in the negotiated version: under 2026-07-28 with its `_meta` (version, client info and
   * capabilities; the caller's own `_meta` keys kept), as they are under an older version.
   */
  readonly params: (params: Readonly<Record<string, unknown>>) => Message.Params
}

/**
 * The server cannot be spoken to: it speaks no version this client does (`UnsupportedVersion`), or its answer to
 * `server/discover` or `initialize` is not what the specification says or is over a bound (`InvalidResult`), or the
 * connection ended while the probe waited for its answer (`ClosedOnProbe`: some older servers exit on a request they
 * do not know; start the server again and negotiate with `mode: "legacy"`). What the server sent is shown escaped and
 * cut (`UntrustedText.shown`).
 *
 * @since 0.2.0
 * @category errors
 */
export class NegotiationError extends Schema.TaggedError<NegotiationError>("@lifeline/mcp/NegotiationError")(
  "NegotiationError",
  {
    reason: Schema.Literals(["UnsupportedVersion", "InvalidResult", "ClosedOnProbe"]),
    detail: Schema.String
  }
) {
  override get message(): string {
    return `MCP negotiation: ${this.reason}: ${this.detail}`
  }
}

const schemas = (maxText: number, maxInstructions: number, maxVersions: number) => {
  const Text = Schema.String.check(Schema.isMaxLength(maxText))
  const Implementation = Schema.Struct({ name: Text, version: Text, title: Schema.optional(Text) })
  const JsonObject = Schema.Record(Schema.String, Schema.Unknown)
  const Instructions = Schema.optional(Schema.String.check(Schema.isMaxLength(maxInstructions)))
  return {
    discover: Schema.decodeUnknownResult(Schema.Struct({
      supportedVersions: Schema.Array(Text).check(Schema.isMaxLength(maxVersions)),
      capabilities: JsonObject,
      instructions: Instructions,
      _meta: Schema.optional(Schema.Struct({ "io.modelcontextprotocol/serverInfo": Schema.optional(Implementation) }))
    })),
    initialize: Schema.decodeUnknownResult(Schema.Struct({
      protocolVersion: Text,
      capabilities: JsonObject,
      serverInfo: Schema.optional(Implementation),
      instructions: Instructions
    })),
    rejection: Schema.decodeUnknownOption(Schema.Struct({ supported: Schema.Array(Schema.String) }))
  }
}

const invalid = (method: string, error: Schema.SchemaError) =>
  new NegotiationError({ reason: "InvalidResult", detail: `${method}: ${UntrustedText.shown(error.message, 400)}` })

const unsupported = (detail: string) => new NegotiationError({ reason: "UnsupportedVersion", detail })

const shownList = (values: ReadonlyArray<string>) =>
  values.length === 0 ? "none" : values.slice(0, 8).map((value) => UntrustedText.shown(value, 40)).join(", ")

/**
 * Opens the conversation: `server/discover` (unless `mode` is `"legacy"`), and `initialize` +
 * `notifications/initialized` when the probe says the server is older. The probe counts as refused on any JSON-RPC
 * error but -32022, and as silent on no answer within `discoverTimeout` (or the peer's own request timeout); a
 * connection that ends during the probe is `ClosedOnProbe` (a server that exits on a request it does not know cannot
 * be spoken to on the same process), and during `initialize` the peer's own error.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Negotiation } from "@lifeline/mcp"
 * import type { Peer } from "@lifeline/kernel"
 *
 * declare const peer: Peer.Peer<never, never>
 * const tools = Effect.gen(function*() {
 *   const session = yield* Negotiation.negotiate(peer, { clientInfo: { name: "my-host", version: "1.0.0" } })
 *   // session.protocolVersion: "2026-07-28", or "2025-11-25" from an older server
 *   return yield* peer.callUntyped("tools/list", session.params({}))
 * })
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const negotiate = (
  caller: Caller,
  options: Options
): Effect.Effect<Negotiated, NegotiationError | Peer.CallError> =>
  Effect.gen(function*() {
    const decode = schemas(
      options.maxTextLength ?? 256,
      options.maxInstructionsLength ?? 65_536,
      options.maxVersions ?? 64
    )
    const capabilities = options.capabilities ?? {}
    const meta = {
      "io.modelcontextprotocol/protocolVersion": modernVersion,
      "io.modelcontextprotocol/clientInfo": options.clientInfo,
      "io.modelcontextprotocol/clientCapabilities": capabilities
    }
    const mode = options.mode ?? "auto"
    const discovered = (answered: unknown, probe: Probe) =>
      Effect.gen(function*() {
        const result = yield* Effect.mapError(
          Effect.fromResult(decode.discover(answered)),
          (e) => invalid("server/discover", e)
        )
        if (!result.supportedVersions.includes(modernVersion)) {
          return yield* unsupported(`the server speaks ${shownList(result.supportedVersions)}, not ${modernVersion}`)
        }
        return {
          protocolVersion: modernVersion,
          era: "modern",
          serverInfo: result._meta?.["io.modelcontextprotocol/serverInfo"] ?? null,
          capabilities: result.capabilities,
          instructions: result.instructions ?? null,
          supportedVersions: result.supportedVersions,
          probe,
          params: (params) => ({
            ...params,
            _meta: { ...meta, ...(params._meta as Readonly<Record<string, unknown>> | undefined) }
          })
        } satisfies Negotiated
      })
    let probe: Probe = { _tag: "Skipped" }
    if (mode !== "legacy") {
      const timeout = Duration.fromInputUnsafe(options.discoverTimeout ?? "10 seconds")
      const answer = yield* caller.callUntyped("server/discover", { _meta: meta }).pipe(
        // The bound is ours, on the Clock; running out interrupts the call, and the kernel then cancels it on the wire.
        Effect.timeoutOption(timeout),
        Effect.map(Option.match({
          onNone: (): Answer => ({ _tag: "Silent", timeoutMillis: Duration.toMillis(timeout) }),
          onSome: (result): Answer => ({ _tag: "Answered", result })
        })),
        // The server's end of the connection closed (it exited): not a refusal. A connection that failed (a frame over
        // its bound) or stalled keeps the peer's own error.
        Effect.catchIf(
          (error): error is PeerError.PeerClosed | PeerError.PeerExited =>
            error._tag === "PeerExited" || (error._tag === "PeerClosed" && error.reason === "TransportClosed"),
          (error) =>
            Effect.fail(
              new NegotiationError({
                reason: "ClosedOnProbe",
                detail: `the connection ended before server/discover was answered: ${
                  UntrustedText.shown(error.message)
                }`
              })
            )
        ),
        Effect.catchTag(
          "RequestTimeout",
          (error: PeerError.RequestTimeout) =>
            Effect.succeed<Answer>({ _tag: "Silent", timeoutMillis: error.timeoutMillis })
        ),
        Effect.catchTag("RpcError", (error: RpcError.RpcError) => {
          if (error.code !== unsupportedProtocolVersionCode) {
            return Effect.succeed<Answer>({
              _tag: "Refused",
              code: error.code,
              message: UntrustedText.shown(error.message)
            })
          }
          const supported = Option.match(decode.rejection(error.data), {
            onNone: () => "none given",
            onSome: (data) => shownList(data.supported)
          })
          return Effect.fail(unsupported(`the server speaks ${supported}, not ${modernVersion}`))
        })
      )
      if (answer._tag === "Answered") return yield* discovered(answer.result, { _tag: "Answered" })
      probe = answer
      if (mode === "modern") {
        return yield* unsupported(
          answer._tag === "Silent"
            ? `server/discover got no answer within ${answer.timeoutMillis} ms`
            : `server/discover was refused (${answer.code} ${answer.message}): an older server`
        )
      }
    }
    const silent = probe
    const initialized = yield* caller.callUntyped("initialize", {
      protocolVersion: legacyVersions[0],
      capabilities,
      clientInfo: options.clientInfo
    }).pipe(
      Effect.map((answered) => ({ _tag: "Initialized" as const, answered })),
      // A probe left unanswered only because the server was slow to start, by a server that has no `initialize`.
      Effect.catchIf(
        (error) =>
          silent._tag === "Silent" && error._tag === "RpcError" && error.code === unsupportedProtocolVersionCode,
        () =>
          Effect.map(
            caller.callUntyped("server/discover", { _meta: meta }),
            (answered) => ({ _tag: "Discovered" as const, answered })
          )
      )
    )
    if (initialized._tag === "Discovered") {
      const timeoutMillis = silent._tag === "Silent" ? silent.timeoutMillis : 0
      return yield* discovered(initialized.answered, { _tag: "AnsweredOnRetry", timeoutMillis })
    }
    const answered = initialized.answered
    const result = yield* Effect.mapError(
      Effect.fromResult(decode.initialize(answered)),
      (e) => invalid("initialize", e)
    )
    const version = legacyVersions.find((known) => known === result.protocolVersion)
    if (version === undefined) {
      // The specification has the client disconnect from a server whose version it does not speak.
      return yield* unsupported(`initialize answered ${shownList([result.protocolVersion])}`)
    }
    yield* caller.notifyUntyped("notifications/initialized")
    return {
      protocolVersion: version,
      era: "legacy",
      serverInfo: result.serverInfo ?? null,
      capabilities: result.capabilities,
      instructions: result.instructions ?? null,
      supportedVersions: [version],
      probe,
      params: (params) => ({ ...params })
    } satisfies Negotiated
  })

type Answer =
  | { readonly _tag: "Answered"; readonly result: unknown }
  | Exclude<Probe, { readonly _tag: "Answered" | "AnsweredOnRetry" | "Skipped" }>
