/**
 * The one bounded stop sequence for a child process, for every host: shutdown request → close under the policy → end
 * of input → exit grace → SIGTERM to the group → kill grace → SIGKILL → verify the group is gone (docs/shutdown.md).
 * It runs over a {@link Target} each host implements; every wait is a Clock timeout.
 *
 * @since 0.1.0
 */
import * as BoundTable from "@lifeline/kernel/Bounds"
import * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as internal from "./internal/stopSequence.js"
import type * as Process from "./Process.js"

/**
 * A process as the stop sequence sees it. `@lifeline/node` implements it over a child process (signals go to the
 * process group on POSIX); a host with no process groups (the Hermes `Spawner`, Windows) leaves `groupAlive` out.
 *
 * @since 0.1.0
 * @category models
 */
export interface Target {
  /** Waits for the exit. */
  readonly exit: Effect.Effect<Process.ExitStatus>
  /** How it exited, if it has; never waits. */
  readonly exitStatus: Effect.Effect<Option.Option<Process.ExitStatus>>
  /** Sends `signal` to the process group (to the process alone where there are no groups); never waits. */
  readonly signal: (signal: Process.Signal) => Effect.Effect<void>
  /**
   * Whether a live process (the leader or one of its descendants) is left in the process group. Default: the process
   * itself has not exited.
   */
  readonly groupAlive?: Effect.Effect<boolean> | undefined
  /** Ends the process's input (closes its stdin). Idempotent. */
  readonly endInput: Effect.Effect<void>
  /**
   * Waits for the exit at most `timeout`: whether it came. With it the sequence starts no fiber for its waits on the
   * exit. Its timer is the platform's: give it only on the system clock, never under a `TestClock`. Not used while
   * `Steps.forced` can cut the wait short.
   *
   * @since 0.3.0
   */
  readonly exitWithin?: ((timeout: Duration.Duration) => Effect.Effect<boolean>) | undefined
}

/**
 * What the owner of the process plugs in. Each step is optional.
 *
 * @since 0.1.0
 * @category models
 */
export interface Steps {
  /**
   * The protocol's shutdown request (Hermes' `shutdown` with its reason, LSP's `shutdown`), sent while the connection
   * is still open. Fails when the answer is an error; bounded by `shutdownTimeout`.
   */
  readonly shutdown?: Effect.Effect<unknown, unknown> | undefined
  /**
   * Closes the conversation under its shutdown policy: a drain lets work in flight finish, the rest is cut off (and
   * cancelled on the wire where the protocol can), queued frames are flushed, the input ends. Bounded by
   * `closeTimeout`, which is derived from the policy.
   */
  readonly close?: Effect.Effect<unknown> | undefined
  /** Closes the conversation fail-fast: after a forced stop or a SIGKILL. Default: `close`. */
  readonly closeNow?: Effect.Effect<unknown> | undefined
  /**
   * Completes when the stop must be forced (a second SIGTERM or SIGINT to the host): every wait is cut short and
   * SIGKILL follows at once.
   */
  readonly forced?: Effect.Effect<unknown> | undefined
}

/**
 * The bounds of the stop sequence: each default is in {@link defaults} (from `Bounds`), and docs/shutdown.md's table
 * of bounds says what each one bounds. With `killOnShutdownTimeout` (default true) a process that does not answer the
 * shutdown request within `shutdownTimeout` gets SIGKILL at once.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly shutdownTimeout?: Duration.Input | undefined
  /** Default: derived from `policy` and `flushTimeout`; a smaller value is raised to drain + flush. */
  readonly closeTimeout?: Duration.Input | undefined
  readonly flushTimeout?: Duration.Input | undefined
  readonly exitGrace?: Duration.Input | undefined
  readonly killGrace?: Duration.Input | undefined
  readonly verifyTimeout?: Duration.Input | undefined
  readonly killOnShutdownTimeout?: boolean | undefined
  /**
   * Whether the process has an input whose end asks it to stop. Default true. False (a spawner's `kill`, where the
   * caller owns the input): the sequence starts with SIGTERM, without the close step or `exitGrace`.
   */
  readonly endOfInput?: boolean | undefined
  /** The policy the close step runs under. Default: fail-fast (no drain). */
  readonly policy?: ShutdownPolicy.Policy | undefined
}

/**
 * The bounds, decoded and derived: what the sequence waits at most at each step.
 *
 * @since 0.1.0
 * @category models
 */
export interface Bounds {
  readonly shutdownTimeout: Duration.Duration
  readonly closeTimeout: Duration.Duration
  readonly exitGrace: Duration.Duration
  readonly killGrace: Duration.Duration
  readonly verifyTimeout: Duration.Duration
  readonly killOnShutdownTimeout: boolean
  /** Default true: see {@link Options.endOfInput}. */
  readonly endOfInput?: boolean | undefined
}

/**
 * The default of each option.
 *
 * @since 0.1.0
 * @category models
 */
export const defaults = {
  shutdownTimeout: BoundTable.shutdownTimeout,
  flushTimeout: BoundTable.flushTimeout,
  closeSlack: BoundTable.closeSlack,
  exitGrace: BoundTable.exitGrace,
  killGrace: BoundTable.killGrace,
  verifyTimeout: BoundTable.verifyTimeout,
  killOnShutdownTimeout: true
} as const

// A negative bound is a zero one.
const nonNegative = (input: Duration.Input): Duration.Duration =>
  Duration.max(Duration.fromInputUnsafe(input), Duration.zero)

/**
 * Decodes the options once and derives what depends on the policy: `closeTimeout` is at least the drain timeout plus
 * the flush, so the close step never cuts a drain short.
 *
 * @example
 * ```ts
 * import { Duration } from "effect"
 * import { ShutdownPolicy } from "@lifeline/kernel"
 * import { StopSequence } from "@lifeline/process"
 *
 * const bounds = StopSequence.bounds({ policy: ShutdownPolicy.drain("10 seconds") })
 * Duration.toMillis(bounds.closeTimeout) // 12000: 10 s drain + 1 s flush + 1 s
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const bounds = (options: Options = {}): Bounds => {
  const drain = ShutdownPolicy.drainTimeout(options.policy ?? ShutdownPolicy.FailFast())
  const flush = nonNegative(options.flushTimeout ?? defaults.flushTimeout)
  return {
    shutdownTimeout: nonNegative(options.shutdownTimeout ?? defaults.shutdownTimeout),
    closeTimeout: options.closeTimeout === undefined
      ? BoundTable.closeTimeout(drain, flush)
      : Duration.max(nonNegative(options.closeTimeout), Duration.sum(drain, flush)),
    exitGrace: nonNegative(options.exitGrace ?? defaults.exitGrace),
    killGrace: nonNegative(options.killGrace ?? defaults.killGrace),
    verifyTimeout: nonNegative(options.verifyTimeout ?? defaults.verifyTimeout),
    killOnShutdownTimeout: options.killOnShutdownTimeout ?? defaults.killOnShutdownTimeout,
    endOfInput: options.endOfInput ?? true
  }
}

/**
 * The step after which the process was seen to exit (`Exited`: before the stop began); `Unkillable` when even SIGKILL
 * was not followed by an exit within `verifyTimeout`.
 *
 * @since 0.1.0
 * @category models
 */
export type Step = "Exited" | "Shutdown" | "EndOfInput" | "Terminate" | "Kill" | "Unkillable"

/**
 * What became of the protocol shutdown request: not sent (`Skipped`: none was given, or the process had already
 * exited), answered, failed (an error answer, or the process exited first), or no answer within `shutdownTimeout`
 * (`TimedOut`; also when a forced stop cut the wait short).
 *
 * @since 0.1.0
 * @category models
 */
export type ShutdownOutcome = "Skipped" | "Completed" | "Failed" | "TimedOut"

/**
 * What became of the close step: none was given (`Skipped`), it finished, it was still running at `closeTimeout`
 * (`TimedOut`), or a forced stop cut it short (`Forced`).
 *
 * @since 0.1.0
 * @category models
 */
export type CloseOutcome = "Skipped" | "Completed" | "TimedOut" | "Forced"

/**
 * Processes left in the process group once the leader had exited (grandchildren): `None`, or stopped by SIGTERM
 * (`Terminated`), by SIGKILL (`Killed`), or still there after SIGKILL and `verifyTimeout` (`Survived`).
 *
 * @since 0.1.0
 * @category models
 */
export type Descendants = "None" | "Terminated" | "Killed" | "Survived"

/**
 * What a stop did.
 *
 * @since 0.1.0
 * @category models
 */
export interface StopReport {
  readonly endedBy: Step
  readonly shutdown: ShutdownOutcome
  readonly close: CloseOutcome
  readonly descendants: Descendants
  /** Undefined only when the process was `Unkillable`. */
  readonly exit: Process.ExitStatus | undefined
  /** The signals sent to the process group, in order. */
  readonly signals: ReadonlyArray<Process.Signal>
  /** A forced stop (a second signal) cut it short. */
  readonly forced: boolean
  readonly elapsedMillis: number
}

/**
 * Runs the stop sequence once, uninterruptibly (it is usually a finalizer), and reports what it did. Every wait is
 * bounded by {@link bounds}; `steps.forced` cuts them short.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ShutdownPolicy } from "@lifeline/kernel"
 * import { StopSequence } from "@lifeline/process"
 *
 * declare const target: StopSequence.Target
 * declare const connection: { readonly stop: Effect.Effect<unknown>; readonly stopNow: Effect.Effect<unknown> }
 *
 * const stop = StopSequence.run(
 *   target,
 *   { close: connection.stop, closeNow: connection.stopNow },
 *   { policy: ShutdownPolicy.drain("10 seconds"), exitGrace: "2 seconds" }
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const run = (target: Target, steps: Steps, options: Options = {}): Effect.Effect<StopReport> =>
  internal.run(target, steps, bounds(options))

/**
 * {@link run} with bounds decoded once by {@link bounds}: for a supervisor that stops many processes under the same
 * options, so that each stop does not decode them again.
 *
 * @example
 * ```ts
 * import { StopSequence } from "@lifeline/process"
 *
 * declare const target: StopSequence.Target
 *
 * const decoded = StopSequence.bounds({ endOfInput: false, killGrace: "2 seconds" })
 * const stop = StopSequence.runWithBounds(target, {}, decoded)
 * ```
 *
 * @since 0.3.0
 * @category constructors
 */
export const runWithBounds = (target: Target, steps: Steps, decoded: Bounds): Effect.Effect<StopReport> =>
  internal.run(target, steps, decoded)
