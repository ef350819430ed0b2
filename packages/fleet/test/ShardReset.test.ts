/**
 * The reset of the read marks of shards a runner takes (`MessageStorage.resetShards`), as `FleetRunner` provides it to
 * Effect's `Sharding`: retried until it succeeds, in a fiber of its own, so that the acquisition loop's short timeout
 * (its `shardLockInterval`) stops only its wait. Without it a reset that failed once left the messages its shards had
 * taken unread for ten minutes (test/FleetOutage.test.ts shows the hang with real processes and Postgres).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Option, Scope } from "effect"
import { PersistenceError } from "effect/cluster/ClusterError"
import * as MessageStorage from "effect/cluster/MessageStorage"
import * as ShardId from "effect/cluster/ShardId"
import { TestClock } from "effect/testing"
import * as internal from "../src/internal/shardReset.js"

const shards = [ShardId.make("default", 1), ShardId.make("default", 2)]

/** A storage whose `resetShards` runs the n-th answer of `answers` (the last one again past the end). */
const storageAnswering = (answers: ReadonlyArray<"fail" | "ok" | "stall">) => {
  const calls: Array<ReadonlyArray<string>> = []
  const storage: MessageStorage.MessageStorage["Service"] = {
    ...MessageStorage.noop,
    resetShards: (ids) =>
      Effect.suspend(() => {
        calls.push(Array.from(ids, String))
        const answer = answers[Math.min(calls.length, answers.length) - 1]
        return answer === "ok"
          ? Effect.void
          : answer === "stall"
          ? Effect.never
          : Effect.fail(new PersistenceError({ cause: new Error("PgConnection: Connection closed") }))
      })
  }
  return { storage, calls }
}

// What Sharding's acquisition loop does with the reset: waits at most its lock interval, ignores the outcome.
const asSharding = (storage: MessageStorage.MessageStorage["Service"]) =>
  storage.resetShards(shards).pipe(Effect.ignore, Effect.timeoutOption("1 second"))

describe("FleetRunner: the reset of the shards a runner takes", () => {
  it.effect("a reset that succeeds is waited for, once", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { calls, storage } = storageAnswering(["ok"])
      const waited = yield* asSharding(internal.durableResets(storage, scope))
      assert.isTrue(Option.isSome(waited))
      assert.deepStrictEqual(calls, [["default:1", "default:2"]])
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("one that fails goes on after its caller stopped waiting, every 500 ms, until it succeeds", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { calls, storage } = storageAnswering(["fail", "fail", "fail", "ok"])
      const waiting = yield* Effect.forkChild(asSharding(internal.durableResets(storage, scope)))
      yield* TestClock.adjust("1 second")
      // The caller gave up at 1 s (three tries so far: 0, 500 and 1,000 ms); the reset did not.
      const gaveUp = waiting.pollUnsafe()
      assert.isTrue(gaveUp !== undefined && Exit.isSuccess(gaveUp) && Option.isNone(gaveUp.value))
      assert.strictEqual(calls.length, 3)
      yield* TestClock.adjust("499 millis")
      assert.strictEqual(calls.length, 3)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(calls.length, 4, "the fourth try, which succeeds")
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(calls.length, 4, "nothing more once it succeeded")
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("a try that stalls is given up after 5 s, and the next one made", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { calls, storage } = storageAnswering(["stall", "ok"])
      yield* Effect.forkChild(asSharding(internal.durableResets(storage, scope)))
      yield* TestClock.adjust(
        Duration.millis(Duration.toMillis(Duration.fromInputUnsafe(internal.resetAttemptTimeout)) + 499)
      )
      assert.strictEqual(calls.length, 1)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(calls.length, 2)
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("one that never succeeds stops after the retry window (10 minutes), when the storage reads them anyway", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { calls, storage } = storageAnswering(["fail"])
      yield* Effect.forkChild(asSharding(internal.durableResets(storage, scope)))
      yield* TestClock.adjust(internal.resetRetryWindow)
      yield* TestClock.adjust("1 second")
      const tries = calls.length
      // One try at once, then one every 500 ms within the window (the last one may start as it ends).
      assert.isTrue(tries >= 1_200 && tries <= 1_202, `${tries} tries`)
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(calls.length, tries)
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("the retries stop with the runner (its scope)", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { calls, storage } = storageAnswering(["fail"])
      yield* Effect.forkChild(asSharding(internal.durableResets(storage, scope)))
      yield* TestClock.adjust("2 seconds")
      yield* Scope.close(scope, Exit.void)
      const tries = calls.length
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(calls.length, tries)
    }))

  it.effect("no shards, no statement", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { calls, storage } = storageAnswering(["ok"])
      yield* internal.durableResets(storage, scope).resetShards([])
      assert.strictEqual(calls.length, 0)
      yield* Scope.close(scope, Exit.void)
    }))
})
