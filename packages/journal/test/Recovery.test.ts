import { assert, describe, it } from "@effect/vitest"
import type { JournalEntry } from "@lifeline/journal"
import { Journal, JournalBackend, JournalClaim, JournaledOperation, ProcessRecord, Recovery } from "@lifeline/journal"
import { Connection, Method, Peer, PeerError, Protocol, ShutdownPolicy } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Deferred, Duration, Effect, Exit, Fiber, Option, Result, Schema, Scope } from "effect"
import { TestClock } from "effect/testing"

class ToolFailed extends Schema.TaggedError<ToolFailed>()("ToolFailed", { tool: Schema.String }) {}

/**
 * A host that runs, crashes and restarts over one storage: each `start` is a new journal (nothing runs in it yet)
 * on the same rows, as a process restart over the same SQLite file.
 */
const makeHost = Effect.gen(function*() {
  const backend = yield* JournalBackend.makeMemory
  return {
    start: Journal.make(backend),
    backend
  }
})

const leftover = (journal: Journal.Journal.Service, key: string, kind: string, payload: unknown = { key }) =>
  Effect.gen(function*() {
    yield* journal.begin({ kind, key, payload, owner: "local" })
    // the process dies here: nothing ends the operation
  })

const entryOf = (journal: Journal.Journal.Service, key: string) => Effect.map(journal.get(key), Option.getOrThrow)

describe("Recovery", () => {
  it.effect("the default decision fails every interrupted operation with a typed InterruptedByCrash", () =>
    Effect.gen(function*() {
      const host = yield* makeHost
      yield* leftover(yield* host.start, "tool-1", "tool")
      yield* TestClock.adjust("1 minute")
      const journal = yield* host.start
      const report = yield* Recovery.run().pipe(Effect.provideService(Journal.Journal, journal))
      assert.deepStrictEqual(report.failed.map((entry) => entry.key), ["tool-1"])
      assert.deepStrictEqual([report.resumed, report.errors, report.skipped], [[], [], []])
      const entry = yield* entryOf(journal, "tool-1")
      assert.strictEqual(entry.status, "Failed")
      assert.strictEqual(entry.finishedAt, 60_000)
      const error = Option.getOrThrow(Recovery.interruptedByCrash(entry))
      assert.instanceOf(error, Recovery.InterruptedByCrash)
      assert.deepStrictEqual(
        { key: error.key, kind: error.kind, attempts: error.attempts, startedAt: error.startedAt },
        { key: "tool-1", kind: "tool", attempts: 1, startedAt: 0 }
      )
      assert.strictEqual(error.detail, "interrupted by a crash or a restart")
      assert.strictEqual(entry.reason, error.message)
      assert.deepStrictEqual(yield* journal.unfinished(), [])
    }))

  it.effect("seed case 1: an LLM request in flight auto-continues after a restart, once, and completes", () =>
    Effect.gen(function*() {
      const host = yield* makeHost
      yield* leftover(yield* host.start, "turn-7", "llm", { conversation: "c1", attempt: 1 })
      const journal = yield* host.start
      const runs: Array<unknown> = []
      const decisions = {
        llm: (entry: JournalEntry.Entry) =>
          Recovery.resume((resumed) =>
            Effect.sync(() => {
              runs.push([entry.payload, resumed.attempts])
              return { text: "the rest of the answer" }
            })
          )
      }
      const report = yield* Recovery.run({ decisions }).pipe(Effect.provideService(Journal.Journal, journal))
      assert.deepStrictEqual(runs, [[{ conversation: "c1", attempt: 1 }, 2]])
      assert.deepStrictEqual(report.resumed.map((entry) => [entry.key, entry.status, entry.attempts]), [
        ["turn-7", "Completed", 2]
      ])
      assert.deepStrictEqual((yield* entryOf(journal, "turn-7")).result, { text: "the rest of the answer" })
      // a second recovery finds nothing left
      const again = yield* Recovery.run({ decisions }).pipe(Effect.provideService(Journal.Journal, journal))
      assert.deepStrictEqual(again.resumed, [])
      assert.strictEqual(runs.length, 1)
    }))

  it.effect("seed case 2: a tool that was executing shows a typed error, and the user can retry it", () =>
    Effect.gen(function*() {
      const host = yield* makeHost
      yield* leftover(yield* host.start, "tool-3", "tool")
      const journal = yield* host.start
      yield* Recovery.run({ decisions: { tool: () => Recovery.fail("the tool's side effects are unknown") } }).pipe(
        Effect.provideService(Journal.Journal, journal)
      )
      const failed = yield* entryOf(journal, "tool-3")
      assert.strictEqual(
        Option.getOrThrow(Recovery.interruptedByCrash(failed)).detail,
        "the tool's side effects are unknown"
      )
      // the user retries under the same key
      const value = yield* Effect.succeed("ok").pipe(
        JournaledOperation.run("tool", "tool-3", { retry: true }),
        Effect.provideService(Journal.Journal, journal)
      )
      assert.strictEqual(value, "ok")
      const retried = yield* entryOf(journal, "tool-3")
      assert.deepStrictEqual([retried.status, retried.attempts], ["Completed", 2])
      assert.isTrue(Option.isNone(Recovery.interruptedByCrash(retried)))
    }))

  it.effect("seed case 4: operations a drain timeout marked NeedsRecovery are auto-continued", () =>
    Effect.gen(function*() {
      const host = yield* makeHost
      const first = yield* host.start
      yield* leftover(first, "turn-1", "llm")
      yield* leftover(first, "tool-1", "tool")
      yield* first.release("turn-1")
      yield* first.release("tool-1")
      // the first host holds the owner while it runs, and releases it when it stops
      yield* Effect.scoped(Effect.andThen(
        first.claim("local"),
        Recovery.recordShutdown(first)({
          policy: ShutdownPolicy.drain("5 seconds"),
          reason: "Stop",
          drained: false,
          cutOff: []
        })
      ))
      assert.deepStrictEqual((yield* first.unfinished()).map((entry) => entry.status), [
        "NeedsRecovery",
        "NeedsRecovery"
      ])
      const journal = yield* host.start
      const report = yield* Recovery.run({
        decisions: { llm: () => Recovery.resume(() => Effect.succeed("continued")) }
      }).pipe(Effect.provideService(Journal.Journal, journal))
      assert.deepStrictEqual(report.resumed.map((entry) => entry.key), ["turn-1"])
      assert.deepStrictEqual(report.failed.map((entry) => entry.key), ["tool-1"])
      const tool = Option.getOrThrow(Recovery.interruptedByCrash(yield* entryOf(journal, "tool-1")))
      assert.strictEqual(tool.detail, "cut off by a shutdown (cut off by a drain timeout (Stop))")
    }))

  it.effect("a resumer that fails records its error and is reported", () =>
    Effect.gen(function*() {
      const host = yield* makeHost
      yield* leftover(yield* host.start, "turn-1", "llm")
      const journal = yield* host.start
      const report = yield* Recovery.run({
        decisions: { llm: () => Recovery.resume(() => new ToolFailed({ tool: "llm" })) }
      }).pipe(Effect.provideService(Journal.Journal, journal))
      assert.strictEqual(report.errors.length, 1)
      assert.strictEqual(report.errors[0].key, "turn-1")
      assert.instanceOf(report.errors[0].error, ToolFailed)
      const entry = yield* entryOf(journal, "turn-1")
      assert.strictEqual(entry.status, "Failed")
      assert.strictEqual((yield* Schema.decodeUnknownEffect(ToolFailed)(entry.error)).tool, "llm")
      assert.deepStrictEqual(yield* journal.running, [])
    }))

  it.effect("operations a fiber of this process runs are skipped, not recovered", () =>
    Effect.gen(function*() {
      const journal = yield* Journal.makeMemory
      yield* journal.begin({ kind: "llm", key: "live", payload: null, owner: "local" })
      let ran = false
      const report = yield* Recovery.run({
        decisions: { llm: () => Recovery.resume(() => Effect.sync(() => (ran = true))) }
      }).pipe(Effect.provideService(Journal.Journal, journal))
      assert.isFalse(ran)
      assert.deepStrictEqual(report.skipped.map((entry) => entry.key), ["live"])
      const failing = yield* Recovery.run().pipe(Effect.provideService(Journal.Journal, journal))
      assert.deepStrictEqual(failing.skipped.map((entry) => entry.key), ["live"])
      assert.strictEqual((yield* entryOf(journal, "live")).status, "InFlight")
    }))

  it.effect("two recoveries at once resume each operation exactly once", () =>
    Effect.gen(function*() {
      const host = yield* makeHost
      const first = yield* host.start
      for (let i = 0; i < 20; i++) yield* leftover(first, `turn-${i}`, "llm")
      const journal = yield* host.start
      const runs = new Map<string, number>()
      const options: Recovery.Options = {
        decisions: {
          llm: (entry) =>
            Recovery.resume(() =>
              Effect.sleep("1 second").pipe(
                Effect.as(runs.set(entry.key, (runs.get(entry.key) ?? 0) + 1)),
                Effect.as(1)
              )
            )
        },
        concurrency: "unbounded"
      }
      const both = yield* Effect.all([Recovery.run(options), Recovery.run(options)], { concurrency: 2 }).pipe(
        Effect.provideService(Journal.Journal, journal),
        Effect.forkChild
      )
      yield* TestClock.adjust("1 second")
      const [a, b] = yield* Fiber.join(both)
      assert.strictEqual(runs.size, 20)
      assert.isTrue(Array.from(runs.values()).every((count) => count === 1))
      assert.strictEqual(a.resumed.length + b.resumed.length, 20)
      assert.strictEqual(a.skipped.length + b.skipped.length, 20)
      assert.deepStrictEqual(yield* journal.unfinished(), [])
    }))

  it.effect("an operation started maxAttempts times is failed instead of resumed", () =>
    Effect.gen(function*() {
      const host = yield* makeHost
      const first = yield* host.start
      yield* leftover(first, "crashy", "llm")
      yield* first.release("crashy")
      yield* first.resume("crashy")
      yield* first.release("crashy")
      yield* first.resume("crashy") // attempt 3 crashes the host again
      const journal = yield* host.start
      let ran = false
      const report = yield* Recovery.run({
        decisions: { llm: () => Recovery.resume(() => Effect.sync(() => (ran = true))) },
        maxAttempts: 3
      }).pipe(Effect.provideService(Journal.Journal, journal))
      assert.isFalse(ran)
      const error = Option.getOrThrow(Recovery.interruptedByCrash(report.failed[0]))
      assert.strictEqual(error.attempts, 3)
      assert.strictEqual(error.detail, "interrupted by a crash or a restart; not resumed after 3 attempts")
    }))

  it.effect("recovers only the owner's operations", () =>
    Effect.gen(function*() {
      const host = yield* makeHost
      const first = yield* host.start
      yield* first.begin({ kind: "llm", key: "mine", payload: null, owner: "host-a" })
      yield* first.begin({ kind: "llm", key: "theirs", payload: null, owner: "host-b" })
      const journal = yield* host.start
      const report = yield* Recovery.run().pipe(
        Effect.provideService(Journal.Journal, journal),
        Effect.provide(JournalClaim.layerOwner("host-a"))
      )
      assert.deepStrictEqual(report.failed.map((entry) => entry.key), ["mine"])
      assert.strictEqual((yield* entryOf(journal, "theirs")).status, "InFlight")
    }))

  it.effect("a resumer interrupted midway leaves the operation InFlight for the next recovery", () =>
    Effect.gen(function*() {
      const host = yield* makeHost
      yield* leftover(yield* host.start, "turn-1", "llm")
      const journal = yield* host.start
      const started = yield* Deferred.make<void>()
      const fiber = yield* Recovery.run({
        decisions: {
          llm: () => Recovery.resume(() => Effect.andThen(Deferred.succeed(started, void 0), Effect.never))
        }
      }).pipe(Effect.provideService(Journal.Journal, journal), Effect.forkChild)
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      const entry = yield* entryOf(journal, "turn-1")
      assert.deepStrictEqual([entry.status, entry.attempts], ["InFlight", 2])
      assert.deepStrictEqual(yield* journal.running, [])
      const report = yield* Recovery.run({
        decisions: { llm: () => Recovery.resume(() => Effect.succeed("done")) }
      }).pipe(Effect.provideService(Journal.Journal, journal))
      assert.deepStrictEqual(report.resumed.map((resumed) => resumed.attempts), [3])
    }))

  it.effect("a resumer bounded by a timeout on the Clock fails when TestClock passes it", () =>
    Effect.gen(function*() {
      const host = yield* makeHost
      yield* leftover(yield* host.start, "turn-1", "llm")
      const journal = yield* host.start
      const fiber = yield* Recovery.run({
        decisions: { llm: () => Recovery.resume(() => Effect.never.pipe(Effect.timeout("30 seconds"))) }
      }).pipe(Effect.provideService(Journal.Journal, journal), Effect.forkChild)
      yield* TestClock.adjust("30 seconds")
      const report = yield* Fiber.join(fiber)
      assert.strictEqual(report.errors.length, 1)
      const entry = yield* entryOf(journal, "turn-1")
      assert.deepStrictEqual([entry.status, entry.finishedAt], ["Failed", 30_000])
      assert.strictEqual((entry.error as { _tag: string })._tag, "TimeoutError")
    }))

  describe("the owner's claim", () => {
    it.effect("refused while another live journal holds the owner: OwnerInUse, and nothing is touched", () =>
      Effect.gen(function*() {
        const host = yield* makeHost
        const running = yield* host.start
        yield* running.claim("local")
        yield* running.begin({ kind: "llm", key: "theirs", payload: null, owner: "local" })
        const second = yield* host.start
        let decided = false
        const error = yield* Effect.flip(
          Recovery.run({ decisions: { llm: () => Recovery.resume(() => Effect.sync(() => (decided = true))) } }).pipe(
            Effect.provideService(Journal.Journal, second)
          )
        )
        assert.strictEqual(error._tag, "OwnerInUse")
        assert.isFalse(decided)
        const reaping = yield* Effect.flip(
          ProcessRecord.reapOrphans(() => Effect.succeed("Killed" as const)).pipe(
            Effect.provideService(Journal.Journal, second)
          )
        )
        assert.strictEqual(reaping._tag, "OwnerInUse")
        const entry = yield* entryOf(second, "theirs")
        assert.deepStrictEqual([entry.status, entry.attempts], ["InFlight", 1])
        // the running one completes its work without a Conflict
        assert.strictEqual((yield* running.complete("theirs", "done")).status, "Completed")
      }))

    it.effect("run keeps the owner claimed until its Scope closes", () =>
      Effect.gen(function*() {
        const host = yield* makeHost
        const journal = yield* host.start
        const other = yield* host.start
        const scope = yield* Scope.make()
        yield* Recovery.run().pipe(Effect.provideService(Journal.Journal, journal), Scope.provide(scope))
        assert.isTrue(yield* journal.holds("local"))
        yield* TestClock.adjust("5 minutes")
        assert.strictEqual((yield* Effect.flip(other.claim("local")))._tag, "OwnerInUse")
        yield* Scope.close(scope, Exit.void)
        assert.isFalse(yield* journal.holds("local"))
        yield* other.claim("local")
      }))

    it.effect("a crashed holder's work is recovered once its claim expires", () =>
      Effect.gen(function*() {
        const host = yield* makeHost
        yield* leftover(yield* host.start, "turn-1", "llm")
        // the crashed process's claim, renewed for the last time at 0, with a 10 s ttl
        yield* host.backend.insertClaim({ owner: "local", holder: "crashed", claimedAt: 0, expiresAt: 10_000 })
        const journal = yield* host.start
        const options = { decisions: { llm: () => Recovery.resume(() => Effect.succeed("continued")) } }
        const refused = yield* Effect.flip(Recovery.run(options).pipe(Effect.provideService(Journal.Journal, journal)))
        assert.strictEqual(refused._tag, "OwnerInUse")
        assert.strictEqual((yield* entryOf(journal, "turn-1")).status, "InFlight")
        yield* TestClock.adjust("10 seconds")
        const report = yield* Recovery.run(options).pipe(Effect.provideService(Journal.Journal, journal))
        assert.deepStrictEqual(report.resumed.map((entry) => [entry.key, entry.attempts]), [["turn-1", 2]])
      }))
  })

  describe("child processes", () => {
    it.effect("recorded children that exited are done; the ones a crashed host left are reaped", () =>
      Effect.gen(function*() {
        const host = yield* makeHost
        const first = yield* host.start
        const [exited, orphan, reused] = yield* Effect.all([
          ProcessRecord.record({ pid: 100, command: ["node", "a.js"] }),
          ProcessRecord.record({ pid: 101, command: ["node", "b.js"] }),
          ProcessRecord.record({ pid: 102, command: ["node", "c.js"] })
        ]).pipe(Effect.provideService(Journal.Journal, first))
        yield* ProcessRecord.exited(exited, { exitCode: 0, signal: null }).pipe(
          Effect.provideService(Journal.Journal, first)
        )
        assert.strictEqual(orphan, "process/local/101/0")
        // the host crashes; the new one reaps
        const journal = yield* host.start
        const live = yield* ProcessRecord.record({ pid: 200, command: ["node", "d.js"] }).pipe(
          Effect.provideService(Journal.Journal, journal)
        )
        const asked: Array<number> = []
        const report = yield* ProcessRecord.reapOrphans((info) =>
          Effect.sync(() => {
            asked.push(info.pid)
            return info.pid === 101 ? "Killed" as const : "Reused" as const
          })
        ).pipe(Effect.provideService(Journal.Journal, journal))
        assert.deepStrictEqual(asked.sort(), [101, 102])
        assert.deepStrictEqual(report.reaped.map(({ entry, outcome }) => [entry.key, outcome]).sort(), [
          [orphan, "Killed"],
          [reused, "Reused"]
        ])
        assert.deepStrictEqual((yield* entryOf(journal, orphan)).result, { outcome: "Killed" })
        // the child this host spawned is not an orphan
        assert.deepStrictEqual(report.skipped.map((entry) => entry.key), [live])
        assert.strictEqual((yield* entryOf(journal, live)).status, "InFlight")
      }))

    it.effect("Recovery.run reaps with `reap` and leaves process entries alone without it", () =>
      Effect.gen(function*() {
        const host = yield* makeHost
        yield* ProcessRecord.record({ pid: 7, command: ["sleep", "60"] }).pipe(
          Effect.provideService(Journal.Journal, yield* host.start)
        )
        const journal = yield* host.start
        const without = yield* Recovery.run().pipe(Effect.provideService(Journal.Journal, journal))
        assert.deepStrictEqual([without.failed.length, without.skipped.length], [0, 1])
        const withReap = yield* Recovery.run({ reap: () => Effect.succeed("Gone" as const) }).pipe(
          Effect.provideService(Journal.Journal, journal)
        )
        assert.deepStrictEqual(withReap.reaped.map(({ outcome }) => outcome), ["Gone"])
        assert.deepStrictEqual(yield* journal.unfinished(), [])
      }))
  })

  describe("recordShutdown", () => {
    const report = (policy: ShutdownPolicy.Policy, ids: ReadonlyArray<number>): Recovery.ShutdownReport => ({
      policy,
      reason: "Stop",
      drained: ids.length === 0,
      cutOff: ids.map((id) => ({ direction: "inbound" as const, id, method: "work" }))
    })

    it.effect("a drain timeout marks what it cut off as NeedsRecovery", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        yield* journal.begin({ kind: "work", key: "rpc/1", payload: null, owner: "local" })
        yield* journal.begin({ kind: "work", key: "rpc/2", payload: null, owner: "local" })
        yield* Recovery.recordShutdown(journal, { keysOf: (cutOff) => `rpc/${cutOff.id}` })(
          report(ShutdownPolicy.drain("1 second"), [1, 3])
        )
        assert.strictEqual((yield* entryOf(journal, "rpc/1")).status, "NeedsRecovery")
        assert.strictEqual((yield* entryOf(journal, "rpc/2")).status, "InFlight")
      }))

    it.effect("a fail-fast stop records what it cut off as Failed with the shutdown reason", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        yield* journal.begin({ kind: "work", key: "rpc/1", payload: null, owner: "local" })
        yield* journal.begin({ kind: "work", key: "rpc/2", payload: null, owner: "local" })
        yield* journal.complete("rpc/2")
        yield* Recovery.recordShutdown(journal, { keysOf: (cutOff) => `rpc/${cutOff.id}` })(
          report(ShutdownPolicy.FailFast(), [1, 2])
        )
        const entry = yield* entryOf(journal, "rpc/1")
        assert.strictEqual(entry.status, "Failed")
        const error = yield* Schema.decodeUnknownEffect(PeerError.ShutdownError)(entry.error)
        assert.deepStrictEqual([error.reason, error.detail], ["Stop", "Stop"])
        assert.strictEqual((yield* entryOf(journal, "rpc/2")).status, "Completed")
      }))

    it.effect("without keysOf, every InFlight operation of the owner that no fiber here runs counts as cut off", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        yield* journal.begin({ kind: "work", key: "cut", payload: null, owner: "local" })
        yield* journal.begin({ kind: "work", key: "live", payload: null, owner: "local" })
        yield* journal.begin({ kind: "work", key: "other", payload: null, owner: "elsewhere" })
        yield* journal.release("cut")
        yield* journal.release("other")
        yield* journal.claim("local")
        yield* Recovery.recordShutdown(journal)(report(ShutdownPolicy.FailFast(), [1]))
        assert.strictEqual((yield* entryOf(journal, "cut")).status, "Failed")
        assert.strictEqual((yield* entryOf(journal, "live")).status, "InFlight")
        assert.strictEqual((yield* entryOf(journal, "other")).status, "InFlight")
      }))

    it.effect("without keysOf and without the owner's claim, it records nothing: the work may be another process's", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        const other = yield* Journal.make(backend)
        const journal = yield* Journal.make(backend)
        yield* other.claim("local")
        yield* other.begin({ kind: "work", key: "theirs", payload: null, owner: "local" })
        yield* Recovery.recordShutdown(journal)(report(ShutdownPolicy.FailFast(), [1]))
        assert.strictEqual((yield* entryOf(journal, "theirs")).status, "InFlight")
      }))

    it.effect("tracked work cut off by a drain timeout ends NeedsRecovery, not Failed", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        const error = yield* Effect.flip(
          Effect.fail(new PeerError.ShutdownError({ reason: "DrainTimeout", phase: "Closing" })).pipe(
            JournaledOperation.run("llm", "call/9", null),
            Effect.provideService(Journal.Journal, journal)
          )
        )
        assert.strictEqual(error._tag, "ShutdownError")
        yield* Recovery.recordShutdown(journal, { keysOf: (cutOff) => `call/${cutOff.id}` })(
          report(ShutdownPolicy.drain("1 second"), [9])
        )
        assert.strictEqual((yield* entryOf(journal, "call/9")).status, "NeedsRecovery")
      }))
  })

  describe("with a Connection's shutdown", () => {
    const Work = Method.request("work", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })
    const Server = Protocol.make({ serves: [Work] })

    const keysOf = (cutOff: Peer.CutOff) => `rpc/${cutOff.direction}/${cutOff.id}`

    /** A server whose `work` is a journaled operation that sleeps on the Clock, and a client that calls it. */
    const setup = (policy: ShutdownPolicy.Policy) =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        const pair = yield* TestTransport.makePair()
        const scope = yield* Scope.make()
        const server = yield* Connection.make({
          protocol: Server,
          transport: pair.left,
          handlers: {
            work: ({ ms }, { id }) =>
              Effect.as(Effect.sleep(Duration.millis(ms)), ms).pipe(
                JournaledOperation.run("work", `rpc/inbound/${id}`, { ms }),
                Effect.provideService(Journal.Journal, journal),
                Effect.orDie
              )
          },
          policy,
          onShutdown: Recovery.recordShutdown(journal, { keysOf })
        }).pipe(Scope.provide(scope))
        const client = yield* Peer.make({
          protocol: Protocol.flip(Server),
          transport: pair.right,
          handlers: {},
          requestTimeout: "1 hour"
        })
        const call = (ms: number) => Effect.forkChild(Effect.result(client.call(Work, { ms })))
        const started = (count: number) =>
          Effect.gen(function*() {
            for (let i = 0; i < 10_000; i++) {
              if ((yield* journal.running).length === count) return
              yield* Effect.yieldNow
            }
            return yield* Effect.die(new Error("the work never started"))
          })
        return { journal, server, call, started }
      })

    it.effect("seed case 3: a drain that the work finishes in time ends clean, with nothing unfinished", () =>
      Effect.gen(function*() {
        const { call, journal, server, started } = yield* setup(ShutdownPolicy.drain("5 seconds"))
        const reply = yield* call(1000)
        yield* started(1)
        const stopping = yield* Effect.forkChild(server.stop())
        yield* TestClock.adjust("1 second")
        assert.strictEqual(yield* Fiber.join(stopping), "Stopped")
        assert.deepStrictEqual(yield* Fiber.join(reply), Result.succeed(1000))
        assert.isTrue((yield* server.awaitShutdown).drained)
        assert.deepStrictEqual(yield* journal.unfinished(), [])
      }))

    it.effect("seed case 4: the work a drain deadline cut off is NeedsRecovery, and a restart auto-continues it", () =>
      Effect.gen(function*() {
        const { call, journal, server, started } = yield* setup(ShutdownPolicy.drain("5 seconds"))
        yield* call(60_000)
        yield* started(1)
        const stopping = yield* Effect.forkChild(server.stop())
        yield* TestClock.adjust("5 seconds")
        yield* Fiber.join(stopping)
        const cut = yield* journal.unfinished()
        assert.deepStrictEqual(cut.map((entry) => [entry.kind, entry.status, entry.payload]), [
          ["work", "NeedsRecovery", { ms: 60_000 }]
        ])
        assert.match(cut[0].reason ?? "", /drain timeout/)
        const report = yield* Recovery.run({
          decisions: { work: () => Recovery.resume((entry) => Effect.succeed((entry.payload as { ms: number }).ms)) }
        }).pipe(Effect.provideService(Journal.Journal, journal))
        assert.deepStrictEqual(report.resumed.map((entry) => [entry.status, entry.result]), [["Completed", 60_000]])
      }))

    it.effect("a fail-fast stop records the work it cut off as Failed with the shutdown reason", () =>
      Effect.gen(function*() {
        const { call, journal, server, started } = yield* setup(ShutdownPolicy.FailFast())
        yield* call(60_000)
        yield* started(1)
        assert.strictEqual(yield* server.stop(), "Stopped")
        const report = yield* server.awaitShutdown
        const key = keysOf(report.cutOff[0])
        const entry = yield* entryOf(journal, key)
        assert.strictEqual(entry.status, "Failed")
        const error = yield* Schema.decodeUnknownEffect(PeerError.ShutdownError)(entry.error)
        assert.deepStrictEqual([error.reason, error.detail], ["Stop", "Stop"])
        assert.deepStrictEqual(yield* journal.unfinished(), [])
      }))
  })
})
