/**
 * A fleet session's journal claim, as the session keeps it: taken by its recovery (`sessionRecovery.ts`), it is let go
 * only once the session's operations running here have ended and their ends are recorded, for at most
 * `Bounds.claimWait` (the drain, the record retries, the slack); a claim the journal could not delete when the session
 * stopped (Postgres down) is deleted later (`unreleasedClaim.ts`). Why: Effect's cluster may close the entity's scope
 * without waiting for its handlers, and a claim let go then would let the next runner run an operation a second time.
 *
 * @internal
 */
import * as Bounds from "@lifeline/kernel/Bounds"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as InFlight from "./inFlight.js"

/** What the wait needs from the session. @internal */
export interface Session {
  readonly sessionId: string
  readonly inFlight: InFlight.InFlight
  readonly drainTimeout: Duration.Input
  /** The session's recovery, once started. */
  readonly recovery: () => Fiber.Fiber<unknown, unknown> | undefined
}

/**
 * Waits, before the claim's release, for the recovery and the operations in flight to end, interrupting them (each
 * drains from now), at most `Bounds.claimWait(drainTimeout)`; says so when they outlive it. @internal
 */
export const untilOperationsEnd = (session: Session): Effect.Effect<void> =>
  Effect.gen(function*() {
    const { inFlight, sessionId } = session
    const recovery = session.recovery()
    const running = inFlight.count()
    if (running > 0) {
      yield* Effect.logInfo(
        `session ${sessionId}: stopped with ${running} operation(s) in flight; keeping its claim until they end`
      )
    }
    const bound = Bounds.claimWait(Duration.fromInputUnsafe(session.drainTimeout))
    // Not the recovery itself: run by it when the scope closed while it took the claim (session.ts).
    const self = yield* Effect.fiber
    const [, idle] = yield* Effect.all([
      recovery !== undefined && recovery.id !== self.id
        ? Effect.timeoutOption(Fiber.interrupt(recovery), bound)
        : Effect.void,
      // Interrupted here too, for a scope that closed without the cluster interrupting them (an entity rebuilt
      // after a handler died): each drains from now.
      running > 0 ? inFlight.interruptAndAwait(bound) : Effect.succeed(true)
    ], { concurrency: 2 })
    if (!idle) {
      yield* Effect.logWarning(
        `session ${sessionId}: ${inFlight.count()} operation(s) still running ${
          Duration.format(bound)
        } after it stopped; letting go of its claim`
      )
    }
  })
