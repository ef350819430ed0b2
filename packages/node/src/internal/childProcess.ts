/**
 * The host side of a child process: the child built around its `Handle` (see `childHandle.ts`), with its stderr read
 * to the end, its exit observed, and the kernel's stop sequence over it as its one stop. What it is built from is
 * re-exported here: spawning (`childHandle.ts`), the journal record (`childRecord.ts`), and what talks to the child
 * (`childAttach.ts`).
 *
 * @internal
 */
import * as GracefulShutdown from "@lifeline/kernel/GracefulShutdown"
import * as PeerError from "@lifeline/kernel/PeerError"
import * as Process from "@lifeline/process/Process"
import * as StopSequence from "@lifeline/process/StopSequence"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type * as NodeChildProcess from "../NodeChildProcess.js"
import type { Handle } from "./childHandle.js"
import { makeStderr } from "./childStderr.js"
import { stopOptionsOf, type StopSteps, targetOf } from "./childStop.js"
import { makeTransport } from "./childTransport.js"

export { attach, attachPeer, type Closing, closingOf } from "./childAttach.js"
export { argvOf } from "./childCommand.js"
export { type Handle, type SpawnFailure, spawnHandle } from "./childHandle.js"
export { record } from "./childRecord.js"
export { stopOptionsOf, type StopSteps, targetOf } from "./childStop.js"

/** How long the exit waits for the rest of stderr, which may arrive after the exit event or be held open forever by a
 * grandchild. */
const stderrSettle = Duration.millis(100)

/**
 * What the public module builds on: a child with its transport, stderr tail, exit hooks and stop sequence.
 *
 * @internal
 */
export interface Internal {
  readonly child: NodeChildProcess.Child
  readonly steps: StopSteps
  /** Runs `hook` with the exit error when the child exits (now, if it has already). */
  readonly onExit: (hook: (error: PeerError.PeerExited) => Effect.Effect<void>) => Effect.Effect<void>
  /** True once the stop sequence has started: an exit from then on is expected. */
  readonly isStopping: () => boolean
  /**
   * True when the stop comes from an interruption: the Scope closed with one (an interrupted `Effect.scoped` fiber,
   * `Scope.close(scope, Exit.interrupt())`), or a signal to the host (`register`). What talks to the child closes
   * with `Interrupted` then, as the kernel's `Connection.make` and `Peer.make` do for a Scope of their own.
   */
  readonly isInterrupted: () => boolean
  /** Notes that the stop comes from an interruption (a signal to the host). */
  readonly markInterrupted: Effect.Effect<void>
  /** Forces the stop (as a second signal does): every wait of the stop sequence is cut short, SIGKILL follows. */
  readonly force: Effect.Effect<void>
  readonly settings: Settings
}

/**
 * @internal
 */
export interface Settings {
  readonly name: string
  readonly stderrTailLines: number
  readonly maxStderrLineLength: number
  /** `undefined`: the first `stderrInfoLines` at Info, the rest at Debug. */
  readonly stderrLogLevel: LogLevel.LogLevel | undefined
  readonly stderrInfoLines: number
  readonly stop: NodeChildProcess.StopOptions
  readonly shutdown: Effect.Effect<unknown, unknown> | undefined
  readonly forced: Effect.Effect<unknown> | undefined
}

/**
 * Builds the child around a handle in the current Scope. The stderr reader and the exit observer are forked before
 * the stop finalizer is registered, so they outlive it: stderr is read until the very end (a child blocked on a full
 * stderr pipe could never exit), and the exit is observed during the stop. The stop is the kernel's stop sequence
 * over the handle.
 *
 * @internal
 */
export const make = (handle: Handle, settings: Settings): Effect.Effect<Internal, never, Scope.Scope> =>
  Effect.gen(function*() {
    const stderr = makeStderr(settings)
    const annotate = Effect.annotateLogs({ child: settings.name, pid: handle.pid })
    const options = stopOptionsOf(settings.stop)

    const stderrReader = yield* stderr.read(handle.stderr).pipe(annotate, Effect.forkScoped)

    let stopping = false
    let exitError: PeerError.PeerExited | undefined
    const hooks: Array<(error: PeerError.PeerExited) => Effect.Effect<void>> = []
    const afterExit = yield* Deferred.make<void>()

    yield* Effect.gen(function*() {
      const status = yield* handle.exit
      yield* Effect.timeoutOption(Fiber.await(stderrReader), stderrSettle)
      const error = new PeerError.PeerExited({
        exitCode: status.exitCode,
        signal: status.signal,
        stderrTail: stderr.tail.toArray()
      })
      exitError = error
      const how = Process.describe(status)
      if (stopping || Process.isSuccess(status)) yield* Effect.logDebug(`exited (${how})`)
      else {yield* Effect.logWarning(
          `exited unexpectedly (${how})`,
          ...(error.stderrTail.length > 0 ? [error.stderrTail] : [])
        )}
      for (const hook of hooks.splice(0)) yield* hook(error)
      yield* Deferred.succeed(afterExit, void 0)
    }).pipe(annotate, Effect.forkScoped)

    const steps: StopSteps = {
      shutdown: settings.shutdown,
      close: undefined,
      closeNow: undefined,
      policy: undefined,
      flushTimeout: undefined
    }
    const forcedHere = yield* Deferred.make<void>()
    const forced = settings.forced === undefined
      ? Deferred.await(forcedHere)
      : Effect.raceFirst(Deferred.await(forcedHere), Effect.asVoid(settings.forced))
    const stopped = yield* Deferred.make<NodeChildProcess.StopReport>()
    const stop: Effect.Effect<NodeChildProcess.StopReport> = Effect.suspend(() => {
      if (stopping) return Deferred.await(stopped)
      stopping = true
      return StopSequence.run(
        targetOf(handle),
        { shutdown: steps.shutdown, close: steps.close, closeNow: steps.closeNow, forced },
        { ...options, policy: steps.policy, flushTimeout: steps.flushTimeout }
      ).pipe(
        Effect.tap((report) => Deferred.succeed(stopped, report)),
        annotate,
        Effect.uninterruptible
      )
    })
    let interrupted = false
    // The Scope's exit says why it closed; the stop it runs passes that on to what talks to the child (`attach`).
    yield* Effect.addFinalizer((exit) =>
      Effect.andThen(
        Effect.sync(() => {
          if (Exit.hasInterrupts(exit)) interrupted = true
        }),
        stop
      )
    )
    const force = Effect.asVoid(Deferred.succeed(forcedHere, void 0))

    const transport = makeTransport(handle, afterExit, StopSequence.bounds(options).exitGrace)

    const child: NodeChildProcess.Child = {
      pid: handle.pid,
      name: settings.name,
      transport,
      exit: handle.exit,
      exitStatus: Effect.sync(() => Option.fromUndefinedOr(handle.unsafeExitStatus())),
      exited: Effect.andThen(Deferred.await(afterExit), Effect.sync(() => exitError!)),
      stderrTail: Effect.sync(() => stderr.tail.toArray()),
      kill: (sig) => Effect.sync(() => handle.unsafeSignal(sig)),
      stop
    }

    return {
      child,
      steps,
      force,
      settings,
      isStopping: () => stopping,
      isInterrupted: () => interrupted,
      markInterrupted: Effect.sync(() => {
        interrupted = true
      }),
      onExit: (hook) =>
        Effect.suspend(() => {
          if (exitError !== undefined) return hook(exitError)
          hooks.push(hook)
          return Effect.void
        })
    }
  })

/**
 * Registers the child's one stop with `GracefulShutdown` (when a program run by `NodeSignals.runMain` provides it), so
 * that a signal to the host stops the child, the conversation with it first, before the host's main fiber is
 * interrupted. Only for a child this module talks to (a peer, a connection): a bare child (`NodeChildProcess.make`)
 * belongs to whoever talks to it, whose own stop (the Hermes host's `shutdown` request, say) must come first. A stop
 * from a signal is an interruption: the peer or connection closes with `Interrupted`.
 *
 * @internal
 */
export const register = (self: Internal): Effect.Effect<void, never, Scope.Scope> =>
  GracefulShutdown.register({
    name: `child ${self.settings.name} (pid ${self.child.pid})`,
    stop: Effect.andThen(self.markInterrupted, self.child.stop),
    stopNow: Effect.andThen(self.markInterrupted, Effect.andThen(self.force, self.child.stop))
  })
