/**
 * How a Lifeline process ends: SIGTERM, SIGINT and SIGHUP start a graceful stop, in which every live connection (and
 * every child with its connection) stops under its own shutdown policy before the main fiber is interrupted, so a call
 * the main fiber waits for may finish within a drain; then every finalizer runs. A second signal forces the fail-fast
 * path; the exit code says how it ended.
 *
 * | code | name        | meaning                                                                                   |
 * | ---- | ----------- | ----------------------------------------------------------------------------------------- |
 * | 0    | `Success`   | the program ended by itself (e.g. stdin ended because the host is gone) and succeeded     |
 * | 1    | `Failure`   | the program failed or died (also: interrupted without a signal)                           |
 * | 2    | `Forced`    | a second signal forced the fail-fast path, and the finalizers finished                    |
 * | 3    | `Abandoned` | the finalizers did not finish within `forceTimeout` after the second signal, or a third came |
 * | 129  | `Hangup`    | SIGHUP (128 + 1): the graceful stop finished                                              |
 * | 130  | `Interrupt` | SIGINT (128 + 2): the graceful stop finished                                              |
 * | 143  | `Terminate` | SIGTERM (128 + 15): the graceful stop finished                                            |
 *
 * A main fiber that fails only because of the stop a signal started (a call it waited for was cut off: its cause holds
 * only `ShutdownError`s and interruptions, see {@link isCutOffByStop}) ended the way the signal asked: it exits with
 * the signal's code (or 2 after a second signal), and the cut-off is logged at Info, not as a failure. Any other
 * failure during a signal stop is a failure: exit code 1.
 *
 * @since 0.1.0
 */
import * as Bounds from "@lifeline/kernel/Bounds"
import * as GracefulShutdown from "@lifeline/kernel/GracefulShutdown"
import * as PeerError from "@lifeline/kernel/PeerError"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import { flushWritable, unsafeGuard } from "./internal/guardedStream.js"
import * as internalLogger from "./internal/logger.js"

/**
 * The signals that stop a Lifeline process. SIGHUP (the terminal went away) is handled like SIGTERM.
 *
 * @since 0.1.0
 * @category models
 */
export type Signal = "SIGINT" | "SIGTERM" | "SIGHUP"

/**
 * The signals a process run with {@link runMain} has received, for the code that must react to them: a host that
 * stops its children faster after a second signal, a connection that gives up draining.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { NodeSignals } from "@lifeline/node"
 *
 * const program = Effect.gen(function*() {
 *   const signals = yield* NodeSignals.NodeSignals
 *   const first = yield* signals.stopRequested
 *   yield* Effect.logInfo(`stopping on ${first}`)
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class NodeSignals extends Context.Service<NodeSignals, NodeSignals.Service>()("@lifeline/node/NodeSignals") {}

/**
 * @since 0.1.0
 */
export declare namespace NodeSignals {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /** The signals received so far, oldest first. */
    readonly received: Effect.Effect<ReadonlyArray<Signal>>
    /** Completes at the first SIGTERM, SIGINT or SIGHUP: the graceful stop has begun. */
    readonly stopRequested: Effect.Effect<Signal>
    /** Completes at the second: whatever still waits for a graceful stop must give up and fail fast. */
    readonly forced: Effect.Effect<Signal>
  }
}

/**
 * The exit codes of {@link runMain}; see the module documentation for what each means.
 *
 * @example
 * ```ts
 * import { NodeSignals } from "@lifeline/node"
 *
 * NodeSignals.ExitCode.Terminate // 143
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const ExitCode = {
  Success: 0,
  Failure: 1,
  Forced: 2,
  Abandoned: 3,
  Hangup: 129,
  Interrupt: 130,
  Terminate: 143
} as const

/**
 * Whether `cause` holds nothing but `ShutdownError`s and interruptions, at least one of them: what a fiber fails with
 * when the stop of its connections cut it off (a call it waited for failed with `ShutdownError`, or it was
 * interrupted), and nothing else went wrong. After a signal, such a main fiber ended the way the signal asked.
 *
 * @example
 * ```ts
 * import { Cause } from "effect"
 * import { PeerError } from "@lifeline/kernel"
 * import { NodeSignals } from "@lifeline/node"
 *
 * const cut = new PeerError.ShutdownError({ reason: "Interrupted", phase: "Closing" })
 * NodeSignals.isCutOffByStop(Cause.fail(cut)) // true
 * NodeSignals.isCutOffByStop(Cause.fail(new Error("boom"))) // false
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const isCutOffByStop = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.length > 0 &&
  cause.reasons.every((reason) =>
    Cause.isInterruptReason(reason) || (Cause.isFailReason(reason) && reason.error instanceof PeerError.ShutdownError)
  )

/**
 * The exit code for how the main fiber ended and which signals came before. After a signal, a main fiber that failed
 * only because the stop cut it off ({@link isCutOffByStop}) gets the signal's code like an interrupted one; any other
 * failure is `Failure` (1).
 *
 * @example
 * ```ts
 * import { Exit } from "effect"
 * import { PeerError } from "@lifeline/kernel"
 * import { NodeSignals } from "@lifeline/node"
 *
 * NodeSignals.exitCodeOf(Exit.void, []) // 0
 * NodeSignals.exitCodeOf(Exit.interrupt(), ["SIGTERM"]) // 143
 * NodeSignals.exitCodeOf(Exit.interrupt(), ["SIGTERM", "SIGINT"]) // 2
 * const cut = new PeerError.ShutdownError({ reason: "Interrupted", phase: "Closing" })
 * NodeSignals.exitCodeOf(Exit.fail(cut), ["SIGTERM"]) // 143
 * NodeSignals.exitCodeOf(Exit.fail(cut), []) // 1: no signal asked for the stop
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const exitCodeOf = (exit: Exit.Exit<unknown, unknown>, signals: ReadonlyArray<Signal>): number => {
  if (Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)) {
    if (signals.length === 0 || !isCutOffByStop(exit.cause)) return ExitCode.Failure
  }
  if (signals.length >= 2) return ExitCode.Forced
  if (signals.length === 1) {
    return signals[0] === "SIGINT" ? ExitCode.Interrupt : signals[0] === "SIGHUP" ? ExitCode.Hangup : ExitCode.Terminate
  }
  return Exit.isSuccess(exit) ? ExitCode.Success : ExitCode.Failure
}

/**
 * A {@link NodeSignals} service fed by hand: `runMain` feeds one from the process's signal handlers, tests feed one
 * directly.
 *
 * @since 0.1.0
 * @category models
 */
export interface Controller {
  readonly service: NodeSignals.Service
  /** Records a signal and answers how many have been received, this one included. */
  readonly unsafeReceive: (signal: Signal) => number
  readonly unsafeReceived: () => ReadonlyArray<Signal>
}

/**
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { NodeSignals } from "@lifeline/node"
 *
 * const controller = NodeSignals.unsafeMakeController()
 * const program = Effect.gen(function*() {
 *   const signals = yield* NodeSignals.NodeSignals
 *   return yield* signals.forced
 * }).pipe(Effect.provideService(NodeSignals.NodeSignals, controller.service))
 * controller.unsafeReceive("SIGTERM")
 * controller.unsafeReceive("SIGTERM") // program completes with "SIGTERM"
 * ```
 *
 * @since 0.1.0
 * @category testing
 */
export const unsafeMakeController = (): Controller => {
  const signals: Array<Signal> = []
  const first = Deferred.makeUnsafe<Signal>()
  const second = Deferred.makeUnsafe<Signal>()
  return {
    service: {
      received: Effect.sync(() => signals.slice()),
      stopRequested: Deferred.await(first),
      forced: Deferred.await(second)
    },
    unsafeReceive: (signal) => {
      signals.push(signal)
      if (signals.length === 1) Deferred.doneUnsafe(first, Exit.succeed(signal))
      if (signals.length === 2) Deferred.doneUnsafe(second, Exit.succeed(signal))
      return signals.length
    },
    unsafeReceived: () => signals.slice()
  }
}

/**
 * Runs `stop` when a second signal arrives before `until` completes, e.g. a connection's `stopNow()` until its
 * `awaitShutdown`. The watcher is a detached fiber: it must outlive the Scope whose finalizers are the graceful stop it
 * cuts short. Without a {@link NodeSignals} service (not run by `runMain`) it does nothing.
 *
 * @example
 * ```ts
 * import type { Connection } from "@lifeline/kernel"
 * import { NodeSignals } from "@lifeline/node"
 *
 * declare const connection: Connection.Connection<never, never>
 * const guard = NodeSignals.forceOnSecondSignal(connection.stopNow(), connection.awaitShutdown)
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const forceOnSecondSignal = (stop: Effect.Effect<unknown>, until: Effect.Effect<unknown>): Effect.Effect<void> =>
  Effect.flatMap(Effect.serviceOption(NodeSignals), (signals) =>
    Option.match(signals, {
      onNone: () => Effect.void,
      onSome: (signals) =>
        Effect.asVoid(Effect.forkDetach(Effect.raceFirst(
          Effect.andThen(signals.forced, Effect.ignore(stop)),
          Effect.ignore(until)
        )))
    }))

/**
 * @since 0.1.0
 * @category models
 */
export interface RunMainOptions {
  /** After the second signal, exit with `Abandoned` (3) if the program has not finished within this. Default 3 s. */
  readonly forceTimeout?: Duration.Input | undefined
  /** Before exiting, wait at most this long for stdout and stderr to drain. Default 1 second. */
  readonly flushTimeout?: Duration.Input | undefined
}

/**
 * Runs the main program of a Lifeline process, on Effect's `Runtime.makeRunMain` (the runner under
 * `NodeRuntime.runMain`, which on its own interrupts the main fiber at the first SIGINT/SIGTERM, exits with 130 for
 * either, does not tell a second signal from the first, and does not flush stdout). Here:
 * - the first SIGTERM, SIGINT or SIGHUP is a graceful stop: every connection and child registered with the
 *   `GracefulShutdown` service (which the program gets: `Connection.make`, `NodeStdio.makeConnection` and
 *   `NodeChildProcess` register by themselves) stops under its own shutdown policy, all at once; only when they have
 *   stopped (each is bounded by its own deadline: the drain timeout, the stop sequence's bounds) is the main fiber
 *   interrupted, so that every finalizer runs. Meanwhile the main fiber keeps running: a call it waits for may finish
 *   within a drain, and a new call is refused with `ShutdownError`;
 * - the second signal forces the fail-fast path: `GracefulShutdown.force` (drains are cut short, children get
 *   SIGKILL), the {@link NodeSignals} service's `forced` completes, and the main fiber is interrupted at once; the
 *   third signal (or `forceTimeout` after the second) exits at once with `Abandoned`;
 * - logs go to stderr (stdout may carry the protocol), and the failure of the program is logged there;
 * - when the program has ended, stdout and stderr are flushed and the process exits with the code of
 *   {@link exitCodeOf} (a program that succeeded after setting `process.exitCode` exits with that code, with no error
 *   logged), even if a timer or socket would keep it alive: an extension must not outlive its host; the
 *   signal handlers stay installed until then, so a signal that comes meanwhile changes nothing (it never kills the
 *   process by its default action);
 * - an error on stdout or stderr (EPIPE once the host is gone) is never an uncaught exception that would skip the
 *   finalizers: what is written to a broken stream is dropped (a `NodeStdio` transport on stdout fails instead).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Peer, Protocol } from "@lifeline/kernel"
 * import { NodeSignals, NodeStdio } from "@lifeline/node"
 *
 * const main = Effect.gen(function*() {
 *   const transport = yield* NodeStdio.make()
 *   const peer = yield* Peer.make({ protocol: Protocol.make({}), handlers: {}, transport })
 *   yield* peer.closed // stdin ended: the host is gone
 * }).pipe(Effect.scoped)
 *
 * NodeSignals.runMain(main)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const runMain = <A, E>(
  effect: Effect.Effect<A, E, NodeSignals | GracefulShutdown.GracefulShutdown>,
  options: RunMainOptions = {}
): void => {
  const forceTimeout = Duration.fromInputUnsafe(options.forceTimeout ?? Bounds.forceTimeout)
  const flushTimeout = Duration.fromInputUnsafe(options.flushTimeout ?? Bounds.flushTimeout)
  const controller = unsafeMakeController()
  const registry = Effect.runSync(GracefulShutdown.make)
  const withLogger = internalLogger.withStderrLogger(internalLogger.stderrLogger)
  let main: Fiber.Fiber<unknown, unknown> | undefined

  let exiting = false
  const exit = (code: number): void => {
    if (exiting) return
    exiting = true
    // The handlers stay installed until the process is gone: without one, a signal that comes while stdout and stderr
    // drain would kill the process by the signal itself (no exit code, no flushed output).
    Effect.runFork(
      Effect.timeoutOption(
        Effect.all([flushWritable(process.stdout), flushWritable(process.stderr)], { discard: true }),
        flushTimeout
      )
    ).addObserver(() => process.exit(code))
  }

  const interruptMain = (): void => {
    if (main !== undefined) main.interruptUnsafe(main.id)
  }

  const onSignal = (signal: Signal): void => {
    // The exit code is decided: a signal now changes nothing (and is not fatal, since the handler is still there).
    if (exiting) return
    const count = controller.unsafeReceive(signal)
    if (count === 1) {
      Effect.runFork(withLogger(Effect.gen(function*() {
        const live = yield* registry.size
        yield* Effect.logInfo(
          `${signal}: stopping ${live} connection(s) under their shutdown policies (a second signal forces it)`
        )
        yield* registry.stop
        yield* Effect.logDebug(`${signal}: every connection has stopped: interrupting the program`)
        interruptMain()
      })))
    } else if (count === 2) {
      Effect.runFork(withLogger(Effect.gen(function*() {
        yield* Effect.logWarning(`${signal} again: forcing the stop`)
        // Entries that interrupting main unregisters meanwhile are still forced: the registry forces every stop
        // that is still running, registered or not.
        yield* Effect.forkChild(registry.force)
        interruptMain()
        yield* Effect.sleep(forceTimeout)
        yield* Effect.logError(`still not stopped ${Duration.format(forceTimeout)} after the second signal: exiting`)
        exit(ExitCode.Abandoned)
      })))
    } else {
      exit(ExitCode.Abandoned)
    }
  }
  const onSigint = () => onSignal("SIGINT")
  const onSigterm = () => onSignal("SIGTERM")
  const onSighup = () => onSignal("SIGHUP")
  process.on("SIGINT", onSigint)
  process.on("SIGTERM", onSigterm)
  process.on("SIGHUP", onSighup)

  // An 'error' on stdout or stderr that nobody listens to (EPIPE once the host is gone) would be an uncaught exception:
  // the process would die at once, without finalizers. Here such errors only drop what is written; a NodeStdio
  // transport on stdout also sees them, and fails.
  unsafeGuard(process.stdout)
  unsafeGuard(process.stderr)

  const program = effect.pipe(
    Effect.provideService(NodeSignals, controller.service),
    Effect.provideService(GracefulShutdown.GracefulShutdown, registry),
    // A finalizer, which runs uninterruptibly: interrupting the main fiber once every connection has stopped must not
    // interrupt this log, which would replace the program's failure (exit code 1) by an interruption (the signal's
    // code).
    Effect.onError((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.void
        : controller.unsafeReceived().length > 0 && isCutOffByStop(cause)
        // The stop a signal asked for cut off what the program waited for: the way it was asked to end.
        ? Effect.logInfo(`${controller.unsafeReceived()[0]}: the stop cut off what the program was waiting for`).pipe(
          Effect.annotateLogs(
            "cutOff",
            cause.reasons.flatMap((reason) => Cause.isFailReason(reason) ? [String(reason.error)] : []).join("; ")
          )
        )
        : Effect.logError("the program failed", cause)
    ),
    withLogger
  )
  const run = Runtime.makeRunMain(({ fiber, teardown }) => {
    main = fiber as Fiber.Fiber<unknown, unknown>
    fiber.addObserver((result) => teardown(result, exit))
  })
  run(program, {
    disableErrorReporting: true,
    teardown: (result, onExit) => {
      const code = exitCodeOf(result, controller.unsafeReceived())
      // A program that ended well after setting `process.exitCode` (a command-line tool whose report says "not ok")
      // exits with that code, as Node would, and nothing is logged.
      const asked = Number(process.exitCode ?? 0)
      onExit(code === ExitCode.Success && Number.isInteger(asked) && asked !== 0 ? asked : code)
    }
  })
}
