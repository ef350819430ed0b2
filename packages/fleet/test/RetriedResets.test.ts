/**
 * The resets of read marks in the message storage, as `FleetRunner` provides them to Effect's `Sharding`: retried until
 * they succeed. The reset of the shards a runner takes (`resetShards`) runs in a fiber of its own, so that the
 * acquisition loop's short timeout (its `shardLockInterval`) stops only its wait; without it a reset that failed once
 * left the messages its shards had taken unread for ten minutes (test/FleetOutage.test.ts shows the hang with real
 * processes and Postgres). The resets of messages read but not delivered (`resetRequests`, `resetAddresses`), whose
 * failure Effect ignores the same way, are tried once in the caller and then retried in the background.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Option, Scope } from "effect"
import { PersistenceError } from "effect/cluster/ClusterError"
import * as EntityAddress from "effect/cluster/EntityAddress"
import * as EntityId from "effect/cluster/EntityId"
import * as EntityType from "effect/cluster/EntityType"
import * as MessageStorage from "effect/cluster/MessageStorage"
import * as ShardId from "effect/cluster/ShardId"
import * as Snowflake from "effect/cluster/Snowflake"
import { TestClock } from "effect/testing"
import * as internal from "../src/internal/retriedResets.js"

const shards = [ShardId.make("default", 1), ShardId.make("default", 2)]

type Answer = "fail" | "ok" | "stall"

/** The n-th call (counted in `calls`) runs the n-th answer of `answers`, the last one again past the end. */
const answering = <C>(answers: ReadonlyArray<Answer>, calls: Array<C>) => (call: C) =>
  Effect.suspend(() => {
    calls.push(call)
    const answer = answers[Math.min(calls.length, answers.length) - 1]
    return answer === "ok"
      ? Effect.void
      : answer === "stall"
      ? Effect.never
      : Effect.fail(new PersistenceError({ cause: new Error("PgConnection: Connection closed") }))
  })

/** A storage whose `resetShards` runs the n-th answer of `answers`. */
const storageAnswering = (answers: ReadonlyArray<Answer>) => {
  const calls: Array<ReadonlyArray<string>> = []
  const answer = answering(answers, calls)
  const storage: MessageStorage.MessageStorage["Service"] = {
    ...MessageStorage.noop,
    resetShards: (ids) => answer(Array.from(ids, String))
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
      const waited = yield* asSharding(internal.withRetriedResets(storage, scope))
      assert.isTrue(Option.isSome(waited))
      assert.deepStrictEqual(calls, [["default:1", "default:2"]])
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("one that fails goes on after its caller stopped waiting, every 500 ms, until it succeeds", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { calls, storage } = storageAnswering(["fail", "fail", "fail", "ok"])
      const waiting = yield* Effect.forkChild(asSharding(internal.withRetriedResets(storage, scope)))
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
      yield* Effect.forkChild(asSharding(internal.withRetriedResets(storage, scope)))
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
      yield* Effect.forkChild(asSharding(internal.withRetriedResets(storage, scope)))
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
      yield* Effect.forkChild(asSharding(internal.withRetriedResets(storage, scope)))
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
      yield* internal.withRetriedResets(storage, scope).resetShards([])
      assert.strictEqual(calls.length, 0)
      yield* Scope.close(scope, Exit.void)
    }))
})

/** A storage whose `resetRequests` and `resetAddresses` run the n-th answer of `answers`, counted across both. */
const readResetsAnswering = (answers: ReadonlyArray<Answer>) => {
  const calls: Array<string> = []
  const answer = answering(answers, calls)
  const storage: MessageStorage.MessageStorage["Service"] = {
    ...MessageStorage.noop,
    resetRequests: (ids) => answer(`requests ${ids.join(",")}`),
    resetAddresses: (addresses) => answer(`addresses ${addresses.map((a) => a.entityId).join(",")}`)
  }
  return { storage, calls }
}

const requestIds = [Snowflake.Snowflake(BigInt(11)), Snowflake.Snowflake(BigInt(12))]
const address = EntityAddress.make({
  shardId: ShardId.make("default", 3),
  entityType: EntityType.make("ExtensionSession"),
  entityId: EntityId.make("s-1")
})

describe("FleetRunner: the resets of messages read but not delivered", () => {
  it.effect("a reset that succeeds is waited for, once", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { calls, storage } = readResetsAnswering(["ok"])
      const resets = internal.withRetriedResets(storage, scope)
      yield* resets.resetRequests(requestIds)
      yield* resets.resetAddresses([address])
      assert.deepStrictEqual(calls, ["requests 11,12", "addresses s-1"])
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(calls.length, 2)
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("one that fails answers its caller at once and is retried in the background every 500 ms until it succeeds", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { calls, storage } = readResetsAnswering(["fail", "fail", "fail", "ok"])
      // Effect's read loop waits for it (and ignores a failure): answered without the clock moving.
      const exit = yield* Effect.exit(internal.withRetriedResets(storage, scope).resetRequests(requestIds))
      assert.isTrue(Exit.isSuccess(exit))
      assert.strictEqual(calls.length, 1)
      yield* TestClock.adjust("499 millis")
      assert.strictEqual(calls.length, 1)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(calls.length, 2)
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(calls, ["requests 11,12", "requests 11,12", "requests 11,12", "requests 11,12"])
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(calls.length, 4, "nothing more once it succeeded")
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("the same for the messages of entities (resetAddresses)", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { calls, storage } = readResetsAnswering(["fail", "ok"])
      yield* internal.withRetriedResets(storage, scope).resetAddresses([address])
      yield* TestClock.adjust("500 millis")
      assert.deepStrictEqual(calls, ["addresses s-1", "addresses s-1"])
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(calls.length, 2)
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("a first try that stalls holds its caller 5 s at most; the retries go on", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { calls, storage } = readResetsAnswering(["stall", "ok"])
      const caller = yield* Effect.forkChild(internal.withRetriedResets(storage, scope).resetRequests(requestIds))
      const attempt = Duration.toMillis(Duration.fromInputUnsafe(internal.resetAttemptTimeout))
      yield* TestClock.adjust(Duration.millis(attempt - 1))
      assert.isUndefined(caller.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      const answered = caller.pollUnsafe()
      assert.isTrue(answered !== undefined && Exit.isSuccess(answered))
      yield* TestClock.adjust("500 millis")
      assert.strictEqual(calls.length, 2, "retried after the pause")
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("the retries stop after the window, or with the runner (its scope)", () =>
    Effect.gen(function*() {
      const first = readResetsAnswering(["fail"])
      const scope = yield* Scope.make()
      yield* internal.withRetriedResets(first.storage, scope).resetRequests(requestIds)
      yield* TestClock.adjust(internal.resetRetryWindow)
      yield* TestClock.adjust("1 second")
      const tries = first.calls.length
      assert.isTrue(tries >= 1_200 && tries <= 1_203, `${tries} tries`)
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(first.calls.length, tries)
      yield* Scope.close(scope, Exit.void)

      const second = readResetsAnswering(["fail"])
      const other = yield* Scope.make()
      yield* internal.withRetriedResets(second.storage, other).resetAddresses([address])
      yield* TestClock.adjust("2 seconds")
      yield* Scope.close(other, Exit.void)
      const before = second.calls.length
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(second.calls.length, before)
    }))

  it.effect("nothing to reset, no statement", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { calls, storage } = readResetsAnswering(["ok"])
      const resets = internal.withRetriedResets(storage, scope)
      yield* resets.resetRequests([])
      yield* resets.resetAddresses([])
      assert.strictEqual(calls.length, 0)
      yield* Scope.close(scope, Exit.void)
    }))
})
