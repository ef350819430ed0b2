/**
 * What `ExtensionSession.run` refuses before anything is stored (session ids, keys, kinds, payloads out of bounds),
 * and the restart budget of a session's child (on the TestClock).
 */
import { assert, describe, it } from "@effect/vitest"
import { ExtensionSession } from "@lifeline/fleet"
import { Journal } from "@lifeline/journal"
import { Effect, Exit, Fiber, Layer, Option, Ref, Scope } from "effect"
import { TestRunner } from "effect/cluster"
import { ChildProcess } from "effect/process"
import { TestClock } from "effect/testing"
import * as ChildSlot from "../src/internal/sessionChild.js"
import * as validate from "../src/internal/validate.js"

describe("ExtensionSession limits", () => {
  it("session ids: 1 to maxSessionIdLength characters of well-formed Unicode without control characters", () => {
    const problem = (id: string) => validate.sessionIdProblem(id, ExtensionSession.maxSessionIdLength)
    assert.strictEqual(ExtensionSession.maxSessionIdLength, 241)
    assert.strictEqual(ExtensionSession.owner("x".repeat(241)).length, 255)
    assert.isUndefined(problem("x".repeat(241)))
    assert.isUndefined(problem("s-é-😀"))
    for (const bad of ["", "x".repeat(242), "a\u0001b", "a\nb", "a\u007fb", "a\u0085b", "a\ud800b", "a\udc00"]) {
      assert.strictEqual(problem(bad)?.field, "sessionId", JSON.stringify(bad))
    }
  })

  it("keys and kinds: 1 to maxKeyLength characters; payloads at most 1 MiB of JSON", () => {
    const problem = (key: string, kind = "work", payload: unknown = null) =>
      validate.operationProblem({ key, kind, payload: payload as never }, ExtensionSession.maxKeyLength)
    assert.isUndefined(problem("k".repeat(255)))
    assert.strictEqual(problem("k".repeat(256))?.field, "key")
    assert.strictEqual(problem("")?.field, "key")
    assert.strictEqual(problem("a\u0000")?.field, "key")
    assert.strictEqual(problem("k", "")?.field, "kind")
    assert.strictEqual(problem("k", "w\tork")?.field, "kind")
    assert.isUndefined(problem("k", "work", "x".repeat(Journal.defaultMaxPayloadBytes - 2)))
    assert.strictEqual(problem("k", "work", "x".repeat(Journal.defaultMaxPayloadBytes - 1))?.field, "payload")
  })

  it("jsonEquals ignores the order of object keys, and nothing else", () => {
    assert.isTrue(validate.jsonEquals({ a: 1, b: { c: [1, "x"] } }, { b: { c: [1, "x"] }, a: 1 }))
    assert.isFalse(validate.jsonEquals({ a: 1 }, { a: 1, b: 2 }))
    assert.isFalse(validate.jsonEquals([1, 2], [2, 1]))
    assert.isFalse(validate.jsonEquals({ a: null }, {}))
    assert.isFalse(validate.jsonEquals([1], { 0: 1 }))
  })

  // A runner whose sessions' command would fail if it ever ran: nothing must reach it.
  const Sessions = ExtensionSession.layer({
    command: () => ChildProcess.make("/nonexistent/lifeline-fleet-test"),
    protocol: { calls: [], serves: [] } as never,
    run: () => Effect.succeed(null)
  })
  const TestLive = Sessions.pipe(Layer.provideMerge(TestRunner.layer), Layer.provideMerge(Journal.layerMemory))

  it.effect("run refuses a bad session id, key, kind or payload with InvalidOperation, before anything is stored", () =>
    Effect.gen(function*() {
      const cases: Array<[string, { key: string; kind: string; payload: never }, string]> = [
        ["bad\u0001id", { key: "k", kind: "work", payload: null as never }, "sessionId"],
        ["x".repeat(242), { key: "k", kind: "work", payload: null as never }, "sessionId"],
        ["", { key: "k", kind: "work", payload: null as never }, "sessionId"],
        ["s", { key: "k".repeat(256), kind: "work", payload: null as never }, "key"],
        ["s", { key: "k", kind: "", payload: null as never }, "kind"],
        ["s", { key: "k", kind: "work", payload: "x".repeat(2 ** 20) as never }, "payload"]
      ]
      for (const [sessionId, operation, field] of cases) {
        const error = yield* Effect.flip(ExtensionSession.run(sessionId, operation))
        assert.strictEqual(error._tag, "InvalidOperation")
        if (error._tag === "InvalidOperation") assert.strictEqual(error.field, field)
      }
      const closing = yield* Effect.flip(ExtensionSession.close("a\nb"))
      assert.strictEqual(closing._tag, "InvalidOperation")
      const journal = yield* Journal.Journal
      assert.isTrue(Option.isNone(yield* journal.get("k")))
      assert.deepStrictEqual(yield* journal.unfinished(), [])
    }).pipe(Effect.provide(TestLive)))
})

describe("a session's child", () => {
  /** A spawn that counts its calls; `fail` makes it fail, `kill` ends the current child. */
  const fake = Effect.gen(function*() {
    const spawns = yield* Ref.make(0)
    const fail = yield* Ref.make(false)
    const alive = yield* Ref.make(false)
    const spawn = Effect.gen(function*() {
      const n = yield* Ref.updateAndGet(spawns, (x) => x + 1)
      if (yield* Ref.get(fail)) return yield* Effect.fail(`spawn ${n} failed: ENOENT`)
      yield* Ref.set(alive, true)
      return { value: n, alive: Ref.get(alive) }
    })
    return { spawns, fail, kill: Ref.set(alive, false), spawn }
  })

  it.effect("is started once, and again after it exited, the n-th restart in a row after backoff × 2^(n-1)", () =>
    Effect.gen(function*() {
      const { kill, spawn, spawns } = yield* fake
      const slot = yield* ChildSlot.make({ spawn, maxRestarts: 3, backoff: "1 second", describe: String })
      assert.strictEqual(yield* slot.acquire, 1)
      assert.strictEqual(yield* slot.acquire, 1)
      yield* kill
      const second = yield* Effect.forkChild(slot.acquire)
      yield* TestClock.adjust("999 millis")
      assert.isUndefined(second.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Fiber.join(second), 2)
      yield* kill
      const third = yield* Effect.forkChild(slot.acquire)
      yield* TestClock.adjust("1999 millis")
      assert.isUndefined(third.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Fiber.join(third), 3)
      // A success makes the budget whole: the next restart waits 1 s again.
      yield* slot.succeeded
      yield* kill
      const fourth = yield* Effect.forkChild(slot.acquire)
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* Fiber.join(fourth), 4)
      assert.strictEqual(yield* Ref.get(spawns), 4)
    }).pipe(Effect.scoped))

  it.effect("a child started again later still closes where the slot was made among the Scope's finalizers", () =>
    Effect.gen(function*() {
      const { kill, spawns } = yield* fake
      const closed: Array<string> = []
      const spawn = Effect.gen(function*() {
        const n = yield* Ref.updateAndGet(spawns, (x) => x + 1)
        yield* Effect.addFinalizer(() => Effect.sync(() => closed.push(`child ${n}`)))
        return { value: n, alive: Effect.succeed(n > 1) }
      })
      const scope = yield* Scope.make()
      const slot = yield* ChildSlot.make({ spawn, maxRestarts: 3, backoff: "1 second", describe: String }).pipe(
        Scope.provide(scope)
      )
      assert.strictEqual(yield* slot.acquire, 1)
      // What a session sets up after its slot (its claim, the wait for its operations), then a restart.
      yield* Scope.addFinalizer(scope, Effect.sync(() => closed.push("set up after the slot")))
      yield* kill
      const second = yield* Effect.forkChild(slot.acquire)
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* Fiber.join(second), 2)
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(closed, ["child 1", "set up after the slot", "child 2"])
    }))

  it.effect("a spawn that fails is SpawnFailed at once; after maxRestarts failures in a row, RestartBudgetSpent", () =>
    Effect.gen(function*() {
      const { fail, spawn, spawns } = yield* fake
      yield* Ref.set(fail, true)
      const slot = yield* ChildSlot.make({ spawn, maxRestarts: 2, backoff: "1 second", describe: String })
      const first = yield* Effect.flip(slot.acquire)
      assert.deepStrictEqual(first, { reason: "SpawnFailed", detail: "spawn 1 failed: ENOENT" })
      const second = yield* Effect.forkChild(Effect.flip(slot.acquire))
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* Fiber.join(second)).reason, "SpawnFailed")
      const third = yield* Effect.forkChild(Effect.flip(slot.acquire))
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* Fiber.join(third)).reason, "SpawnFailed")
      // The budget is spent: no more spawns, no wait.
      const spent = yield* Effect.flip(slot.acquire)
      assert.strictEqual(spent.reason, "RestartBudgetSpent")
      assert.strictEqual(yield* Ref.get(spawns), 3)
    }).pipe(Effect.scoped))
})
