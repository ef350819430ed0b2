/**
 * The body of the stop sequence: the steps, their bounded waits, and the report.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Process from "../Process.js"
import type * as StopSequence from "../StopSequence.js"

// Every bounded wait is a race (`timeoutOrElse`, `raceFirst`): Effect runs each side in a fiber of its own, started
// interruptible whatever the region of the sequence, and the sequence waits for the first one uninterruptibly. The
// waits so keep their bounds in a fiber whose interruption is pending (the sequence is often the finalizer of a fiber
// interrupted by SIGTERM or a closing Scope) with no fiber of their own around them: one fewer fiber and one fewer
// turn of the scheduler on the path of every stop.

/**
 * Runs `effect` in a fiber of its own and waits for it; interrupted, stops waiting at once and leaves it to finish in
 * the background (a race or a timeout waits for its loser, and an uninterruptible loser, such as a connection's
 * teardown, would hold it).
 */
const disconnect = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.flatMap(
    Effect.forkDetach(effect),
    (fiber) => Effect.onInterrupt(Fiber.join(fiber), () => Effect.asVoid(Effect.forkDetach(Fiber.interrupt(fiber))))
  )

/** How often the sequence looks for descendants left in the process group. */
const groupPollInterval = Duration.millis(20)
const groupPoll = Schedule.spaced(groupPollInterval)

const millis = (duration: Duration.Duration): string => `${Duration.toMillis(duration)} ms`

/** @internal */
export const run = (
  target: StopSequence.Target,
  steps: StopSequence.Steps,
  bounds: StopSequence.Bounds
): Effect.Effect<StopSequence.StopReport> =>
  Effect.gen(function*() {
    const startedAt = yield* Clock.currentTimeMillis
    let isForced = false
    const forcedWatch = steps.forced === undefined ? undefined : Effect.tap(steps.forced, () =>
      Effect.sync(() => {
        isForced = true
      }))
    const hasExited = Effect.map(target.exitStatus, Option.isSome)
    const groupAlive = target.groupAlive ?? Effect.map(target.exitStatus, Option.isNone)
    // Built only when descendants are left: most stops end without them, on the path of every close.
    const groupGone = Effect.suspend(() =>
      Effect.repeat(Effect.map(groupAlive, (alive) => !alive), { schedule: groupPoll, until: (gone) => gone })
    )
    const signals: Array<Process.Signal> = []
    const send = (signal: Process.Signal) =>
      Effect.andThen(
        Effect.sync(() => signals.push(signal)),
        target.signal(signal)
      )

    /** `wait`, at most `duration`, and not after a forced stop: `onTimeout` or `onForced` in those cases. */
    const within = <A, B, C = B>(
      wait: Effect.Effect<A>,
      duration: Duration.Duration,
      onTimeout: B,
      onForced?: C
    ): Effect.Effect<A | B | C> => {
      const bounded = Effect.timeoutOrElse(Effect.map(wait, identity<A | B | C>), {
        duration,
        orElse: () => Effect.succeed(onTimeout)
      })
      return forcedWatch === undefined || isForced
        ? bounded
        : Effect.raceFirst(bounded, Effect.as(forcedWatch, (onForced ?? onTimeout) as B | C))
    }
    /** The exit within `duration`, on the target's own bounded wait when it has one and nothing can force the stop. */
    const boundedExit = (duration: Duration.Duration): Effect.Effect<boolean> =>
      target.exitWithin !== undefined && forcedWatch === undefined
        ? target.exitWithin(duration)
        : within(Effect.as(target.exit, true), duration, false)
    const exitWithin = (duration: Duration.Duration): Effect.Effect<boolean> =>
      Effect.flatMap(hasExited, (exited) =>
        exited
          ? Effect.succeed(true)
          : isForced
          ? Effect.succeed(false)
          : boundedExit(duration))

    let closeOutcome: StopSequence.CloseOutcome = "Skipped"
    let closeRan = false
    /** The close step, once, then the end of input. `now` after a SIGKILL or a forced stop: fail-fast. */
    const close = (now: boolean): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (closeRan) return target.endInput
        closeRan = true
        const step = now ? steps.closeNow ?? steps.close : steps.close
        if (step === undefined) return target.endInput
        return within(
          Effect.as(disconnect(step), "Completed" as const),
          bounds.closeTimeout,
          "TimedOut" as const,
          "Forced" as const
        ).pipe(
          Effect.tap((outcome) => {
            closeOutcome = outcome
            if (outcome === "TimedOut") {
              return Effect.logWarning(`stop: the connection did not close within ${millis(bounds.closeTimeout)}`)
            }
            // Cut short by a forced stop: the fail-fast close finishes what the policy's close began.
            return outcome === "Forced" && steps.closeNow !== undefined
              ? Effect.asVoid(Effect.timeoutOption(disconnect(steps.closeNow), bounds.closeTimeout))
              : Effect.void
          }),
          Effect.andThen(target.endInput)
        )
      })

    let endedBy: StopSequence.Step | undefined = (yield* hasExited) ? "Exited" : undefined
    let shutdown: StopSequence.ShutdownOutcome = "Skipped"
    let killSent = false

    if (endedBy === undefined && steps.shutdown !== undefined) {
      yield* Effect.logDebug("stop: protocol shutdown")
      shutdown = yield* within(
        Effect.raceFirst(
          Effect.match(disconnect(steps.shutdown), {
            onFailure: () => "Failed" as const,
            onSuccess: () => "Completed" as const
          }),
          Effect.as(target.exit, "Failed" as const)
        ),
        bounds.shutdownTimeout,
        "TimedOut" as const
      )
      if (yield* hasExited) endedBy = "Shutdown"
    }

    if (endedBy === undefined) {
      const unresponsive = isForced || (shutdown === "TimedOut" && bounds.killOnShutdownTimeout)
      if (!unresponsive && bounds.endOfInput === false) {
        // No input to end: SIGTERM is the first request to stop, so it is not a warning.
        yield* Effect.logDebug("stop: SIGTERM")
        yield* send("SIGTERM")
        if (yield* exitWithin(bounds.killGrace)) endedBy = "Terminate"
      } else if (!unresponsive) {
        yield* Effect.logDebug("stop: close under the policy, then end of input")
        yield* close(false)
        // A process whose shutdown request failed is not trusted to exit by itself (Hermes): the shorter grace.
        const grace = shutdown === "Failed" ? bounds.killGrace : bounds.exitGrace
        if (yield* exitWithin(grace)) {
          endedBy = "EndOfInput"
        } else if (!isForced) {
          yield* Effect.logWarning(`stop: still running ${millis(grace)} after the end of its input: SIGTERM`)
          yield* send("SIGTERM")
          if (yield* exitWithin(bounds.killGrace)) endedBy = "Terminate"
        }
      }
      if (endedBy === undefined) {
        yield* Effect.logWarning(
          isForced
            ? "stop: forced: SIGKILL"
            : unresponsive
            ? `stop: no answer to shutdown within ${millis(bounds.shutdownTimeout)}: SIGKILL`
            : `stop: still running ${millis(bounds.killGrace)} after SIGTERM: SIGKILL`
        )
        yield* send("SIGKILL")
        killSent = true
        yield* close(true)
        // Not cut short by a forced stop: SIGKILL is what a forced stop comes to.
        const exited = yield* (target.exitWithin !== undefined
          ? target.exitWithin(bounds.verifyTimeout)
          : Effect.timeoutOrElse(Effect.as(target.exit, true), {
            duration: bounds.verifyTimeout,
            orElse: () => Effect.succeed(false)
          }))
        endedBy = exited ? "Kill" : "Unkillable"
        if (!exited) yield* Effect.logError(`stop: still running ${millis(bounds.verifyTimeout)} after SIGKILL`)
      }
    }
    // Exited before or during the shutdown request: the conversation still has to be closed. Fail-fast: there is
    // nobody left to drain for.
    yield* close(true)

    let descendants: StopSequence.Descendants = "None"
    if (endedBy === "Unkillable") {
      // SIGKILL went to the whole group already, and waiting again for what did not die of it would not help.
      if (yield* groupAlive) descendants = "Survived"
    } else if (yield* groupAlive) {
      if (!killSent && !isForced) {
        yield* Effect.logDebug("stop: processes left in the process group: SIGTERM")
        yield* send("SIGTERM")
        if (yield* within(Effect.as(groupGone, true), bounds.killGrace, false)) descendants = "Terminated"
      }
      if (descendants === "None") {
        yield* Effect.logWarning("stop: processes left in the process group: SIGKILL")
        yield* send("SIGKILL")
        const gone = yield* Effect.timeoutOrElse(Effect.as(groupGone, true), {
          duration: bounds.verifyTimeout,
          orElse: () => Effect.succeed(false)
        })
        descendants = gone ? "Killed" : "Survived"
      }
    }

    const report: StopSequence.StopReport = {
      endedBy,
      shutdown,
      close: closeOutcome,
      descendants,
      exit: Option.getOrUndefined(yield* target.exitStatus),
      signals,
      forced: isForced,
      elapsedMillis: (yield* Clock.currentTimeMillis) - startedAt
    }
    yield* Effect.logDebug(`stop: done (${endedBy}) in ${report.elapsedMillis} ms`)
    return report
  }).pipe(Effect.uninterruptible)
