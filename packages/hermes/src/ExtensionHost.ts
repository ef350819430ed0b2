/**
 * The extension host: what Hermes runs for each extension. It spawns the process, asks `initialize` within 10 s
 * (else the extension is failed and its process killed), sends `initialized`, offers the extension's commands and
 * sends `command/execute`, serves `editor/*` from the `MessageStore` and `ui/openWindow` through `WindowPresenter`,
 * and stops it with `shutdown(reason)`: 5 s for the answer, then SIGKILL; an error answer is logged and the process
 * still terminated (docs/protocol.md, `shutdown`). Every stop of a process runs the kernel's one stop ladder
 * (`StopSequence`). Disable, reload and restart after a crash (at most N restarts within a window) are published,
 * like every step, as events. What an extension sends is bounded ({@link Limits}): a request over a bound gets a typed
 * JSON-RPC error, and the host keeps serving.
 *
 * @since 0.1.0
 */
import * as ErrorCode from "@lifeline/jsonrpc/ErrorCode"
import type * as Framing from "@lifeline/jsonrpc/Framing"
import type * as Message from "@lifeline/jsonrpc/Message"
import type * as Process from "@lifeline/process/Process"
import type * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type * as HermesProtocol from "./HermesProtocol.js"
import * as internal from "./internal/extensionHost.js"
import * as model from "./internal/extensionHostModel.js"
import type { CommandRefused, SettingsRefused } from "./internal/extensionHostModel.js"
import type * as MessageStore from "./MessageStore.js"
import type * as Spawner from "./Spawner.js"
import type * as WindowPresenter from "./WindowPresenter.js"

/**
 * Where an extension is in its life.
 *
 * - `Starting`: spawned, `initialize` in flight.
 * - `Ready`: initialized; commands may be executed.
 * - `Stopping`: `shutdown` sent.
 * - `Restarting`: it crashed and is being started again within the restart budget.
 * - `Stopped`, `Disabled`: shut down by the host (`Disabled` never restarts by itself).
 * - `Failed`: `initialize` failed or timed out, or it crashed more often than the restart budget allows.
 *
 * @since 0.1.0
 * @category models
 */
export type Status = "Starting" | "Ready" | "Stopping" | "Restarting" | "Stopped" | "Disabled" | "Failed"

/**
 * How an `initialize` went wrong: no answer within the timeout, an error answer (or one that does not decode), or the
 * process exited (or closed its stdout) first.
 *
 * @since 0.1.0
 * @category models
 */
export type InitializeFailure = "timeout" | "error" | "exited"

/**
 * What a `shutdown` did: the answer to the protocol's `shutdown`, then what the stop sequence (`StopSequence`) had to
 * do to end the process.
 *
 * @since 0.1.0
 * @category models
 */
export interface ShutdownSummary {
  readonly reason: HermesProtocol.ShutdownReason
  /** An answer arrived (success or error) within the timeout. */
  readonly responded: boolean
  /** The answer was `{ success: true }`. */
  readonly success: boolean
  /** The error answer (`code message: data`), or why there was no answer. */
  readonly error: string | undefined
  /** SIGKILL was sent. */
  readonly killed: boolean
  /** SIGTERM was sent (after an error answer, or a process that did not exit by itself). */
  readonly terminated: boolean
  /** How the process ended; undefined only when even SIGKILL was not followed by an exit (`Unkillable`). */
  readonly exit: Process.ExitStatus | undefined
  /** From `ShutdownStarted` to the end of the stop sequence (the kernel's `StopReport.elapsedMillis` and more). */
  readonly elapsedMillis: number
  /** @deprecated The same as `elapsedMillis`, under its former name. */
  readonly elapsedMs: number
}

/**
 * One step in an extension's life, stamped with `Clock` milliseconds (`at`). `generation` counts starts: 1 for the
 * first, one more for each restart or reload.
 *
 * @since 0.1.0
 * @category models
 */
export type Event = Data.TaggedEnum<{
  Spawned: { readonly at: number; readonly generation: number; readonly pid: number | undefined }
  SpawnFailed: { readonly at: number; readonly generation: number; readonly detail: string }
  Initializing: { readonly at: number; readonly generation: number }
  Ready: {
    readonly at: number
    readonly generation: number
    readonly name: string
    readonly version: string
    readonly commands: ReadonlyArray<HermesProtocol.CommandInfo>
  }
  InitializeFailed: {
    readonly at: number
    readonly generation: number
    readonly reason: InitializeFailure
    readonly detail: string
  }
  CommandSent: { readonly at: number; readonly command: string }
  RequestServed: {
    readonly at: number
    readonly method: string
    readonly ok: boolean
    readonly detail: string | undefined
  }
  WindowOpened: {
    readonly at: number
    readonly windowId: string
    readonly url: string
    readonly title: string | undefined
  }
  WindowShown: { readonly at: number; readonly windowId: string; readonly presentation: WindowPresenter.Presentation }
  WindowClosed: { readonly at: number; readonly windowId: string }
  ShutdownStarted: { readonly at: number; readonly reason: HermesProtocol.ShutdownReason }
  ShutdownFinished: { readonly at: number; readonly summary: ShutdownSummary }
  Exited: {
    readonly at: number
    readonly generation: number
    readonly status: Process.ExitStatus
    /** `false` for a crash: it exited without being asked to. */
    readonly expected: boolean
    readonly stderrTail: ReadonlyArray<string>
  }
  Restarting: { readonly at: number; readonly restart: number; readonly maxRestarts: number }
  Failed: { readonly at: number; readonly reason: string }
  StatusChanged: { readonly at: number; readonly status: Status }
}>

/**
 * Constructors, `$is` and `$match` for {@link Event}.
 *
 * @example
 * ```ts
 * import { ExtensionHost } from "@lifeline/hermes"
 *
 * const isCrash = (event: ExtensionHost.Event) => ExtensionHost.Event.$is("Exited")(event) && !event.expected
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const Event: Data.TaggedEnum.Constructor<Event> = model.Event

/**
 * `execute` was refused: the extension is not `Ready`, or has no such command.
 *
 * @since 0.1.0
 * @category errors
 */
export { CommandRefused } from "./internal/extensionHostModel.js"

/**
 * New settings for an extension, for {@link Extension.reloadWith}: each one given replaces the current one, whole (no
 * merge); one left out is kept.
 *
 * @since 0.1.0
 * @category models
 */
export interface Reconfiguration {
  /** The process's arguments after its command. */
  readonly args?: ReadonlyArray<string> | undefined
  /** The process's environment (`HERMES_DATA_DIR` is set over it, as always). */
  readonly env?: { readonly [name: string]: string } | undefined
  /** The `settings` object of `initialize` (docs/protocol.md, "initialize"): JSON, at most `MAX_SETTINGS_BYTES`. */
  readonly settings?: HermesProtocol.Settings | undefined
}

/**
 * Settings the host will not pass: not JSON, or more than `HermesProtocol.MAX_SETTINGS_BYTES` of it. Nothing was
 * stopped or restarted.
 *
 * @since 0.1.0
 * @category errors
 */
export { SettingsRefused } from "./internal/extensionHostModel.js"

/**
 * The restart budget: at most `maxRestarts` restarts after crashes within any `within` window (OTP's intensity and
 * period). One more crash leaves the extension `Failed`.
 *
 * @since 0.1.0
 * @category models
 */
export interface RestartBudget {
  readonly maxRestarts: number
  readonly within: Duration.Input
}

/**
 * The bounds the host puts on what an extension can make it hold or do. Every one is an option of {@link start}; see
 * {@link defaultLimits} for the defaults, and `docs/hosting.md` ("Limits and defences") for what the extension gets.
 *
 * @since 0.1.0
 * @category models
 */
export interface Limits {
  /** Events kept in `history` (and replayed by `events`): the latest ones. */
  readonly historyLimit: number
  /** Characters of text the extension controls (error details, window URLs and titles) kept in one event. */
  readonly maxEventTextLength: number
  /** Windows open at once for the running extension, counting those waiting for their fetch. */
  readonly maxOpenWindows: number
  /** Patches in one `editor/patchMessage`. */
  readonly maxPatches: number
  /** UTF-8 bytes of one patch value. */
  readonly maxPatchValueBytes: number
  /** UTF-8 bytes of all the paths and values of one `editor/patchMessage`. */
  readonly maxPatchRequestBytes: number
}

/**
 * The defaults of {@link Limits}, and why:
 *
 * - `historyLimit` 10,000: the recent past of a busy extension (each request it sends is one event) in a few MB: an
 *   event takes a few hundred bytes, at most about 3 KiB with `maxEventTextLength`. A flood of 32,000 requests left
 *   the host 1 to 4 MiB bigger once collected.
 * - `maxEventTextLength` 1,024: enough for an error message or a URL; the full text went to the extension or to the
 *   presenter.
 * - `maxOpenWindows` 64: more than a person can look at, and a queue the headless presenter (8 fetches at once)
 *   drains within seconds.
 * - `maxPatches` 1,000, `maxPatchValueBytes` 64 KiB, `maxPatchRequestBytes` 1 MiB: far more than an edit of one HL7
 *   message needs, and little enough not to block the host, which applies a request in one synchronous step: 1,000
 *   values of 64 KiB took 11 s there, 16 of them (1 MiB) 0.1 to 0.4 s.
 *
 * @since 0.1.0
 * @category models
 */
export const defaultLimits: Limits = model.defaultLimits

/**
 * The JSON-RPC error code of a `ui/openWindow` refused because the extension has `maxOpenWindows` open: LSP's
 * `RequestFailed` (the request was valid, the host will not serve it now). `data` is
 * `{ reason: "TooManyWindows", limit, actual }`; it may succeed once a window has closed (`window/closed`).
 *
 * @since 0.1.0
 * @category models
 */
export const REQUEST_FAILED = ErrorCode.RequestFailed

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Sent in `initialize` as `hermesVersion`. Default `"0.1.0"`. */
  readonly hermesVersion?: string | undefined
  /** Hermes' data directory, sent in `initialize` and set as `HERMES_DATA_DIR` for the process. */
  readonly dataDir: string
  /**
   * The user's settings of the extension, sent in `initialize` as `settings` (docs/protocol.md, "initialize"); default
   * none (the field is left out). JSON, at most `HermesProtocol.MAX_SETTINGS_BYTES` (64 KiB): over it, or not JSON,
   * the extension is not started and ends `Failed`. Changed later with {@link Extension.reloadWith}.
   */
  readonly settings?: HermesProtocol.Settings | undefined
  /**
   * Sent in `initialize` as `hostPid`: an extension with a `HostMonitor` shuts down when this process is gone, even if
   * its stdin stays open. Pass the host's own pid (`process.pid` in Node). Default 0 (unknown: nothing is watched).
   */
  readonly hostPid?: number | undefined
  /** Default 10 seconds (docs/protocol.md). */
  readonly initializeTimeout?: Duration.Input | undefined
  /** The answer to `shutdown`; none in time, and the process gets SIGKILL at once. Default 5 seconds (docs/protocol.md, `shutdown`). */
  readonly shutdownTimeout?: Duration.Input | undefined
  /**
   * How long a process that answered `shutdown` with success may take to exit by itself (after the end of its stdin)
   * before it gets SIGTERM. Default 2 seconds (docs/protocol.md). The stop sequence's `exitGrace`.
   */
  readonly exitGrace?: Duration.Input | undefined
  /**
   * Between SIGTERM and SIGKILL; also how long a process whose `shutdown` failed (an error answer) may take to exit
   * by itself before SIGTERM. Default 1 second. The stop sequence's `killGrace`; its `verifyTimeout`, after SIGKILL,
   * is `killGrace` + 1 second.
   */
  readonly killGrace?: Duration.Input | undefined
  /** Default: 3 restarts within 60 seconds. */
  readonly restart?: RestartBudget | undefined
  /** Timeout of the host's other calls to the extension. Default 5 seconds. */
  readonly requestTimeout?: Duration.Input | undefined
  /**
   * How many events `history` keeps and `events` replays: the latest ones. Older events are gone; `droppedEvents`
   * counts them. At least 1. Default 10,000 ({@link defaultLimits}).
   */
  readonly historyLimit?: number | undefined
  /**
   * Text the extension controls is cut to this many characters in events, with `… (N more characters)` after it:
   * `RequestServed.detail`, `WindowOpened.url` and `title`, `InitializeFailed.detail`, `Failed.reason`,
   * `ShutdownSummary.error`. Default 1,024.
   */
  readonly maxEventTextLength?: number | undefined
  /**
   * Windows the running extension may have open at once, counting those waiting for their turn to be fetched. One
   * more `ui/openWindow` is answered {@link REQUEST_FAILED} (-32803) with `data`
   * `{ reason: "TooManyWindows", limit, actual }`. Default 64.
   */
  readonly maxOpenWindows?: number | undefined
  /**
   * Patches in one `editor/patchMessage`; more are answered -32602 with `data`
   * `{ reason: "TooManyPatches", limit, actual }`, and nothing is applied. Default 1,000.
   */
  readonly maxPatches?: number | undefined
  /**
   * UTF-8 bytes of one patch value; a longer one is answered -32602 with `data`
   * `{ reason: "ValueTooLarge", index, limit, actual }` (`index`: the first such patch), and nothing is applied.
   * Default 64 KiB.
   */
  readonly maxPatchValueBytes?: number | undefined
  /**
   * UTF-8 bytes of all the paths and values of one `editor/patchMessage`; more are answered -32602 with `data`
   * `{ reason: "PatchesTooLarge", limit, actual }`, and nothing is applied. Default 1 MiB.
   */
  readonly maxPatchRequestBytes?: number | undefined
  /**
   * What one frame from the extension may be and hold, the peer's `limits`: the framing's header and body sizes
   * (`Framing.defaultLimits`) and `maxBatchItems` (1,000), `maxBatchBytes` (16 MiB) and `maxDepth` (128)
   * (`Message.defaultLimits`). A body over one of the latter is answered with one -32600 with id `null`, and nothing
   * of it is served.
   */
  readonly wireLimits?: Partial<Framing.Limits & Message.Limits> | undefined
}

/**
 * One extension under the host.
 *
 * @since 0.1.0
 * @category models
 */
export interface Extension {
  readonly spec: Spawner.Spec
  readonly status: Effect.Effect<Status>
  /** The current status, then each change. */
  readonly statusChanges: Stream.Stream<Status>
  /**
   * The events still in the history (every one so far, or the latest `historyLimit`: older ones are gone, and
   * `droppedEvents` says how many), then each new one as it happens; ends when the host's Scope closes. A subscriber
   * that falls more than `historyLimit` events behind skips the ones that are gone since, and a warning says how many.
   */
  readonly events: Stream.Stream<Event>
  /**
   * The latest `historyLimit` events (every one, until there have been more), oldest first. Older events are gone:
   * `droppedEvents` says how many.
   */
  readonly history: Effect.Effect<ReadonlyArray<Event>>
  /**
   * How many of the earliest events `history` no longer holds: it holds events number `droppedEvents + 1` to
   * `droppedEvents + history.length` of the extension's life. 0 until there have been more than `historyLimit`.
   */
  readonly droppedEvents: Effect.Effect<number>
  /** What the running generation answered to `initialize`. */
  readonly info: Effect.Effect<Option.Option<HermesProtocol.InitializeResult>>
  /** Sends `command/execute`. Fire and forget: it returns once the notification is queued. */
  readonly execute: (
    command: string,
    args?: ReadonlyArray<unknown> | undefined
  ) => Effect.Effect<void, CommandRefused>
  /** Shuts it down (default reason `closing`) and waits until the process is gone. `None` if it was not running. */
  readonly shutdown: (
    reason?: HermesProtocol.ShutdownReason | undefined
  ) => Effect.Effect<Option.Option<ShutdownSummary>>
  /** Shuts it down with reason `disabled`; it stays `Disabled` until `reload`. */
  readonly disable: Effect.Effect<Option.Option<ShutdownSummary>>
  /** Shuts it down with reason `reload` (if it runs) and starts it again; answers the new status. */
  readonly reload: Effect.Effect<Status>
  /**
   * The user changed the extension's settings: shuts it down with reason `reload` (if it runs) and starts it again
   * with `changes` applied (arguments, environment, the `settings` of `initialize`); answers the new status. Settings
   * that are not JSON or over `HermesProtocol.MAX_SETTINGS_BYTES` fail with {@link SettingsRefused}, and nothing is
   * stopped. `spec` then tells the arguments and environment in use.
   */
  readonly reloadWith: (changes: Reconfiguration) => Effect.Effect<Status, SettingsRefused>
  /** Waits until the status satisfies `predicate`. */
  readonly awaitStatus: (predicate: (status: Status) => boolean) => Effect.Effect<Status>
  /**
   * Waits until the extension has sent no request for `settle`, and none is being served: commands are fire and
   * forget, so this is how a host knows they are done. Returns at once if the extension is not running.
   */
  readonly awaitQuiet: (settle: Duration.Input) => Effect.Effect<void>
}

/**
 * Starts an extension and waits until it is `Ready` or `Failed`. It runs until `shutdown` or `disable`, or until the
 * Scope closes, which shuts it down with reason `closing`.
 *
 * Under `NodeSignals.runMain` (any program that provides `GracefulShutdown`), the host registers its stop for the life
 * of the Scope: the first SIGTERM, SIGINT or SIGHUP sends `shutdown` with reason `closing` and runs the stop sequence
 * before the main fiber is interrupted; the second forces it (the process gets SIGKILL at once). The extension's
 * connection itself is not registered: it must stay open until `shutdown` has been answered.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ExtensionHost } from "@lifeline/hermes"
 *
 * const program = Effect.gen(function*() {
 *   const extension = yield* ExtensionHost.start({ command: "node", args: ["hl7-extension.js"] }, {
 *     dataDir: "/tmp/hermes"
 *   })
 *   yield* extension.execute("hl7.anonymise")
 *   yield* extension.awaitQuiet("300 millis")
 *   return yield* extension.shutdown("closing")
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const start: (
  spec: Spawner.Spec,
  options: Options
) => Effect.Effect<
  Extension,
  never,
  Scope.Scope | Spawner.Spawner | MessageStore.MessageStore | WindowPresenter.WindowPresenter
> = internal.start
