/**
 * A session's journal claim the journal could not delete when the session stopped (Postgres down): deleted once the
 * journal is back if it is still stored and not held, so that it does not block the session's next runner. The rule is
 * the journal's (`JournalClaim.deleteUnreleased`); when to retry and what to log are here.
 *
 * @internal
 */
import type * as Journal from "@lifeline/journal/Journal"
import * as JournalClaim from "@lifeline/journal/JournalClaim"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"

// When a session stops on a runner whose journal cannot be reached (Postgres down), the journal cannot delete the
// session's claim: it logs "could not release the claim" and leaves the row. On the same host it does not expire: a
// claimant that sees the holder's process alive never takes the claim over, even past its expiry (the kernel's rule
// for a paused holder; packages/journal/src/internal/journalClaim.ts, `acquire`). So when the session's shard goes to
// another runner on the same host (a rebalance after the outage), that runner's recovery waits as long as this
// runner lives, and the session's operations are never answered (test/FleetOutage.test.ts, the second test). A claim
// left so is deleted here once the journal is back (`JournalClaim.deleteUnreleased`: it is taken again, the journal
// replacing a row it left itself, and let go); the retries and the log lines are the fleet's.

/** How long the deletion of an unreleased claim is retried. */
export const unreleasedClaimRetryWindow: Duration.Input = "10 minutes"

/** The pause between two tries. */
export const unreleasedClaimRetryInterval: Duration.Input = "500 millis"

/**
 * Deletes the claim on `owner` that this journal (`token`) left stored when it let go of it: retried every
 * `unreleasedClaimRetryInterval` for up to `unreleasedClaimRetryWindow` while the journal cannot be reached. Stops as
 * soon as the claim is gone, held by another journal, or held by this one again (the session came back to this runner).
 */
export const deleteUnreleasedClaim = (
  journal: Journal.Journal.Service,
  owner: string,
  token: string,
  claim: JournalClaim.ClaimOptions
): Effect.Effect<void> => {
  let warned = false
  const attempt = JournalClaim.deleteUnreleased(journal, owner, token, claim).pipe(
    Effect.tapError((error) =>
      warned ? Effect.void : Effect.sync(() => {
        warned = true
      }).pipe(
        Effect.andThen(Effect.logWarning(
          `fleet: the claim on ${owner} is still stored for this runner, which no longer runs the session; ` +
            `deleting it when the journal is back: ${error.message}`
        ))
      )
    )
  )
  return attempt.pipe(
    Effect.retry({
      while: (error) => error.reason === "Storage",
      schedule: Schedule.spaced(unreleasedClaimRetryInterval).pipe(
        Schedule.upTo({ duration: unreleasedClaimRetryWindow })
      )
    }),
    Effect.tap((outcome) =>
      outcome === "deleted"
        ? Effect.logInfo(`fleet: deleted the claim on ${owner} left by this runner`)
        : Effect.logDebug(`fleet: the claim on ${owner} left by this runner: ${outcome}`)
    ),
    Effect.catchCause((cause) =>
      Effect.logWarning(`fleet: could not delete the claim on ${owner} left by this runner`, cause)
    ),
    Effect.asVoid
  )
}
