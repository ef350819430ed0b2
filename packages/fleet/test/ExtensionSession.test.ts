import { assert, describe, it } from "@effect/vitest"
import { ExtensionSession } from "@lifeline/fleet"
import type { JournalEntry } from "@lifeline/journal"
import { Journal, JournalBackend, JournalError, Recovery } from "@lifeline/journal"
import { Effect, Exit, Fiber, Logger, Option, PrimaryKey, Ref, References, Schema } from "effect"
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

/** A journal on a memory backend whose `update` fails with a `Storage` error while `down` is set (Postgres away). */
const journalThatGoesDown = Effect.gen(function*() {
  const memory = yield* JournalBackend.makeMemory
  const down = yield* Ref.make(false)
  const backend: JournalBackend.Backend = {
    ...memory,
    update: (key, where, patch) =>
      Effect.flatMap(Ref.get(down), (isDown) =>
        isDown
          ? Effect.fail(new JournalError.JournalError({ reason: "Storage", detail: "connection refused" }))
          : memory.update(key, where, patch))
  }
  return { backend, down, journal: yield* Journal.make(backend) }
})

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
        yield* dead.begin({ kind: "tool", key: "k3", payload: { key: "k3" }, owner })
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
        const fiber = yield* Effect.forkChild(
          internal.handle(journal, owner, operation("k4"), () => Effect.never, "10 seconds")
        )
        yield* Effect.yieldNow
        assert.deepStrictEqual(yield* journal.running, ["k4"])
        // The operation gets the drain (10 s) to finish, then is left unfinished.
        const interrupting = yield* Effect.forkChild(Fiber.interrupt(fiber))
        yield* TestClock.adjust("9999 millis")
        assert.deepStrictEqual(yield* journal.running, ["k4"])
        yield* TestClock.adjust("1 millis")
        yield* Fiber.join(interrupting)
        assert.deepStrictEqual(yield* journal.running, [])
        assert.strictEqual(Option.getOrThrow(yield* journal.get("k4")).status, "InFlight")
        // The redelivered message, with no recovery in between, takes the entry over as a second attempt.
        const { execute } = yield* counting
        assert.deepStrictEqual(yield* internal.handle(journal, owner, operation("k4"), execute), {
          ran: "k4",
          attempt: 2
        })
      }))

    it.effect("an operation in flight when its handler is interrupted finishes within the drain and is recorded", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        const work = (entry: JournalEntry.Entry) => Effect.as(Effect.sleep("3 seconds"), { done: entry.key })
        const fiber = yield* Effect.forkChild(internal.handle(journal, owner, operation("k9"), work, "10 seconds"))
        yield* Effect.yieldNow
        const interrupting = yield* Effect.forkChild(Fiber.interrupt(fiber))
        yield* TestClock.adjust("3 seconds")
        yield* Fiber.join(interrupting)
        const entry = Option.getOrThrow(yield* journal.get("k9"))
        assert.strictEqual(entry.status, "Completed")
        assert.deepStrictEqual(entry.result, { done: "k9" })
        assert.deepStrictEqual(yield* journal.running, [])
      }))

    it.effect("a key reused with another payload or kind is refused; the same operation is answered again", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        const { execute, runs } = yield* counting
        const first = new ExtensionSession.Operation({ key: "k10", kind: "work", payload: { a: 1, b: [1, 2] } })
        yield* internal.handle(journal, owner, first, execute)
        const otherPayload = new ExtensionSession.Operation({ key: "k10", kind: "work", payload: { a: 2, b: [1, 2] } })
        const reused = yield* Effect.flip(internal.handle(journal, owner, otherPayload, execute))
        assert.strictEqual(reused._tag, "KeyReused")
        const otherKind = new ExtensionSession.Operation({ key: "k10", kind: "tool", payload: { a: 1, b: [1, 2] } })
        const reusedKind = yield* Effect.flip(internal.handle(journal, owner, otherKind, execute))
        assert.strictEqual(reusedKind._tag, "KeyReused")
        if (reusedKind._tag === "KeyReused") assert.strictEqual(reusedKind.storedKind, "work")
        // The same payload with its keys in another order (as a JSONB column returns it) is the same operation.
        const same = new ExtensionSession.Operation({ key: "k10", kind: "work", payload: { b: [1, 2], a: 1 } })
        assert.deepStrictEqual(yield* internal.handle(journal, owner, same, execute), { ran: "k10", attempt: 1 })
        assert.strictEqual(yield* Ref.get(runs), 1)
      }))

    it.effect("an end that the journal could not record (Postgres down) is retried, and recorded once it is back", () =>
      Effect.gen(function*() {
        const { down, journal } = yield* journalThatGoesDown
        // The operation finishes just as the journal becomes unreachable.
        const work = () => Effect.as(Ref.set(down, true), { ok: true })
        const fiber = yield* Effect.forkChild(internal.handle(journal, owner, operation("k11"), work))
        yield* TestClock.adjust("3 seconds")
        assert.isUndefined(fiber.pollUnsafe())
        yield* Ref.set(down, false)
        yield* TestClock.adjust("500 millis")
        assert.deepStrictEqual(yield* Fiber.join(fiber), { ok: true })
        assert.strictEqual(Option.getOrThrow(yield* journal.get("k11")).status, "Completed")
        // Down for longer than the window (30 s): the journal error is the handler's (the entity restarts).
        const fiber2 = yield* Effect.forkChild(Effect.flip(internal.handle(journal, owner, operation("k12"), work)))
        yield* TestClock.adjust("29 seconds")
        assert.isUndefined(fiber2.pollUnsafe())
        yield* TestClock.adjust("2 seconds")
        const error = yield* Fiber.join(fiber2)
        assert.strictEqual(error._tag, "JournalError")
        yield* Ref.set(down, false)
        assert.strictEqual(Option.getOrThrow(yield* journal.get("k12")).status, "InFlight")
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

    it.effect("says so at Warning after 10 s of waiting for a claim held by another runner, then once a minute", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        // A claim held by a runner that is alive (it renews it), as one left on the same host is.
        yield* backend.insertClaim({ owner, holder: "live-runner", claimedAt: 0, expiresAt: Number.MAX_SAFE_INTEGER })
        const journal = yield* Journal.make(backend)
        const warnings: Array<string> = []
        const logger = Logger.make(({ logLevel, message }) => {
          if (logLevel === "Warn") warnings.push(String(Array.isArray(message) ? message[0] : message))
        })
        const { execute } = yield* counting
        const fiber = yield* internal.recover(
          { owner, decisions: internal.decisionsOf({ work: () => "Resume" }, execute) },
          "250 millis"
        ).pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.scoped,
          Effect.provide(Logger.layer([logger])),
          // `it.effect` logs nothing by default.
          Effect.provideService(References.MinimumLogLevel, "Info"),
          Effect.forkChild
        )
        // One try at once, then one every 250 ms: the 40th near 10 s.
        yield* TestClock.adjust("9 seconds")
        assert.deepStrictEqual(warnings, [])
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual(warnings.length, 1)
        assert.include(warnings[0], "still waiting for the claim of its previous runner (40 tries)")
        yield* TestClock.adjust("1 minute")
        assert.strictEqual(warnings.length, 2)
        assert.include(warnings[1], "(280 tries)")
        yield* Fiber.interrupt(fiber)
      }))

    /** A journal whose `update` fails while `down` is set, and an entry a dead runner left: `InFlight`, attempt 1. */
    const leftByADeadRunner = (key: string) =>
      Effect.gen(function*() {
        const { backend, down } = yield* journalThatGoesDown
        yield* (yield* Journal.make(backend)).begin({ kind: "work", key, payload: {}, owner })
        return { journal: yield* Journal.make(backend), down }
      })

    const recovering = (
      journal: Journal.Journal.Service,
      execute: (entry: JournalEntry.Entry) => Effect.Effect<unknown>
    ) =>
      internal.recover(
        { owner, decisions: internal.decisionsOf({ work: () => "Resume" }, execute), concurrency: 1 },
        "250 millis",
        Effect.void,
        "10 seconds"
      ).pipe(Effect.provideService(Journal.Journal, journal), Effect.scoped, Effect.forkChild)

    it.effect("a resumed operation interrupted when the session stops finishes within the drain and is recorded", () =>
      Effect.gen(function*() {
        const { journal } = yield* leftByADeadRunner("k13")
        const fiber = yield* recovering(journal, (entry) => Effect.as(Effect.sleep("3 seconds"), { done: entry.key }))
        yield* TestClock.adjust("1 second")
        const interrupting = yield* Effect.forkChild(Fiber.interrupt(fiber))
        yield* TestClock.adjust("1999 millis")
        assert.isUndefined(interrupting.pollUnsafe(), "the stop waits for the drain")
        yield* TestClock.adjust("1 millis")
        yield* Fiber.join(interrupting)
        const entry = Option.getOrThrow(yield* journal.get("k13"))
        assert.strictEqual(entry.status, "Completed")
        assert.strictEqual(entry.attempts, 2)
        assert.deepStrictEqual(entry.result, { done: "k13" })
      }))

    it.effect("a session that stops starts none of the operations its recovery had not started yet", () =>
      Effect.gen(function*() {
        const { backend, journal } = yield* journalThatGoesDown
        const dead = yield* Journal.make(backend)
        yield* dead.begin({ kind: "work", key: "k16", payload: {}, owner })
        yield* dead.begin({ kind: "work", key: "k17", payload: {}, owner })
        const started: Array<string> = []
        const fiber = yield* recovering(
          journal,
          (entry) => Effect.andThen(Effect.sync(() => started.push(entry.key)), Effect.sleep("3 seconds"))
        )
        yield* TestClock.adjust("1 second")
        yield* Effect.andThen(Effect.forkChild(Fiber.interrupt(fiber)), TestClock.adjust("2 seconds"))
        yield* TestClock.adjust("1 minute")
        assert.deepStrictEqual(started, ["k16"], "the second was not started after the stop")
        assert.strictEqual(Option.getOrThrow(yield* journal.get("k16")).status, "Completed")
        assert.strictEqual(Option.getOrThrow(yield* journal.get("k17")).status, "InFlight")
        assert.deepStrictEqual(yield* journal.running, [])
      }))

    it.effect("one still running after the drain is interrupted and left InFlight for the next runner", () =>
      Effect.gen(function*() {
        const { journal } = yield* leftByADeadRunner("k14")
        const fiber = yield* recovering(journal, () => Effect.as(Effect.sleep("1 minute"), { done: true }))
        yield* TestClock.adjust("1 second")
        const interrupting = yield* Effect.forkChild(Fiber.interrupt(fiber))
        yield* TestClock.adjust("9999 millis")
        assert.isUndefined(interrupting.pollUnsafe())
        yield* TestClock.adjust("1 millis")
        yield* Fiber.join(interrupting)
        const entry = Option.getOrThrow(yield* journal.get("k14"))
        assert.strictEqual(entry.status, "InFlight")
        assert.deepStrictEqual(yield* journal.running, [])
      }))

    it.effect("the end of a resumed operation that the journal could not record is retried until it is back", () =>
      Effect.gen(function*() {
        const { down, journal } = yield* leftByADeadRunner("k15")
        // The operation finishes just as the journal becomes unreachable, for 3 s.
        const fiber = yield* recovering(journal, () => Effect.as(Ref.set(down, true), { ok: true }))
        yield* TestClock.adjust("3 seconds")
        assert.isUndefined(fiber.pollUnsafe())
        yield* Ref.set(down, false)
        yield* TestClock.adjust("500 millis")
        const report = yield* Fiber.join(fiber)
        assert.deepStrictEqual(report.resumed.map((e) => e.key), ["k15"])
        assert.strictEqual(Option.getOrThrow(yield* journal.get("k15")).status, "Completed")
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
    it("its primary key is its journal key and a digest of kind and payload, and the key is bounded", () => {
      const pk = PrimaryKey.value(operation("s-1/op-1"))
      assert.isTrue(pk.startsWith("s-1/op-1#"), pk)
      // The same operation (keys of the payload in any order) has the same primary key; another kind or payload not.
      const of = (kind: string, payload: Schema.Json) =>
        PrimaryKey.value(new ExtensionSession.Operation({ key: "k", kind, payload }))
      assert.strictEqual(of("work", { a: 1, b: [2] }), of("work", { b: [2], a: 1 }))
      assert.notStrictEqual(of("work", { a: 1 }), of("work", { a: 2 }))
      assert.notStrictEqual(of("work", { a: 1 }), of("tool", { a: 1 }))
      const decode = Schema.decodeUnknownExit(ExtensionSession.Operation)
      assert.isTrue(Exit.isFailure(decode({ key: "", kind: "work", payload: null })))
      assert.isTrue(Exit.isFailure(decode({ key: "x".repeat(256), kind: "work", payload: null })))
      assert.isTrue(Exit.isSuccess(decode({ key: "x".repeat(255), kind: "work", payload: { a: [1] } })))
    })
  })
})
