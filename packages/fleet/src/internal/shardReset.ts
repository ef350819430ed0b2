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

/** How long a reset is retried: past it, the storage reads the messages again by itself (Effect's ten minutes). */
export const resetRetryWindow: Duration.Input = "10 minutes"

/** Each try of a reset is bounded by this, so that a statement stuck on a dead connection does not stop the retries. */
export const resetAttemptTimeout: Duration.Input = "5 seconds"

/** The pause between two tries. */
export const resetRetryInterval: Duration.Input = "500 millis"

/**
 * The storage with a `resetShards` that outlives its caller: run in `scope`, retried every `resetRetryInterval` (each
 * try bounded by `resetAttemptTimeout`) for up to `resetRetryWindow`. The caller waits for it as before, and may stop
 * waiting without stopping it.
 */
export const durableResets = (
  storage: MessageStorage.MessageStorage["Service"],
  scope: Scope.Scope,
  /** How long Effect's `Sharding` waits for a reset (its lock interval): a reset that took longer is logged. */
  waited?: Duration.Duration
): MessageStorage.MessageStorage["Service"] => ({
  ...storage,
  resetShards: (shardIds) => {
    const ids: ReadonlyArray<ShardId.ShardId> = Array.from(shardIds)
    if (ids.length === 0) return Effect.void
    let failures = 0
    const attempt = storage.resetShards(ids).pipe(
      Effect.timeout(resetAttemptTimeout),
      Effect.catchTag("TimeoutError", (timeout) => Effect.fail(new PersistenceError({ cause: timeout }))),
      Effect.tapCause((cause) =>
        Effect.suspend(() => {
          failures += 1
          return failures === 1
            ? Effect.logWarning(
              `fleet: could not reset the read marks of ${ids.length} shard(s) just taken (${
                ids.map(String).join(", ")
              }); retrying every ${Duration.format(Duration.fromInputUnsafe(resetRetryInterval))}: ${
                Cause.pretty(cause).split("\n")[0]
              }`
            )
            : Effect.void
        })
      )
    )
    const reset = attempt.pipe(
      Effect.retry(Schedule.spaced(resetRetryInterval).pipe(Schedule.upTo({ duration: resetRetryWindow }))),
      Effect.timed,
      Effect.tap(([took]) => {
        if (failures > 0) {
          return Effect.logInfo(`fleet: reset the read marks of ${ids.length} shard(s) after ${failures} failed tries`)
        }
        return waited !== undefined && Duration.isGreaterThan(took, waited)
          ? Effect.logInfo(
            `fleet: the reset of the read marks of ${ids.length} shard(s) took ${
              Duration.format(took)
            }, longer than Effect's Sharding waits for it (${Duration.format(waited)})`
          )
          : Effect.void
      }),
      Effect.asVoid,
      Effect.tapCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.void
          : Effect.logError(
            `fleet: gave up resetting the read marks of ${ids.length} shard(s) after ${
              Duration.format(Duration.fromInputUnsafe(resetRetryWindow))
            }; the storage reads their messages again by itself`
          )
      )
    )
    return Effect.flatMap(Effect.forkIn(reset, scope, { startImmediately: true }), Fiber.join)
  }
})
