/**
 * After a runner takes its shards again (Postgres back), the reset of their unanswered messages' read marks, retried
 * beyond Effect's own single try, so that a failed reset costs a retry, not ten minutes without replies (docs/fleet.md).
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import { PersistenceError } from "effect/cluster/ClusterError"
import type * as MessageStorage from "effect/cluster/MessageStorage"
import type * as ShardId from "effect/cluster/ShardId"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"

// When a runner takes shards, Effect's `Sharding` clears the read marks (`last_read`) of their unprocessed messages
// (`MessageStorage.resetShards`), so that messages a previous holder read but did not answer (its entities stopped: a
// lost Postgres, a forced release) are read again. It does so once, with its errors ignored and within
// `min(shardLockRefreshInterval, shardLockExpiration / 3)` (effect/src/cluster/Sharding.ts, the acquisition loop:
// `storage.resetShards(acquired).pipe(Effect.ignore, Effect.timeoutOption(shardLockInterval))`). A message whose mark
// stays set is not read again for ten minutes (effect/src/cluster/SqlMessageStorage.ts, `last_read < tenMinutesAgo`),
// so a reset that fails or loses that race (a pooled connection that died with the server, a loaded machine)
// leaves the operations its shards had taken unanswered for ten minutes, with nothing in any log.
//
// Here the reset runs in a fiber of its own, retried until it succeeds: the caller's timeout interrupts only its
// wait, and the storage's next poll (`entityMessagePollInterval`) reads the messages once the reset is done.
//
// Effect ignores the failure of two other resets the same way, with the same ten minutes behind them: its storage read
// loop clears the marks of messages it read but could not deliver (`resetRequests`: a request for an entity that is
// still being retired, or whose shard this runner no longer owns; `resetAddresses`: an entity type not registered yet,
// a runner at its entity cap), and its entity manager those of a request it abandons (effect/src/cluster/Sharding.ts,
// `Effect.ignore(storage.resetRequests(…))` and `Effect.ignore(storage.resetAddresses(…))` after a read;
// internal/entityManager.ts, `abandonFenced`). Those are retried here too, in the background, so that the read loop
// is not held up.

/** How long a reset is retried: past it, the storage reads the messages again by itself (Effect's ten minutes). */
export const resetRetryWindow: Duration.Input = "10 minutes"

/** Each try of a reset is bounded by this, so that a statement stuck on a dead connection does not stop the retries. */
export const resetAttemptTimeout: Duration.Input = "5 seconds"

/** The pause between two tries. */
const resetRetryInterval: Duration.Input = "500 millis"

/**
 * A reset retried every `resetRetryInterval` (each try bounded by `resetAttemptTimeout`) for up to `resetRetryWindow`,
 * with its first failure, its late success and its end logged. `what` names it in the log ("the read marks of 2
 * shard(s) just taken (default:1, default:2)").
 */
const retried = (
  reset: Effect.Effect<void, PersistenceError>,
  what: string,
  /** How long the caller waits for it: a reset that took longer is logged. */
  waited?: Duration.Duration,
  /** Tries that failed before this (their first failure was logged by the caller). */
  failedBefore = 0
): Effect.Effect<void, PersistenceError> => {
  let failures = failedBefore
  const attempt = reset.pipe(
    Effect.timeout(resetAttemptTimeout),
    Effect.catchTag("TimeoutError", (timeout) => Effect.fail(new PersistenceError({ cause: timeout }))),
    Effect.tapCause((cause) =>
      Effect.suspend(() => {
        // An interruption (the runner stops) is not a failed try.
        if (Cause.hasInterruptsOnly(cause)) return Effect.void
        failures += 1
        return failures === 1
          ? Effect.logWarning(
            `fleet: could not reset ${what}; retrying every ${
              Duration.format(Duration.fromInputUnsafe(resetRetryInterval))
            }: ${Cause.pretty(cause).split("\n")[0]}`
          )
          : Effect.void
      })
    )
  )
  return attempt.pipe(
    Effect.retry(Schedule.spaced(resetRetryInterval).pipe(Schedule.upTo({ duration: resetRetryWindow }))),
    Effect.timed,
    Effect.tap(([took]) => {
      if (failures > 0) return Effect.logInfo(`fleet: reset ${what} after ${failures} failed tries`)
      return waited !== undefined && Duration.isGreaterThan(took, waited)
        ? Effect.logInfo(
          `fleet: the reset of ${what} took ${Duration.format(took)}, longer than Effect's Sharding waits for it (${
            Duration.format(waited)
          })`
        )
        : Effect.void
    }),
    Effect.asVoid,
    Effect.tapCause((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.void
        : Effect.logError(
          `fleet: gave up resetting ${what} after ${
            Duration.format(Duration.fromInputUnsafe(resetRetryWindow))
          }; the storage reads their messages again by itself`
        )
    )
  )
}

/**
 * The storage with resets that outlive their callers, each retried in `scope` until it succeeds (see `retried`):
 *
 * - `resetShards` (Effect's `Sharding` runs it when it takes shards, and waits for it only its lock interval): the
 *   caller waits for it as before, and may stop waiting without stopping it.
 * - `resetRequests` and `resetAddresses` (its storage read loop runs them, after a read, for the messages it read but
 *   could not deliver: an entity type not registered yet, a runner at its entity cap, a request whose shard it lost;
 *   and its entity manager for a request it abandons): Effect ignores their failure, and a message whose mark stays
 *   set is not read again for ten minutes. The first try is waited for; if it fails, the retries go on in `scope`
 *   and the caller is answered at once, so that the read loop is not held up while Postgres is away.
 */
export const withRetriedResets = (
  storage: MessageStorage.MessageStorage["Service"],
  scope: Scope.Scope,
  /** How long Effect's `Sharding` waits for a reset (its lock interval): a reset that took longer is logged. */
  waited?: Duration.Duration
): MessageStorage.MessageStorage["Service"] => {
  // The first try in the caller's fiber; the retries, if any, in `scope`.
  const firstThenInBackground = (reset: Effect.Effect<void, PersistenceError>, what: string) =>
    reset.pipe(
      Effect.timeout(resetAttemptTimeout),
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause as Cause.Cause<never>) : Effect.andThen(
          Effect.logWarning(
            `fleet: could not reset ${what}; retrying every ${
              Duration.format(Duration.fromInputUnsafe(resetRetryInterval))
            } in the background: ${Cause.pretty(cause).split("\n")[0]}`
          ),
          // Its failure (the window over) is logged by `retried`; nobody waits for it.
          Effect.forkIn(Effect.ignore(Effect.delay(retried(reset, what, undefined, 1), resetRetryInterval)), scope)
        )
      ),
      Effect.asVoid
    )
  return {
    ...storage,
    resetShards: (shardIds) => {
      const ids: ReadonlyArray<ShardId.ShardId> = Array.from(shardIds)
      if (ids.length === 0) return Effect.void
      const what = `the read marks of ${ids.length} shard(s) just taken (${ids.map(String).join(", ")})`
      return Effect.flatMap(
        Effect.forkIn(retried(storage.resetShards(ids), what, waited), scope, { startImmediately: true }),
        Fiber.join
      )
    },
    resetRequests: (requestIds) =>
      requestIds.length === 0 ? Effect.void : firstThenInBackground(
        storage.resetRequests(requestIds),
        `the read marks of ${requestIds.length} request(s) read but not delivered`
      ),
    resetAddresses: (addresses) =>
      addresses.length === 0 ? Effect.void : firstThenInBackground(
        storage.resetAddresses(addresses),
        `the read marks of the messages of ${addresses.length} entit${
          addresses.length === 1 ? "y" : "ies"
        } read but not delivered`
      )
  }
}
