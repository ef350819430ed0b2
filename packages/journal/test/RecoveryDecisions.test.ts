/**
 * The decisions `Recovery.run` and `Recovery.recordShutdown` take for each journal entry, one by one: which decision
 * applies, when an operation is resumed or failed and with what detail, how each journal step that fails is reported,
 * how many resumers run at once, and what each shutdown reason records (mutation testing, issue 20). Recovery.test.ts
 * covers the seed cases end to end; this file only uses the package's public entry points.
 */
import { assert, describe, it } from "@effect/vitest"
import type { JournalEntry } from "@lifeline/journal"
import { Journal, JournalBackend, JournalError, ProcessRecord, Recovery } from "@lifeline/journal"
import { PeerError, ShutdownPolicy } from "@lifeline/kernel"
import { Effect, Fiber, Logger, Option, References, Schema } from "effect"
import { TestClock } from "effect/testing"

interface Line {
  readonly line: string
  readonly annotations: Record<string, unknown>
}

/** A logger that keeps each line with its annotations. */
const capture = () => {
  const lines: Array<Line> = []
  const layer = Logger.layer([
    Logger.make(({ fiber, message }) => {
      // The text only: what follows it (an error, a cause) is not part of the line.
      const line = String(Array.isArray(message) ? message[0] : message)
      lines.push({ line, annotations: { ...fiber.getRef(References.CurrentLogAnnotations) } })
    })
  ])
  return { lines, layer, text: () => lines.map(({ line }) => line) }
}

/** A backend whose `update` fails with a Storage error when `refuse` says so. */
const failingUpdates = (
  backend: JournalBackend.Backend,
  refuse: (key: string, patch: JournalBackend.Patch) => boolean
): JournalBackend.Backend => ({
  ...backend,
  update: (key, where, patch) =>
    refuse(key, patch)
      ? Effect.fail(new JournalError.JournalError({ reason: "Storage", key, detail: "the disk is gone" }))
      : backend.update(key, where, patch)
})

/**
 * A backend on which another recovery takes `key` (one more attempt) just before this journal's first `get` or
 * `update` of it: what a second host does between this one listing the entry and acting on it.
 */
const movedOn = (backend: JournalBackend.Backend, key: string, at: "get" | "update"): JournalBackend.Backend => {
  let done = false
  const bump = (of: string) =>
    Effect.suspend(() => {
      if (done || of !== key) return Effect.void
      done = true
      return Effect.flatMap(backend.get(key), (row) =>
        Option.isNone(row) ? Effect.void : Effect.asVoid(
          backend.update(key, { statuses: ["InFlight", "NeedsRecovery"] }, { attempts: row.value.attempts + 1 })
        ))
    })
  return at === "get"
    ? { ...backend, get: (of) => Effect.andThen(bump(of), backend.get(of)) }
    : { ...backend, update: (of, where, patch) => Effect.andThen(bump(of), backend.update(of, where, patch)) }
}

/** The rows of a crashed run: each key `InFlight`, with `attempts` starts, and no fiber running it. */
const crashed = (backend: JournalBackend.Backend, entries: ReadonlyArray<readonly [string, string, number?]>) =>
  Effect.gen(function*() {
    const first = yield* Journal.make(backend)
    for (const [key, kind, attempts = 1] of entries) {
      yield* first.begin({ kind, key, payload: { key }, owner: "local" })
      for (let attempt = 1; attempt < attempts; attempt++) {
        yield* first.release(key)
        yield* first.resume(key)
      }
      yield* first.release(key)
    }
  })

const entryOf = (journal: Journal.Journal.Service, key: string) => Effect.map(journal.get(key), Option.getOrThrow)

const detailOf = (entry: JournalEntry.Entry) => Option.getOrThrow(Recovery.interruptedByCrash(entry)).detail

describe("Recovery decisions", () => {
  it.effect("a kind that only Object.prototype has is no decision: the entry is failed, not run", () =>
    Effect.gen(function*() {
      const backend = yield* JournalBackend.makeMemory
      const kinds = ["toString", "constructor", "hasOwnProperty", "__proto__"]
      yield* crashed(backend, kinds.map((kind) => [`k-${kind}`, kind] as const))
      const journal = yield* Journal.make(backend)
      const report = yield* Recovery.run({ decisions: {} }).pipe(Effect.provideService(Journal.Journal, journal))
      assert.deepStrictEqual(report.failed.map((entry) => entry.kind).sort(), [...kinds].sort())
      for (const entry of report.failed) assert.strictEqual(detailOf(entry), "interrupted by a crash or a restart")
    }))

  it.effect("maxAttempts defaults to 3: an entry started twice is resumed, one started three times is failed", () =>
    Effect.gen(function*() {
      const backend = yield* JournalBackend.makeMemory
      yield* crashed(backend, [["twice", "llm", 2], ["thrice", "llm", 3]])
      const journal = yield* Journal.make(backend)
      const logs = capture()
      const report = yield* Recovery.run({ decisions: { llm: () => Recovery.resume(() => Effect.succeed("ok")) } })
        .pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.provide(logs.layer)
        )
      assert.deepStrictEqual(report.resumed.map((entry) => [entry.key, entry.attempts]), [["twice", 3]])
      assert.deepStrictEqual(report.failed.map((entry) => entry.key), ["thrice"])
      assert.strictEqual(
        detailOf(report.failed[0]),
        "interrupted by a crash or a restart; not resumed after 3 attempts"
      )
      assert.include(logs.text(), "recovery: resuming llm twice (attempt 3)")
      const resuming = logs.lines.find(({ line }) => line.startsWith("recovery: resuming llm twice"))
      assert.strictEqual(resuming?.annotations.key, "twice")
      assert.include(
        logs.text(),
        "recovery: failed llm thrice: interrupted by a crash or a restart; not resumed after 3 attempts"
      )
      assert.include(logs.text(), "recovery: 1 resumed, 1 failed, 0 errors, 0 skipped, 0 orphan processes")
    }))

  it.effect("maxAttempts 1 fails even an entry started once", () =>
    Effect.gen(function*() {
      const backend = yield* JournalBackend.makeMemory
      yield* crashed(backend, [["once", "llm"]])
      const journal = yield* Journal.make(backend)
      const report = yield* Recovery.run({
        decisions: { llm: () => Recovery.resume(() => Effect.succeed("ok")) },
        maxAttempts: 1
      }).pipe(Effect.provideService(Journal.Journal, journal))
      assert.deepStrictEqual(report.resumed, [])
      assert.strictEqual(
        detailOf(report.failed[0]),
        "interrupted by a crash or a restart; not resumed after 1 attempts"
      )
    }))

  it.effect("the detail of a failed entry: the decision's, else why it was interrupted; logged with its key", () =>
    Effect.gen(function*() {
      const backend = yield* JournalBackend.makeMemory
      yield* crashed(backend, [["chosen", "tool"], ["plain", "tool"], ["cut", "tool"]])
      const first = yield* Journal.make(backend)
      yield* first.markNeedsRecovery(["cut"], "the drain ended")
      const journal = yield* Journal.make(backend)
      const logs = capture()
      const report = yield* Recovery.run({
        decisions: { tool: (entry) => Recovery.fail(entry.key === "chosen" ? "side effects unknown" : undefined) }
      }).pipe(Effect.provideService(Journal.Journal, journal), Effect.provide(logs.layer))
      const details = Object.fromEntries(report.failed.map((entry) => [entry.key, detailOf(entry)]))
      assert.deepStrictEqual(details, {
        chosen: "side effects unknown",
        plain: "interrupted by a crash or a restart",
        cut: "cut off by a shutdown (the drain ended)"
      })
      const line = logs.lines.find(({ line }) => line === "recovery: failed tool chosen: side effects unknown")
      assert.strictEqual(line?.annotations.key, "chosen")
      const summary = logs.lines.find(({ line }) => line.startsWith("recovery: 0 resumed, 3 failed"))
      assert.strictEqual(summary?.annotations.owner, "local")
    }))

  it.effect("nothing unfinished: an empty report and no summary line", () =>
    Effect.gen(function*() {
      const journal = yield* Journal.makeMemory
      const logs = capture()
      const report = yield* Recovery.run().pipe(
        Effect.provideService(Journal.Journal, journal),
        Effect.provide(logs.layer)
      )
      assert.deepStrictEqual(report, { resumed: [], failed: [], errors: [], skipped: [], reaped: [] })
      assert.deepStrictEqual(logs.text(), [])
    }))

  it.effect("at most 4 resumers at once by default; `concurrency` changes it", () =>
    Effect.gen(function*() {
      for (const [concurrency, expected] of [[undefined, 4], [2, 2]] as const) {
        const backend = yield* JournalBackend.makeMemory
        yield* crashed(backend, Array.from({ length: 7 }, (_, i) => [`op-${i}`, "llm"] as const))
        const journal = yield* Journal.make(backend)
        let running = 0
        let most = 0
        const work = Effect.acquireUseRelease(
          Effect.sync(() => {
            running++
            most = Math.max(most, running)
          }),
          () => Effect.sleep("1 second"),
          () => Effect.sync(() => void running--)
        )
        const fiber = yield* Recovery.run({ decisions: { llm: () => Recovery.resume(() => work) }, concurrency }).pipe(
          Effect.scoped,
          Effect.provideService(Journal.Journal, journal),
          Effect.forkChild
        )
        for (let i = 0; i < 4; i++) yield* TestClock.adjust("1 second")
        const report = yield* Fiber.join(fiber)
        assert.strictEqual(report.resumed.length, 7)
        assert.strictEqual(most, expected, `concurrency ${concurrency}`)
      }
    }))

  describe("how a resumed entry ends", () => {
    it.effect("a value that is not JSON: the entry still completes, without a result", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        yield* crashed(backend, [["big", "llm"]])
        const journal = yield* Journal.make(backend)
        const report = yield* Recovery.run({ decisions: { llm: () => Recovery.resume(() => Effect.succeed(10n)) } })
          .pipe(
            Effect.provideService(Journal.Journal, journal)
          )
        assert.deepStrictEqual(report.errors, [])
        const entry = yield* entryOf(journal, "big")
        assert.deepStrictEqual([entry.status, entry.result], ["Completed", undefined])
        assert.strictEqual(report.resumed[0].key, "big")
      }))

    it.effect("a resumer that dies: the defect is recorded and reported, and logged with the key", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        yield* crashed(backend, [["boom", "llm"]])
        const journal = yield* Journal.make(backend)
        const logs = capture()
        const report = yield* Recovery.run({
          decisions: { llm: () => Recovery.resume(() => Effect.die(new Error("the model vanished"))) }
        }).pipe(Effect.provideService(Journal.Journal, journal), Effect.provide(logs.layer))
        assert.strictEqual(report.errors.length, 1)
        assert.deepStrictEqual([report.errors[0].key, report.errors[0].kind], ["boom", "llm"])
        assert.strictEqual((report.errors[0].error as Error).message, "the model vanished")
        const entry = yield* entryOf(journal, "boom")
        assert.strictEqual(entry.status, "Failed")
        assert.include(JSON.stringify(entry.error), "the model vanished")
        const line = logs.lines.find(({ line }) => line === "recovery: resuming llm boom failed")
        assert.strictEqual(line?.annotations.key, "boom")
        assert.deepStrictEqual(yield* journal.running, [])
      }))

    it.effect("a completion the journal cannot write: reported, and the entry left for the next recovery", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        yield* crashed(backend, [["lost", "llm"]])
        const journal = yield* Journal.make(failingUpdates(backend, (_, patch) => patch.status === "Completed"))
        const report = yield* Recovery.run({ decisions: { llm: () => Recovery.resume(() => Effect.succeed(1)) } }).pipe(
          Effect.provideService(Journal.Journal, journal)
        )
        assert.strictEqual(report.errors.length, 1)
        assert.strictEqual((report.errors[0].error as JournalError.JournalError).reason, "Storage")
        assert.deepStrictEqual(report.resumed, [])
        assert.strictEqual((yield* entryOf(journal, "lost")).status, "InFlight")
        assert.deepStrictEqual(yield* journal.running, [])
      }))

    it.effect("only an invalid value is completed again without it: a storage failure is not retried", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        yield* crashed(backend, [["once", "llm"]])
        let refused = 0
        const journal = yield* Journal.make(
          failingUpdates(backend, (_, patch) => patch.status === "Completed" && refused++ === 0)
        )
        const report = yield* Recovery.run({ decisions: { llm: () => Recovery.resume(() => Effect.succeed(1)) } }).pipe(
          Effect.provideService(Journal.Journal, journal)
        )
        assert.deepStrictEqual(report.resumed, [])
        assert.strictEqual((report.errors[0].error as JournalError.JournalError).reason, "Storage")
        assert.strictEqual((yield* entryOf(journal, "once")).status, "InFlight")
      }))

    it.effect("a failure the journal cannot write: the resumer's error is still reported, the entry released", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        yield* crashed(backend, [["lost", "llm"]])
        const journal = yield* Journal.make(failingUpdates(backend, (_, patch) => patch.status === "Failed"))
        const logs = capture()
        const report = yield* Recovery.run({ decisions: { llm: () => Recovery.resume(() => Effect.fail("no")) } }).pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.provide(logs.layer)
        )
        assert.deepStrictEqual(report.errors.map((error) => error.error), ["no"])
        assert.strictEqual((yield* entryOf(journal, "lost")).status, "InFlight")
        assert.deepStrictEqual(yield* journal.running, [])
        const warning = logs.lines.find(({ line }) => line === "recovery: could not record a failed resume")
        assert.strictEqual(warning?.annotations.key, "lost")
      }))

    it.effect("a journal step that fails before the resumer runs is an error, logged with its key", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        yield* crashed(backend, [["resume", "llm"], ["fail", "tool"]])
        // Resuming sets the entry InFlight again, failing sets it Failed: both writes are refused.
        const journal = yield* Journal.make(failingUpdates(backend, () => true))
        const logs = capture()
        let ran = false
        const report = yield* Recovery.run({
          decisions: { llm: () => Recovery.resume(() => Effect.sync(() => (ran = true))) }
        }).pipe(Effect.provideService(Journal.Journal, journal), Effect.provide(logs.layer))
        assert.isFalse(ran)
        assert.deepStrictEqual(report.errors.map((error) => error.key).sort(), ["fail", "resume"])
        assert.isTrue(report.errors.every((error) => (error.error as JournalError.JournalError).reason === "Storage"))
        assert.deepStrictEqual([report.failed, report.resumed, report.skipped], [[], [], []])
        const warnings = logs.lines.filter(({ line }) => line === "recovery: a journal step failed")
        assert.deepStrictEqual(warnings.map(({ annotations }) => annotations.key).sort(), ["fail", "resume"])
      }))
  })

  describe("an entry another recovery took after it was listed is skipped, never acted on twice", () => {
    it.effect("not failed", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        yield* crashed(backend, [["tool-1", "tool"]])
        const journal = yield* Journal.make(movedOn(backend, "tool-1", "update"))
        const report = yield* Recovery.run().pipe(Effect.provideService(Journal.Journal, journal))
        assert.deepStrictEqual([report.failed, report.errors], [[], []])
        assert.deepStrictEqual(report.skipped.map((entry) => entry.key), ["tool-1"])
        const entry = yield* entryOf(journal, "tool-1")
        assert.deepStrictEqual([entry.status, entry.attempts], ["InFlight", 2])
      }))

    it.effect("not resumed", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        yield* crashed(backend, [["turn-1", "llm"]])
        const journal = yield* Journal.make(movedOn(backend, "turn-1", "get"))
        let ran = false
        const report = yield* Recovery.run({
          decisions: { llm: () => Recovery.resume(() => Effect.sync(() => (ran = true))) }
        }).pipe(Effect.provideService(Journal.Journal, journal))
        assert.isFalse(ran)
        assert.deepStrictEqual(report.skipped.map((entry) => entry.key), ["turn-1"])
        assert.deepStrictEqual((yield* entryOf(journal, "turn-1")).attempts, 2)
      }))

    it.effect("not failed by a shutdown that found it without keysOf", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        const journal = yield* Journal.make(movedOn(backend, "cut", "update"))
        yield* journal.begin({ kind: "work", key: "cut", payload: null, owner: "local" })
        yield* journal.release("cut")
        const logs = capture()
        yield* Effect.scoped(Effect.andThen(
          journal.claim("local"),
          Recovery.recordShutdown(journal)({
            policy: ShutdownPolicy.FailFast(),
            reason: "Stop",
            drained: false,
            cutOff: []
          })
        )).pipe(Effect.provide(logs.layer))
        assert.deepStrictEqual(logs.text(), ["journal: 0 operation(s) failed by the shutdown"])
        assert.strictEqual((yield* entryOf(journal, "cut")).status, "InFlight")
      }))
  })

  describe("recordShutdown", () => {
    const cutOff = (ids: ReadonlyArray<number>) =>
      ids.map((id) => ({ direction: "inbound" as const, id, method: "work" }))
    const keysOf = (cut: { readonly id: unknown }) => cut.id === 99 ? undefined : `rpc/${cut.id}`

    it.effect("a fail-fast stop records each reason it knows, and Stop for any other", () =>
      Effect.gen(function*() {
        const reasons = [
          ["Interrupted", "Interrupted"],
          ["Failed", "Failed"],
          ["DrainTimeout", "DrainTimeout"],
          ["Stop", "Stop"],
          ["RemoteShutdown", "Stop"],
          ["TransportClosed", "Stop"]
        ] as const
        for (const [reason, recorded] of reasons) {
          const journal = yield* Journal.makeMemory
          yield* journal.begin({ kind: "work", key: "rpc/1", payload: null, owner: "local" })
          yield* Recovery.recordShutdown(journal, { keysOf })({
            policy: ShutdownPolicy.FailFast(),
            reason,
            drained: false,
            cutOff: cutOff([1])
          })
          const entry = yield* entryOf(journal, "rpc/1")
          const error = yield* Schema.decodeUnknownEffect(PeerError.ShutdownError)(entry.error)
          assert.deepStrictEqual([error.reason, error.phase, error.detail], [recorded, "Closing", reason], reason)
        }
      }))

    it.effect("counts what it failed: not unknown keys, not ended ones, not the ones keysOf maps to nothing", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        for (const key of ["rpc/1", "rpc/2", "rpc/99"]) {
          yield* journal.begin({ kind: "work", key, payload: null, owner: "local" })
        }
        yield* journal.complete("rpc/2")
        const logs = capture()
        yield* Recovery.recordShutdown(journal, { keysOf })({
          policy: ShutdownPolicy.FailFast(),
          reason: "Stop",
          drained: false,
          cutOff: cutOff([1, 2, 3, 99])
        }).pipe(Effect.provide(logs.layer))
        assert.deepStrictEqual(logs.text(), ["journal: 1 operation(s) failed by the shutdown"])
        assert.strictEqual((yield* entryOf(journal, "rpc/1")).status, "Failed")
        assert.strictEqual((yield* entryOf(journal, "rpc/2")).status, "Completed")
        assert.strictEqual((yield* entryOf(journal, "rpc/99")).status, "InFlight")
      }))

    it.effect("a drain timeout marks with its reason and counts; nothing cut off records and logs nothing", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        yield* journal.begin({ kind: "work", key: "rpc/1", payload: null, owner: "local" })
        yield* journal.begin({ kind: "work", key: "rpc/2", payload: null, owner: "local" })
        const logs = capture()
        const record = Recovery.recordShutdown(journal, { keysOf })
        for (const policy of [ShutdownPolicy.FailFast(), ShutdownPolicy.drain("1 second")]) {
          yield* record({ policy, reason: "Stop", drained: true, cutOff: cutOff([99]) }).pipe(
            Effect.provide(logs.layer)
          )
        }
        assert.deepStrictEqual(logs.text(), [])
        yield* record({
          policy: ShutdownPolicy.drain("1 second"),
          reason: "Interrupted",
          drained: false,
          cutOff: cutOff([1, 2])
        })
          .pipe(Effect.provide(logs.layer))
        assert.deepStrictEqual(logs.text(), ["journal: 2 operation(s) cut off by the drain timeout need recovery"])
        const entry = yield* entryOf(journal, "rpc/1")
        assert.deepStrictEqual([entry.status, entry.reason], [
          "NeedsRecovery",
          "cut off by a drain timeout (Interrupted)"
        ])
      }))

    it.effect("without keysOf: only InFlight work of the owner, not processes, not NeedsRecovery, not running here", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        const begin = (key: string, kind = "work") => journal.begin({ kind, key, payload: null, owner: "local" })
        yield* begin("cut")
        yield* begin("marked")
        yield* begin("live")
        yield* begin(`${ProcessRecord.kind}/1`, ProcessRecord.kind)
        for (const key of ["cut", "marked", `${ProcessRecord.kind}/1`]) yield* journal.release(key)
        yield* journal.markNeedsRecovery(["marked"], "earlier")
        yield* Effect.scoped(Effect.andThen(
          journal.claim("local"),
          Recovery.recordShutdown(journal)({
            policy: ShutdownPolicy.FailFast(),
            reason: "Stop",
            drained: false,
            cutOff: []
          })
        ))
        const statuses = yield* Effect.forEach(
          ["cut", "marked", "live", `${ProcessRecord.kind}/1`],
          (key) => Effect.map(entryOf(journal, key), (entry) => entry.status)
        )
        assert.deepStrictEqual(statuses, ["Failed", "NeedsRecovery", "InFlight", "InFlight"])
      }))

    it.effect("without keysOf or the owner's claim: a warning that names the owner, and nothing recorded", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        yield* journal.begin({ kind: "work", key: "cut", payload: null, owner: "local" })
        yield* journal.release("cut")
        const logs = capture()
        yield* Recovery.recordShutdown(journal, { owner: "local" })({
          policy: ShutdownPolicy.FailFast(),
          reason: "Stop",
          drained: false,
          cutOff: []
        }).pipe(Effect.provide(logs.layer))
        assert.deepStrictEqual(logs.text(), [
          "journal: the shutdown recorded nothing: without keysOf it needs this journal's claim on owner local"
        ])
        assert.strictEqual((yield* entryOf(journal, "cut")).status, "InFlight")
      }))

    it.effect("a journal that cannot write: a warning, and the shutdown goes on", () =>
      Effect.gen(function*() {
        const backend = yield* JournalBackend.makeMemory
        const journal = yield* Journal.make(failingUpdates(backend, () => true))
        yield* journal.begin({ kind: "work", key: "rpc/1", payload: null, owner: "local" })
        const logs = capture()
        for (const policy of [ShutdownPolicy.FailFast(), ShutdownPolicy.drain("1 second")]) {
          yield* Recovery.recordShutdown(journal, { keysOf })({
            policy,
            reason: "Stop",
            drained: false,
            cutOff: cutOff([1])
          })
            .pipe(Effect.provide(logs.layer))
        }
        assert.deepStrictEqual(logs.text(), [
          "journal: could not record what the shutdown cut off",
          "journal: could not record what the shutdown cut off"
        ])
      }))
  })

  describe("interruptedByCrash", () => {
    it.effect("is the typed error only of a Failed entry whose error is one", () =>
      Effect.gen(function*() {
        const journal = yield* Journal.makeMemory
        const begin = (key: string) => journal.begin({ kind: "work", key, payload: null, owner: "local" })
        yield* begin("done")
        yield* journal.complete("done", { _tag: "InterruptedByCrash" })
        yield* begin("other")
        yield* journal.fail("other", new PeerError.ShutdownError({ reason: "Stop", phase: "Closing" }))
        const fields = { key: "odd", kind: "work", attempts: 1, startedAt: 0, detail: "d" }
        yield* begin("odd")
        yield* journal.fail("odd", { _tag: "InterruptedByCrash", ...fields, attempts: 1.5 })
        yield* begin("real")
        yield* journal.fail("real", new Recovery.InterruptedByCrash({ ...fields, key: "real" }))
        for (const key of ["done", "other", "odd"]) {
          assert.isTrue(Option.isNone(Recovery.interruptedByCrash(yield* entryOf(journal, key))), key)
        }
        const real = Option.getOrThrow(Recovery.interruptedByCrash(yield* entryOf(journal, "real")))
        assert.instanceOf(real, Recovery.InterruptedByCrash)
        assert.deepStrictEqual(
          { key: real.key, kind: real.kind, attempts: real.attempts, startedAt: real.startedAt, detail: real.detail },
          { ...fields, key: "real" }
        )
        assert.strictEqual(real.message, "work real was interrupted (attempt 1): d")
      }))
  })
})
