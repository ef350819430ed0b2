import { assert, describe, it } from "@effect/vitest"
import { Journal, Recovery } from "@lifeline/kernel"
import { Effect, Fiber, Option } from "effect"
import { TestClock } from "effect/testing"
import * as orphans from "../src/internal/sqliteOrphans.js"

const pid = 4242
const startedAt = 1_700_000_000_000
const info: Recovery.ProcessInfo = { pid, startedAt, command: ["node", "extension.js"] }

/** One recorded process that is ours (its start time matches) and dies only on the signals in `diesOn`. */
const fakeSystem = (diesOn: ReadonlyArray<NodeJS.Signals>, startedAtMs = startedAt) => {
  let alive = true
  const signals: Array<NodeJS.Signals> = []
  const system: orphans.System = {
    probe: () => alive ? "Alive" : "Gone",
    readProcStat: () => Effect.succeed(Option.some({ state: "S", processGroup: pid, startedAt: startedAtMs })),
    psStart: () => Effect.succeed(Option.none()),
    signal: (_, name) =>
      Effect.sync(() => {
        signals.push(name)
        if (diesOn.includes(name)) alive = false
      })
  }
  return { system, signals }
}

describe("SqliteJournal.reapProcess", () => {
  it.effect("an orphan that ignores SIGTERM is SIGKILLed after grace, and Killed once it is gone", () =>
    Effect.gen(function*() {
      const { signals, system } = fakeSystem(["SIGKILL"])
      const fiber = yield* Effect.forkChild(orphans.makeReaper(system, { grace: "1 second" })(info))
      yield* TestClock.adjust("1 second")
      yield* TestClock.adjust("100 millis")
      assert.strictEqual(yield* Fiber.join(fiber), "Killed")
      assert.deepStrictEqual(signals, ["SIGTERM", "SIGKILL"])
    }))

  it.effect("an orphan still there after SIGKILL and grace is not reported Killed: the reap fails with Survived", () =>
    Effect.gen(function*() {
      const { signals, system } = fakeSystem([])
      const fiber = yield* Effect.forkChild(Effect.flip(orphans.makeReaper(system, { grace: "1 second" })(info)))
      yield* TestClock.adjust("1 second")
      assert.isTrue(fiber.pollUnsafe() === undefined, "waits for the exit after SIGKILL")
      yield* TestClock.adjust("1 second")
      const error = yield* Fiber.join(fiber)
      assert.instanceOf(error, orphans.ReapError)
      assert.strictEqual(error._tag, "ReapError")
      assert.strictEqual(error.reason, "Survived")
      assert.strictEqual(error.pid, pid)
      assert.deepStrictEqual(signals, ["SIGTERM", "SIGKILL"])
    }))

  it.effect("recovery records a survivor as Failed with the ReapError and lists it in errors, not in reaped", () =>
    Effect.gen(function*() {
      // recordProcess stamps the entry with the TestClock's time, 0
      const { system } = fakeSystem([], 0)
      const key = yield* Recovery.recordProcess({ pid, command: info.command })
      const journal = yield* Journal.Journal
      yield* journal.release(key) // as if a crashed run had recorded it
      const fiber = yield* Effect.forkChild(
        Effect.scoped(Recovery.reapOrphans(orphans.makeReaper(system, { grace: "1 second" })))
      )
      // SIGTERM, 1 s, SIGKILL, 1 s: moved on in steps, since recovery takes a few steps before it reaps
      for (let step = 0; step < 8 && fiber.pollUnsafe() === undefined; step++) {
        yield* TestClock.adjust("500 millis")
      }
      const report = yield* Fiber.join(fiber)
      assert.deepStrictEqual(report.reaped, [])
      assert.deepStrictEqual(report.errors.map((e) => [e.key, (e.error as orphans.ReapError).reason]), [[
        key,
        "Survived"
      ]])
      const entry = Option.getOrThrow(yield* journal.get(key))
      assert.strictEqual(entry.status, "Failed")
      assert.deepInclude(entry.error, { _tag: "ReapError", reason: "Survived", pid })
    }).pipe(Effect.provide(Journal.layerMemory)))
})
