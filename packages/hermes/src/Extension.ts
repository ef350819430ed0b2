/**
 * The extension SDK: what an extension author writes (a name, a version, commands with handlers, optional resources
 * and state) and the one call that runs it over a `Transport`. The SDK answers `initialize`, runs commands, and
 * does the protocol's shutdown checklist itself (docs/protocol.md, "shutdown"): stop accepting work, cancel or drain
 * commands under the shutdown policy, close windows and release resources through their finalizers, persist state
 * atomically, answer, exit.
 *
 * @since 0.1.0
 */
import type * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import type * as Transport from "@lifeline/kernel/Transport"
import type * as Config from "effect/Config"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as FileSystem from "effect/FileSystem"
import type * as Path from "effect/Path"
import type * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type * as SubscriptionRef from "effect/SubscriptionRef"
import type * as Editor from "./Editor.js"
import type * as HermesProtocol from "./HermesProtocol.js"
import * as internal from "./internal/extension.js"

/**
 * What a command's handler gets besides the `Editor` service.
 *
 * @since 0.1.0
 * @category models
 */
export interface CommandContext<S, Res> {
  /** The command id, as the host sent it. */
  readonly command: string
  readonly arguments: ReadonlyArray<unknown>
  /** The extension's state: loaded at start, persisted at shutdown. */
  readonly state: SubscriptionRef.SubscriptionRef<S>
  /** What `resources` acquired. */
  readonly resources: Res
  /**
   * The user's settings of the extension, as the host sent them in `initialize` (docs/protocol.md, "initialize"): a
   * JSON object of at most `HermesProtocol.MAX_SETTINGS_BYTES`, empty when the host sent none. Changed settings come
   * with a restart: the host shuts the extension down with reason `reload` and starts it again with the new ones.
   */
  readonly settings: HermesProtocol.Settings
}

/**
 * A command. `run` may take long: it runs in its own fiber and is interrupted (its finalizers run) when the shutdown
 * policy cancels it. It runs in its own Scope, closed when it ends. Failures are logged: `command/execute` is never
 * answered.
 *
 * @since 0.1.0
 * @category models
 */
export interface Command<S, Res, R> {
  readonly title: string
  readonly description?: string | undefined
  readonly run: (context: CommandContext<S, Res>) => Effect.Effect<void, unknown, R | Editor.Editor | Scope.Scope>
}

/**
 * State persisted across runs as JSON in `<dataDir>/extensions/<name>/state.json`: decoded with `schema` at start
 * (`initial` when there is no file), encoded and written atomically at shutdown.
 *
 * A file that could not be read (unreadable, not JSON, or not matching `schema`) is never overwritten: while answering
 * `initialize`, it is moved to `state.json.bad-<timestamp>`, a warning is logged, the run starts from `initial`, and
 * the shutdown answer names the moved file in `data.stateSetAside`. If it cannot be moved either, it is left as it is,
 * nothing is saved over it, and the shutdown answers -32000 (docs/protocol.md, "shutdown").
 *
 * @since 0.1.0
 * @category models
 */
export interface StateOptions<S, I> {
  readonly schema: Schema.Codec<S, I>
  readonly initial: S
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<S, Res, R> {
  /**
   * The extension's name: 1 to 128 letters, digits, `.`, `_` or `-`, not dots only, since it names its data directory
   * (`HermesProtocol.isExtensionName`, the rule hosts check). Any other name is a defect of `run`.
   */
  readonly name: string
  readonly version: string
  readonly commands: { readonly [id: string]: Command<S, Res, R> }
  readonly state?: StateOptions<S, any> | undefined
  /**
   * Acquired while answering `initialize` (a failure answers it with an error), released during shutdown, before
   * the state is persisted. HTTP servers behind windows, database connections and files belong here.
   */
  readonly resources?: Effect.Effect<Res, unknown, R | Scope.Scope> | undefined
  /**
   * What happens to running commands at shutdown. Default: the kernel's one rule, `ShutdownPolicy.resolve`: the
   * `ShutdownPolicy` service when provided, else the policy in `LIFELINE_SHUTDOWN_POLICY` / `LIFELINE_DRAIN_TIMEOUT`,
   * else fail-fast (cancel them at once). An invalid value in the environment fails `run` with the `ConfigError` that
   * names the variable (logged at Error level first): it is never replaced by another policy.
   */
  readonly policy?: ShutdownPolicy.Policy | undefined
  /**
   * The whole shutdown checklist, drain included, finishes within this bound. Default 4 seconds: the host waits 5
   * (docs/protocol.md, "Lifecycle"), and the answer needs time to travel.
   */
  readonly shutdownBudget?: Duration.Input | undefined
  /**
   * Commands that run at once; one more `command/execute` waits for a slot. At least 1. Default 16
   * ({@link defaultCommandLimits}).
   */
  readonly maxConcurrentCommands?: number | undefined
  /**
   * Commands that may wait for a slot, in the order they came. One more `command/execute` is refused: a notification
   * cannot be answered, so it is counted (`Outcome.refusedCommands`) and logged at Warning level (the first of a burst
   * with its id, escaped; then how many the burst refused). Waiting commands that have not started when the shutdown
   * begins never start (they count as `cancelled`). At least 0. Default 64 ({@link defaultCommandLimits}).
   */
  readonly maxQueuedCommands?: number | undefined
}

/**
 * The bounds on the commands an extension holds at once, and why:
 *
 * - `maxConcurrentCommands` 16: a person starts commands one click at a time, and a command that waits for the host
 *   holds a slot only while it waits; 16 at once is far beyond what a user does, small enough that a stuck host
 *   cannot make the extension hold thousands of fibers.
 * - `maxQueuedCommands` 64: a burst of clicks (or a script) is queued, not lost. Without the bound, 100,000
 *   `command/execute` notifications made an SDK extension hold them all (1.75 GB RSS); with it, the same flood leaves
 *   the process within a few MB of its size at rest (test/HermesCommandFlood.test.ts).
 *
 * @since 0.1.0
 * @category models
 */
export const defaultCommandLimits: {
  readonly maxConcurrentCommands: number
  readonly maxQueuedCommands: number
} = internal.defaultCommandLimits

/**
 * An extension, ready to run.
 *
 * @since 0.1.0
 * @category models
 */
export interface Extension<S, Res, R> {
  readonly options: Options<S, Res, R>
  /** The commands as `initialize` announces them. */
  readonly commands: ReadonlyArray<HermesProtocol.CommandInfo>
}

/**
 * How a run ended.
 *
 * - `Shutdown`: the host asked (`reason` is the host's; a reason the protocol does not name reads as `closing`, and
 *   none as `undefined`), and `failures` lists what the cleanup could not do (empty when the answer was
 *   `{ success: true }`).
 * - `EndOfInput`: the host closed the connection (it exited or crashed) without `shutdown`; the same checklist ran.
 * - `HostExited`: the `HostMonitor` reported that the host process named in `initialize` (`hostPid`) is gone while
 *   the connection was still open (someone else holds the pipe); the same checklist ran.
 * - `Interrupted`: the run was interrupted (SIGTERM, SIGINT): the checklist ran as a finalizer.
 * - `Failed`: the connection failed (broken framing, a handshake error) and the checklist ran.
 *
 * @since 0.1.0
 * @category models
 */
export interface Outcome {
  readonly _tag: "Shutdown" | "EndOfInput" | "HostExited" | "Interrupted" | "Failed"
  readonly reason: HermesProtocol.ShutdownReason | undefined
  readonly failures: ReadonlyArray<string>
  /**
   * Commands cancelled by the shutdown (after the drain, if any), and commands waiting for a slot that never started.
   */
  readonly cancelled: number
  /** `command/execute` notifications refused because `maxConcurrentCommands` ran and `maxQueuedCommands` waited. */
  readonly refusedCommands: number
}

/**
 * Defines an extension.
 *
 * @example
 * ```ts
 * import { Effect, Schema, SubscriptionRef } from "effect"
 * import { Editor, Extension } from "@lifeline/hermes"
 *
 * const hello = Extension.make({
 *   name: "hello",
 *   version: "1.0.0",
 *   state: { schema: Schema.Struct({ runs: Schema.Number }), initial: { runs: 0 } },
 *   commands: {
 *     "hello.sign": {
 *       title: "Sign the message",
 *       run: ({ state }) =>
 *         Effect.gen(function*() {
 *           const { runs } = yield* SubscriptionRef.updateAndGet(state, (s) => ({ runs: s.runs + 1 }))
 *           yield* Editor.patchMessage([{ path: "MSH-3", value: `hello-${runs}` }])
 *         })
 *     }
 *   }
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <S = void, Res = void, R = never>(
  options: Options<S, Res, R>
): Extension<S, Res, Exclude<R, Editor.Editor | Scope.Scope>> => ({
  // What the SDK provides itself (the Editor, each command's Scope) is not asked of whoever runs the extension.
  options: options as Options<S, Res, any>,
  commands: Object.entries(options.commands).map(([id, command]) =>
    command.description === undefined
      ? { id, title: command.title }
      : { id, title: command.title, description: command.description }
  )
})

/**
 * Runs an extension over the `Transport` in the context (NodeStdio for a real extension) until the host shuts it
 * down or goes away, then does the shutdown checklist. State goes through the `FileSystem` and `Path` services. It
 * ends by itself; interrupting it (a signal) runs the same checklist.
 *
 * "Goes away" is the end of its input, or, when the context has a `HostMonitor` and `initialize` carries a `hostPid`
 * other than 0, the exit of that process even though the input stays open (outcome `HostExited`).
 *
 * Under `NodeSignals.runMain` (a context with `GracefulShutdown`), the first SIGTERM, SIGINT or SIGHUP runs the
 * checklist, a drain included, while the connection to the host is still open; then the run is interrupted. A second
 * signal cuts the drain short. The connection itself is not registered: it closes after the checklist.
 *
 * It fails only when no policy is given in code or by a layer and the environment's is invalid (`ConfigError`).
 *
 * `initialize` may leave out any of its params, or all of them (docs/protocol.md, "initialize"): the data directory is
 * then `HERMES_DATA_DIR` from the `ConfigProvider` (the environment), else `$HOME/.hermes`, and the host's pid is
 * unknown (nothing is watched).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Extension } from "@lifeline/hermes"
 *
 * declare const extension: Extension.Extension<void, void, never>
 * const main = Extension.run(extension).pipe(Effect.tap((outcome) => Effect.logInfo(`extension ended: ${outcome._tag}`)))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const run: <S, Res, R>(
  extension: Extension<S, Res, R>
) => Effect.Effect<
  Outcome,
  Config.ConfigError,
  Transport.Transport | FileSystem.FileSystem | Path.Path | Exclude<R, Editor.Editor | Scope.Scope>
> = internal.run
