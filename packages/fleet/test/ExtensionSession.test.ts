import { assert, describe, it } from "@effect/vitest"
import { ExtensionSession } from "@lifeline/fleet"
import type { JournalEntry } from "@lifeline/kernel"
import { Journal, JournalBackend, Recovery } from "@lifeline/kernel"
import { Effect, Exit, Fiber, Option, PrimaryKey, Ref, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as internal from "../src/internal/session.js"

const owner = ExtensionSession.owner("s-1")
const operation = (key: string, kind = "work") => new ExtensionSession.Operation({ key, kind, payload: { key } })

class ToolFailed extends Schema.TaggedError<ToolFailed>()("ToolFailed", { tool: Schema.String }) {}

/** An `execute` that counts its runs and answers `{ ran: key }`. */
const counting = Effect.map(Ref.make(0), (runs) => ({
  runs,
  execute: (entry: JournalEntry.Entry) =>
    Effect.as(Ref.update(runs, (n) => n + 1), { ran: entry.key, attempt: entry.attempts })
}))

describe("ExtensionSession", () => {
  describe("handle", () => {
    it.effect("runs a new key once, then answers it from the journal", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        const { execute, runs } = yield* counting
        const first = yield* internal.handle(journal, owner, operation("k1"), execute)
        const second = yield* internal.handle(journal, owner, operation("k1"), execute)
        assert.deepStrictEqual(first, { ran: "k1", attempt: 1 })
        assert.deepStrictEqual(second, first)
        assert.strictEqual(yield* Ref.get(runs), 1)
        const entry = Option.getOrThrow(yield* journal.get("k1"))
        assert.strictEqual(entry.status, "Completed")
        assert.strictEqual(entry.owner, owner)
      }))

    it.effect("a failure is recorded and answered as OperationFailed, also when asked again", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        const failing = () => Effect.fail(new ToolFailed({ tool: "grep" }))
        const error = yield* Effect.flip(internal.handle(journal, owner, operation("k2"), failing))
        assert.strictEqual(error._tag, "OperationFailed")
        if (error._tag !== "OperationFailed") return
        assert.isFalse(error.interrupted)
        assert.deepInclude(error.error as object, { _tag: "ToolFailed", tool: "grep" })
        const { execute, runs } = yield* counting
        const again = yield* Effect.flip(internal.handle(journal, owner, operation("k2"), execute))
        assert.deepStrictEqual(again, error)
        assert.strictEqual(yield* Ref.get(runs), 0)
      }))

    it.effect("an operation that recovery failed is answered as interrupted, not run again", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        const dead = yield* Journal.make(backend)
        yield* dead.begin({ kind: "tool", key: "k3", payload: {}, owner })
        const journal = yield* Journal.make(backend)
        yield* Effect.scoped(Recovery.run({ owner })).pipe(Effect.provideService(Journal.Journal, journal))
        const { execute, runs } = yield* counting
        const error = yield* Effect.flip(internal.handle(journal, owner, operation("k3", "tool"), execute))
        assert.strictEqual(error._tag, "OperationFailed")
        if (error._tag === "OperationFailed") assert.isTrue(error.interrupted)
        assert.strictEqual(yield* Ref.get(runs), 0)
      }))

    it.effect("interruption leaves the entry InFlight for recovery, and not running here", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        const fiber = yield* Effect.forkChild(internal.handle(journal, owner, operation("k4"), () => Effect.never))
        yield* Effect.yieldNow
        assert.deepStrictEqual(yield* journal.running, ["k4"])
        yield* Fiber.interrupt(fiber)
        assert.deepStrictEqual(yield* journal.running, [])
        assert.strictEqual(Option.getOrThrow(yield* journal.get("k4")).status, "InFlight")
        // The redelivered message, with no recovery in between, takes the entry over as a second attempt.
        const { execute } = yield* counting
        assert.deepStrictEqual(yield* internal.handle(journal, owner, operation("k4"), execute), {
          ran: "k4",
          attempt: 2
        })
      }))

    it.effect("a key of another session is refused", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        yield* journal.begin({ kind: "work", key: "k5", payload: {}, owner: ExtensionSession.owner("s-2") })
        const { execute, runs } = yield* counting
        const error = yield* Effect.flip(internal.handle(journal, owner, operation("k5"), execute))
        assert.strictEqual(error._tag, "OperationFailed")
        if (error._tag === "OperationFailed") assert.include(error.reason, "fleet/session/s-2")
        assert.strictEqual(yield* Ref.get(runs), 0)
      }))
  })

  describe("recover", () => {
    it.effect("waits for the claim a dead runner left until it expires, then resumes its operations", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        const dead = yield* Journal.make(backend)
        yield* dead.begin({ kind: "work", key: "k6", payload: {}, owner })
        // What a runner killed with SIGKILL leaves: its claim, renewed last at t=0, held until t=4 s.
        yield* backend.insertClaim({ owner, holder: "dead-runner", claimedAt: 0, expiresAt: 4_000 })
        const journal = yield* Journal.make(backend)
        const { execute, runs } = yield* counting
        const fiber = yield* internal.recover(
          { owner, decisions: internal.decisionsOf({ work: () => "Resume" }, execute), claim: { ttl: "4 seconds" } },
          "250 millis"
        ).pipe(Effect.provideService(Journal.Journal, journal), Effect.scoped, Effect.forkChild)
        yield* TestClock.adjust("3750 millis")
        assert.isUndefined(fiber.pollUnsafe())
        assert.strictEqual(yield* Ref.get(runs), 0)
        yield* TestClock.adjust("250 millis")
        const report = yield* Fiber.join(fiber)
        assert.deepStrictEqual(report.resumed.map((e) => e.key), ["k6"])
        assert.strictEqual(yield* Ref.get(runs), 1)
        const entry = Option.getOrThrow(yield* journal.get("k6"))
        assert.strictEqual(entry.status, "Completed")
        assert.strictEqual(entry.attempts, 2)
      }))

    it.effect("fails the kinds without a Resume decision with InterruptedByCrash", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        const dead = yield* Journal.make(backend)
        yield* dead.begin({ kind: "tool", key: "k7", payload: {}, owner })
        yield* dead.begin({ kind: "once", key: "k8", payload: {}, owner })
        const journal = yield* Journal.make(backend)
        const { execute, runs } = yield* counting
        const decisions = internal.decisionsOf({ once: () => "Fail" }, execute)
        const report = yield* internal.recover({ owner, decisions }, "250 millis").pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.scoped
        )
        assert.deepStrictEqual(report.failed.map((e) => e.key).sort(), ["k7", "k8"])
        assert.strictEqual(yield* Ref.get(runs), 0)
        for (const key of ["k7", "k8"]) {
          const entry = Option.getOrThrow(yield* journal.get(key))
          assert.isTrue(Option.isSome(Recovery.interruptedByCrash(entry)))
          assert.isTrue(internal.failedOf(entry).interrupted)
        }
      }))
  })

  describe("Operation", () => {
    it("its primary key is its journal key, and the key is bounded", () => {
      assert.strictEqual(PrimaryKey.value(operation("s-1/op-1")), "s-1/op-1")
      const decode = Schema.decodeUnknownExit(ExtensionSession.Operation)
      assert.isTrue(Exit.isFailure(decode({ key: "", kind: "work", payload: null })))
      assert.isTrue(Exit.isFailure(decode({ key: "x".repeat(256), kind: "work", payload: null })))
      assert.isTrue(Exit.isSuccess(decode({ key: "x".repeat(255), kind: "work", payload: { a: [1] } })))
    })
  })
})
