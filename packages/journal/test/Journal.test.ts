import { assert, describe, it } from "@effect/vitest"
import {
  Journal,
  JournalBackend,
  JournalClaim,
  JournaledOperation,
  JournalEntry,
  JournalError,
  Recovery
} from "@lifeline/journal"
import { PeerError } from "@lifeline/kernel"
import { Deferred, Effect, Exit, Fiber, Option, Schema, Scope } from "effect"
import { TestClock } from "effect/testing"

class ToolFailed extends Schema.TaggedError<ToolFailed>()("ToolFailed", { tool: Schema.String }) {
  override get message(): string {
    return `${this.tool} failed`
  }
}

const op = (key: string, extra?: Partial<JournalEntry.Operation>): JournalEntry.Operation => ({
  kind: "llm",
  key,
  payload: { turn: key },
  owner: "host",
  ...extra
})

const withJournal = <A, E>(f: (journal: Journal.Journal.Service) => Effect.Effect<A, E, Journal.Journal>) =>
  Effect.flatMap(Journal.Journal, f).pipe(Effect.provide(Journal.layerMemory))

describe("Journal", () => {
  describe("begin", () => {
    it.effect("records the operation InFlight, with its start time from the Clock", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* TestClock.adjust("1234 millis")
          const { entry, started } = yield* journal.begin(op("a"))
          assert.isTrue(started)
          assert.deepStrictEqual(entry, {
            key: "a",
            kind: "llm",
            owner: "host",
            status: "InFlight",
            attempts: 1,
            payload: { turn: "a" },
            startedAt: 1234,
            updatedAt: 1234
          })
          assert.deepStrictEqual(yield* journal.get("a"), Option.some(entry))
          assert.deepStrictEqual(yield* journal.running, ["a"])
        })
      ))

    it.effect("an existing unfinished key returns the existing entry, not a duplicate", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          const first = yield* journal.begin(op("a"))
          yield* TestClock.adjust("1 second")
          const second = yield* journal.begin(op("a", { payload: { other: true } }))
          assert.isFalse(second.started)
          assert.deepStrictEqual(second.entry, first.entry)
          assert.strictEqual((yield* journal.unfinished()).length, 1)
        })
      ))

    it.effect("concurrent begins of one key: exactly one starts it", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          const results = yield* Effect.all(Array.from({ length: 20 }, () => journal.begin(op("same"))), {
            concurrency: "unbounded"
          })
          assert.strictEqual(results.filter((result) => result.started).length, 1)
          assert.strictEqual((yield* journal.unfinished()).length, 1)
        })
      ))

    it.effect("a completed key is not started again", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("a"))
          yield* journal.complete("a", 42)
          const again = yield* journal.begin(op("a"))
          assert.isFalse(again.started)
          assert.strictEqual(again.entry.status, "Completed")
          assert.strictEqual(again.entry.result, 42)
        })
      ))

    it.effect("a failed key is retried: InFlight again, one more attempt, the old error cleared", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("a"))
          yield* journal.fail("a", new ToolFailed({ tool: "grep" }))
          yield* TestClock.adjust("5 seconds")
          const retry = yield* journal.begin(op("a", { payload: { turn: "a", retry: true } }))
          assert.isTrue(retry.started)
          assert.strictEqual(retry.entry.status, "InFlight")
          assert.strictEqual(retry.entry.attempts, 2)
          assert.strictEqual(retry.entry.startedAt, 5000)
          assert.deepStrictEqual(retry.entry.payload, { turn: "a", retry: true })
          assert.isUndefined(retry.entry.error)
          assert.isUndefined(retry.entry.reason)
          assert.isUndefined(retry.entry.finishedAt)
        })
      ))

    it.effect("rejects an empty or too long key and a payload that is not JSON", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          const empty = yield* Effect.flip(journal.begin(op("")))
          assert.strictEqual(empty.reason, "Invalid")
          const long = yield* Effect.flip(journal.begin(op("k".repeat(JournalEntry.maxKeyLength + 1))))
          assert.strictEqual(long.reason, "Invalid")
          const bigint = yield* Effect.flip(journal.begin(op("b", { payload: { n: 1n } })))
          assert.strictEqual(bigint._tag, "JournalError")
          assert.strictEqual(bigint.reason, "Invalid")
          const circular: Record<string, unknown> = {}
          circular.self = circular
          assert.strictEqual((yield* Effect.flip(journal.begin(op("c", { payload: circular })))).reason, "Invalid")
          assert.strictEqual((yield* journal.unfinished()).length, 0)
        })
      ))
  })

  describe("complete and fail", () => {
    it.effect("complete records the result and the end time; completing again changes nothing", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("a"))
          yield* TestClock.adjust("2 seconds")
          const done = yield* journal.complete("a", { text: "hello" })
          assert.strictEqual(done.status, "Completed")
          assert.deepStrictEqual(done.result, { text: "hello" })
          assert.strictEqual(done.finishedAt, 2000)
          assert.deepStrictEqual(yield* journal.running, [])
          yield* TestClock.adjust("1 second")
          assert.deepStrictEqual(yield* journal.complete("a", "other"), done)
          assert.deepStrictEqual(yield* journal.unfinished(), [])
        })
      ))

    it.effect("complete without a result stores none", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("a"))
          const done = yield* journal.complete("a")
          assert.isFalse("result" in done)
        })
      ))

    it.effect("fail stores a tagged error with its tag and fields, and its message as the reason", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("a"))
          const failed = yield* journal.fail("a", new ToolFailed({ tool: "grep" }))
          assert.strictEqual(failed.status, "Failed")
          assert.deepStrictEqual(failed.error, { _tag: "ToolFailed", tool: "grep", message: "grep failed" })
          assert.strictEqual(failed.reason, "grep failed")
          const decoded = yield* Schema.decodeUnknownEffect(ToolFailed)(failed.error)
          assert.strictEqual(decoded.tool, "grep")
        })
      ))

    it.effect("the other end after an end is a Conflict; an unknown key is NotFound", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("a"))
          yield* journal.begin(op("b"))
          yield* journal.complete("a")
          yield* journal.fail("b", "boom")
          assert.strictEqual((yield* Effect.flip(journal.fail("a", "late"))).reason, "Conflict")
          assert.strictEqual((yield* Effect.flip(journal.complete("b"))).reason, "Conflict")
          assert.strictEqual((yield* journal.fail("b", "again")).reason, "boom")
          assert.strictEqual((yield* Effect.flip(journal.complete("nope"))).reason, "NotFound")
        })
      ))
  })

  describe("recovery steps", () => {
    it.effect("markNeedsRecovery changes InFlight entries only, and unfinished lists both", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("a"))
          yield* TestClock.adjust("1 millis")
          yield* journal.begin(op("b"))
          yield* journal.begin(op("c"))
          yield* journal.complete("c")
          const marked = yield* journal.markNeedsRecovery(["a", "c", "unknown", "a"], "drain timeout")
          assert.deepStrictEqual(marked.map((entry) => [entry.key, entry.status, entry.reason]), [
            ["a", "NeedsRecovery", "drain timeout"]
          ])
          assert.deepStrictEqual((yield* journal.unfinished()).map((entry) => [entry.key, entry.status]), [
            ["a", "NeedsRecovery"],
            ["b", "InFlight"]
          ])
        })
      ))

    it.effect("unfinished filters by owner and lists oldest first", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* TestClock.adjust("10 millis")
          yield* journal.begin(op("z", { owner: "one" }))
          yield* TestClock.adjust("10 millis")
          yield* journal.begin(op("a", { owner: "two" }))
          yield* TestClock.adjust("10 millis")
          yield* journal.begin(op("m", { owner: "one" }))
          assert.deepStrictEqual((yield* journal.unfinished("one")).map((entry) => entry.key), ["z", "m"])
          assert.deepStrictEqual((yield* journal.unfinished()).map((entry) => entry.key), ["z", "a", "m"])
          assert.deepStrictEqual(yield* journal.unfinished("three"), [])
        })
      ))

    it.effect("resume refuses an entry a fiber here runs; after release it takes it over as one more attempt", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("a"))
          assert.strictEqual((yield* Effect.flip(journal.resume("a"))).reason, "Conflict")
          yield* journal.release("a")
          yield* TestClock.adjust("3 seconds")
          const resumed = yield* journal.resume("a", { attempts: 1 })
          assert.strictEqual(resumed.status, "InFlight")
          assert.strictEqual(resumed.attempts, 2)
          assert.strictEqual(resumed.startedAt, 0)
          assert.strictEqual(resumed.updatedAt, 3000)
          assert.deepStrictEqual(yield* journal.running, ["a"])
        })
      ))

    it.effect("a guard with stale attempts, or an ended entry, makes resume and fail Conflicts", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("a"))
          yield* journal.release("a")
          yield* journal.resume("a", { attempts: 1 })
          yield* journal.release("a")
          assert.strictEqual((yield* Effect.flip(journal.resume("a", { attempts: 1 }))).reason, "Conflict")
          assert.strictEqual((yield* Effect.flip(journal.fail("a", "x", { attempts: 1 }))).reason, "Conflict")
          yield* journal.complete("a")
          assert.strictEqual((yield* Effect.flip(journal.resume("a"))).reason, "Conflict")
          assert.strictEqual((yield* Effect.flip(journal.resume("missing"))).reason, "NotFound")
        })
      ))

    it.effect("a guarded fail refuses an entry a fiber here runs", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("a"))
          assert.strictEqual((yield* Effect.flip(journal.fail("a", "x", { attempts: 1 }))).reason, "Conflict")
          yield* journal.release("a")
          assert.strictEqual((yield* journal.fail("a", "x", { attempts: 1 })).status, "Failed")
        })
      ))

    it.effect("NeedsRecovery entries can be resumed and completed", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("a"))
          yield* journal.release("a")
          yield* journal.markNeedsRecovery(["a"], "cut off")
          const resumed = yield* journal.resume("a")
          assert.strictEqual(resumed.status, "InFlight")
          assert.strictEqual((yield* journal.complete("a", "done")).status, "Completed")
        })
      ))

    it.effect("prune deletes entries that ended before the given time", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("old"))
          yield* journal.complete("old")
          yield* TestClock.adjust("1 minute")
          yield* journal.begin(op("new"))
          yield* journal.fail("new", "x")
          yield* journal.begin(op("live"))
          assert.strictEqual(yield* journal.prune(30_000), 1)
          assert.isTrue(Option.isNone(yield* journal.get("old")))
          assert.isTrue(Option.isSome(yield* journal.get("new")))
          assert.isTrue(Option.isSome(yield* journal.get("live")))
        })
      ))

    it.effect("a new journal over the same storage (a restart) runs nothing: its in-flight entries are leftovers", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        const before = yield* Journal.make(backend)
        yield* before.begin(op("a"))
        const after = yield* Journal.make(backend)
        assert.deepStrictEqual(yield* after.running, [])
        assert.strictEqual((yield* after.resume("a", { attempts: 1 })).attempts, 2)
      }))
  })

  describe("run", () => {
    const Result = Schema.Struct({ text: Schema.String })

    it.effect("begins before the effect starts and completes with its value", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          const seen = yield* journal.get("t").pipe(
            Effect.map(Option.map((entry) => entry.status)),
            JournaledOperation.run("llm", "t", { prompt: "hi" })
          )
          assert.deepStrictEqual(seen, Option.some("InFlight"))
          const entry = Option.getOrThrow(yield* journal.get("t"))
          assert.strictEqual(entry.status, "Completed")
          assert.strictEqual(entry.owner, "local")
          assert.isFalse("result" in entry)
        })
      ))

    it.effect("records the owner from JournalClaim.Owner and the result through its schema", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          const value = yield* Effect.succeed({ text: "hello" }).pipe(
            JournaledOperation.run("llm", "t", null, { result: Result }),
            Effect.provide(JournalClaim.layerOwner("hermes"))
          )
          assert.deepStrictEqual(value, { text: "hello" })
          const entry = Option.getOrThrow(yield* journal.get("t"))
          assert.strictEqual(entry.owner, "hermes")
          assert.deepStrictEqual(entry.result, { text: "hello" })
        })
      ))

    it.effect("a completed key returns the stored value and does not run again", () =>
      withJournal(() =>
        Effect.gen(function*() {
          let runs = 0
          const work = Effect.sync(() => ({ text: `run ${++runs}` })).pipe(
            JournaledOperation.run("llm", "t", null, { result: Result })
          )
          assert.deepStrictEqual(yield* work, { text: "run 1" })
          assert.deepStrictEqual(yield* work, { text: "run 1" })
          assert.strictEqual(runs, 1)
          const error = yield* Effect.flip(Effect.void.pipe(JournaledOperation.run("llm", "t", null)))
          assert.strictEqual(error._tag, "JournalError")
          assert.strictEqual((error as JournalError.JournalError).reason, "Conflict")
        })
      ))

    it.effect("an unfinished key (running here or left by a crash) is a Conflict and does not run", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("t"))
          let ran = false
          const error = yield* Effect.flip(
            Effect.sync(() => (ran = true)).pipe(JournaledOperation.run("llm", "t", null))
          )
          assert.isFalse(ran)
          assert.strictEqual((error as JournalError.JournalError).reason, "Conflict")
        })
      ))

    it.effect("a failure is recorded with the error; tracking the key again retries it", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          const error = yield* Effect.flip(
            new ToolFailed({ tool: "grep" }).pipe(JournaledOperation.run("tool", "t", null))
          )
          assert.strictEqual(error._tag, "ToolFailed")
          const failed = Option.getOrThrow(yield* journal.get("t"))
          assert.strictEqual(failed.status, "Failed")
          assert.deepStrictEqual(failed.error, { _tag: "ToolFailed", tool: "grep", message: "grep failed" })
          assert.deepStrictEqual(yield* journal.running, [])
          yield* Effect.void.pipe(JournaledOperation.run("tool", "t", null))
          const retried = Option.getOrThrow(yield* journal.get("t"))
          assert.strictEqual(retried.status, "Completed")
          assert.strictEqual(retried.attempts, 2)
        })
      ))

    it.effect("a defect is recorded as a Defect", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* Effect.exit(Effect.die(new Error("bug")).pipe(JournaledOperation.run("tool", "t", null)))
          const entry = Option.getOrThrow(yield* journal.get("t"))
          assert.strictEqual(entry.status, "Failed")
          assert.strictEqual((entry.error as { _tag: string })._tag, "Defect")
          assert.strictEqual(entry.reason, "bug")
        })
      ))

    it.effect("interruption leaves the entry InFlight, as a crash would, and no longer run here", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          const started = yield* Deferred.make<void>()
          const fiber = yield* Deferred.succeed(started, void 0).pipe(
            Effect.andThen(Effect.never),
            JournaledOperation.run("llm", "t", null),
            Effect.forkChild
          )
          yield* Deferred.await(started)
          assert.deepStrictEqual(yield* journal.running, ["t"])
          yield* Fiber.interrupt(fiber)
          assert.strictEqual(Option.getOrThrow(yield* journal.get("t")).status, "InFlight")
          assert.deepStrictEqual(yield* journal.running, [])
        })
      ))

    it.effect("a shutdown error is a cut-off, not a failure: the entry stays InFlight", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          const cutOff = new PeerError.ShutdownError({ reason: "DrainTimeout", phase: "Closing" })
          const error = yield* Effect.flip(Effect.fail(cutOff).pipe(JournaledOperation.run("llm", "t", null)))
          assert.strictEqual(error, cutOff)
          assert.strictEqual(Option.getOrThrow(yield* journal.get("t")).status, "InFlight")
          assert.deepStrictEqual(yield* journal.running, [])
        })
      ))

    it.effect("a sleeping operation records its start and end on the TestClock", () =>
      withJournal((journal) =>
        Effect.gen(function*() {
          const fiber = yield* Effect.sleep("10 seconds").pipe(
            JournaledOperation.run("llm", "t", null),
            Effect.forkChild
          )
          yield* TestClock.adjust("10 seconds")
          yield* Fiber.join(fiber)
          const entry = Option.getOrThrow(yield* journal.get("t"))
          assert.strictEqual(entry.startedAt, 0)
          assert.strictEqual(entry.finishedAt, 10_000)
        })
      ))
  })

  describe("claim", () => {
    /** Journals on one storage, as processes on one SQLite file; each with its own identity. */
    const storage = Effect.gen(function*() {
      const backend = yield* JournalBackend.makeMemory
      return {
        backend,
        open: (options?: Journal.MakeOptions) => Journal.make(backend, options)
      }
    })

    /** Claims in a Scope of its own, which the test closes: a process that stops cleanly. */
    const claimIn = (journal: Journal.Journal.Service, owner: string, options?: JournalClaim.ClaimOptions) =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const claim = yield* journal.claim(owner, options).pipe(Scope.provide(scope))
        return { claim, close: Scope.close(scope, Exit.void) }
      })

    it.effect("stores who holds the owner and until when, renews it on the Clock, and deletes it on release", () =>
      Effect.gen(function*() {
        const { open } = yield* storage
        const journal = yield* open({ identity: { pid: 41, host: "box", startedAt: 7 } })
        yield* TestClock.adjust("1 second")
        const held = yield* claimIn(journal, "host", { ttl: "9 seconds" })
        assert.deepInclude(held.claim, {
          owner: "host",
          pid: 41,
          host: "box",
          startedAt: 7,
          claimedAt: 1000,
          expiresAt: 10_000
        })
        assert.match(held.claim.holder, /^[0-9a-f]{32}$/)
        assert.isTrue(yield* journal.holds("host"))
        assert.isFalse(yield* journal.holds("other"))
        // renewed every third of the ttl: after 3 s, it holds until 4 s + 9 s
        yield* TestClock.adjust("3 seconds")
        assert.deepStrictEqual(
          Option.map(yield* journal.holder("host"), (claim) => claim.expiresAt),
          Option.some(13_000)
        )
        yield* TestClock.adjust("1 minute")
        assert.isTrue(yield* journal.holds("host"))
        yield* held.close
        assert.isTrue(Option.isNone(yield* journal.holder("host")))
        assert.isFalse(yield* journal.holds("host"))
      }))

    it.effect("a second journal is refused with OwnerInUse naming the holder, for as long as it renews", () =>
      Effect.gen(function*() {
        const { open } = yield* storage
        const first = yield* open({ identity: { pid: 41, host: "box", startedAt: 7 } })
        const second = yield* open({ identity: { pid: 42, host: "box", startedAt: 8 } })
        yield* first.claim("host", { ttl: "10 seconds" })
        const error = yield* Effect.flip(second.claim("host", { ttl: "10 seconds" }))
        assert.instanceOf(error, JournalError.OwnerInUse)
        assert.deepStrictEqual(
          error._tag === "OwnerInUse" ? [error.owner, error.pid, error.host, error.startedAt, error.claimedAt] : [],
          ["host", 41, "box", 7, 0]
        )
        assert.match(error.message, /owner host is in use by process 41 on box/)
        yield* TestClock.adjust("1 minute")
        const later = yield* Effect.flip(second.claim("host"))
        assert.strictEqual(later._tag, "OwnerInUse")
        assert.isFalse(yield* second.holds("host"))
        // other owners are free
        yield* second.claim("elsewhere")
      }))

    it.effect("released on Scope close: the next claimant gets it at once", () =>
      Effect.gen(function*() {
        const { open } = yield* storage
        const first = yield* open()
        const second = yield* open()
        const held = yield* claimIn(first, "host")
        assert.strictEqual((yield* Effect.flip(second.claim("host")))._tag, "OwnerInUse")
        yield* held.close
        const claim = yield* second.claim("host")
        assert.strictEqual(claim.claimedAt, 0)
      }))

    it.effect("a holder that stopped renewing (crashed) is taken over once its claim expires", () =>
      Effect.gen(function*() {
        const { backend, open } = yield* storage
        // what a crashed process leaves: its claim, renewed for the last time at 0
        yield* backend.insertClaim({ owner: "host", holder: "crashed", pid: 9, claimedAt: 0, expiresAt: 30_000 })
        const journal = yield* open()
        yield* TestClock.adjust("29 seconds")
        const refused = yield* Effect.flip(journal.claim("host"))
        assert.deepStrictEqual(refused._tag === "OwnerInUse" ? [refused.pid, refused.expiresAt] : [], [9, 30_000])
        yield* TestClock.adjust("1 second")
        const claim = yield* journal.claim("host", { ttl: "5 seconds" })
        assert.deepStrictEqual([claim.claimedAt, claim.expiresAt], [30_000, 35_000])
        assert.notStrictEqual(claim.holder, "crashed")
        assert.isTrue(yield* journal.holds("host"))
      }))

    it.effect("a holder that cannot renew loses the claim to the next claimant after expiry, and knows it", () =>
      Effect.gen(function*() {
        const { backend } = yield* storage
        let down = false
        const flaky: JournalBackend.Backend = {
          ...backend,
          replaceClaim: (claim, where) =>
            down
              ? Effect.fail(new JournalError.JournalError({ reason: "Storage", detail: "the disk is gone" }))
              : backend.replaceClaim(claim, where)
        }
        const hung = yield* Journal.make(flaky)
        const next = yield* Journal.make(backend)
        yield* hung.claim("host", { ttl: "3 seconds" })
        down = true
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual((yield* Effect.flip(next.claim("host", { ttl: "3 seconds" })))._tag, "OwnerInUse")
        yield* TestClock.adjust("1 second")
        // its claim expired: the holder no longer counts on it, and the next claimant takes it
        assert.isFalse(yield* hung.holds("host"))
        yield* next.claim("host", { ttl: "3 seconds" })
        down = false
        yield* TestClock.adjust("1 second")
        assert.isFalse(yield* hung.holds("host"))
        assert.isTrue(yield* next.holds("host"))
        // and a recovery through the old holder is refused
        const refused = yield* Effect.flip(
          Recovery.run({ owner: "host" }).pipe(Effect.provideService(Journal.Journal, hung))
        )
        assert.strictEqual(refused._tag, "OwnerInUse")
      }))

    it.effect("on the same host, a liveness check takes over a dead holder at once and keeps a live one", () =>
      Effect.gen(function*() {
        const { open } = yield* storage
        const alive = new Set([41])
        const asked: Array<number | undefined> = []
        const liveness: JournalClaim.Liveness = (claim) =>
          Effect.sync(() => {
            asked.push(claim.pid)
            return alive.has(claim.pid ?? 0) ? "Alive" : "Dead"
          })
        const holder = yield* open({ identity: { pid: 41, host: "box" }, liveness })
        const remote = yield* open({ identity: { pid: 50, host: "elsewhere" }, liveness })
        const local = yield* open({ identity: { pid: 42, host: "box" }, liveness })
        // Held open for the whole test (kept alive past expiry is covered by SqliteJournal.test.ts).
        const held = yield* claimIn(holder, "host", { ttl: "10 seconds" })
        // alive: refused
        assert.strictEqual((yield* Effect.flip(local.claim("host")))._tag, "OwnerInUse")
        // another host cannot be checked: its claim's expiry decides
        assert.strictEqual((yield* Effect.flip(remote.claim("host")))._tag, "OwnerInUse")
        assert.deepStrictEqual(asked, [41])
        // the holder dies (its pid is gone): taken over before its claim expires
        alive.delete(41)
        const claim = yield* local.claim("host")
        assert.deepStrictEqual([claim.pid, claim.host], [42, "box"])
        assert.deepStrictEqual(asked, [41, 41])
        yield* held.close
      }))

    it.effect("claims of one journal are shared: the owner is released when the last Scope closes", () =>
      Effect.gen(function*() {
        const { open } = yield* storage
        const journal = yield* open()
        const other = yield* open()
        const one = yield* claimIn(journal, "host")
        const two = yield* claimIn(journal, "host")
        assert.strictEqual(one.claim.holder, two.claim.holder)
        yield* one.close
        assert.isTrue(yield* journal.holds("host"))
        assert.strictEqual((yield* Effect.flip(other.claim("host")))._tag, "OwnerInUse")
        yield* two.close
        yield* other.claim("host")
      }))

    it.effect("JournalClaim.claim claims the current JournalClaim.Owner; a bad ttl or owner is Invalid", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        const claim = yield* JournalClaim.claim().pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.provide(JournalClaim.layerOwner("hermes"))
        )
        assert.strictEqual(claim.owner, "hermes")
        assert.isTrue(yield* journal.holds("hermes"))
        const zero = yield* Effect.flip(journal.claim("x", { ttl: 0 }))
        assert.deepStrictEqual(zero._tag === "JournalError" ? zero.reason : zero._tag, "Invalid")
        const empty = yield* Effect.flip(journal.claim(""))
        assert.deepStrictEqual(empty._tag === "JournalError" ? empty.reason : empty._tag, "Invalid")
      }))
  })

  describe("errorToJson", () => {
    it("keeps tags, names, messages and own fields, drops stacks and what is not JSON", () => {
      assert.deepStrictEqual(JournalEntry.errorToJson(new Error("boom")), { name: "Error", message: "boom" })
      assert.deepStrictEqual(JournalEntry.errorToJson(new ToolFailed({ tool: "x" })), {
        _tag: "ToolFailed",
        tool: "x",
        message: "x failed"
      })
      assert.deepStrictEqual(JournalEntry.errorToJson({ n: 1n, f: () => 1 }), { n: "1" })
      assert.strictEqual(JournalEntry.errorToJson("plain"), "plain")
      assert.strictEqual(JournalEntry.errorToJson(undefined), null)
      const circular: Record<string, unknown> = { a: 1 }
      circular.self = circular
      assert.deepStrictEqual(JournalEntry.errorToJson(circular), { a: 1 })
    })
  })
})

describe("Journal on a storage that misreads its own writes", () => {
  // What a driver whose affected-row count is read wrongly looks like to the journal: the claim is stored as this
  // journal's, yet every write reports that it changed nothing. `claim` once looped forever on such a storage.
  it.effect("claim fails with a Storage error instead of looping", () =>
    Effect.gen(function*() {
      const memory = yield* JournalBackend.makeMemory
      const journal = yield* Journal.make({
        ...memory,
        insertClaim: (claim) =>
          Effect.map(memory.insertClaim(claim), ({ claim: stored }) => ({ claim: stored, inserted: false })),
        replaceClaim: () => Effect.succeed(false)
      })
      const error = yield* Effect.flip(journal.claim("host"))
      assert.strictEqual(error._tag, "JournalError")
      assert.strictEqual(error._tag === "JournalError" ? error.reason : undefined, "Storage")
    }).pipe(Effect.scoped))
})
