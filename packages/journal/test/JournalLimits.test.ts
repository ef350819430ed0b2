import { assert, describe, it } from "@effect/vitest"
import { Journal, JournalBackend, JournaledOperation, JournalError, Recovery } from "@lifeline/journal"
import { Cause, Effect, Exit, Fiber, Logger, Option, References } from "effect"
import { TestClock } from "effect/testing"

interface Line {
  readonly level: string
  readonly text: string
  readonly annotations: Record<string, unknown>
}

/** Every log line, as a logger that prints the message and its extra arguments would see them. */
const capture = () => {
  const lines: Array<Line> = []
  const layer = Logger.layer([
    Logger.make(({ fiber, logLevel, message }) => {
      const parts = Array.isArray(message) ? message : [message]
      lines.push({
        level: logLevel,
        text: parts.map((part) => typeof part === "string" ? part : String(part)).join(" "),
        annotations: { ...fiber.getRef(References.CurrentLogAnnotations) }
      })
    })
  ])
  return { lines, layer }
}

const op = (key: string) => ({ kind: "llm", key, payload: { key }, owner: "host" })

const errorOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Exit.findErrorOption(exit)) : undefined

// A storage that stopped answering, as a frozen server: its steps never end, and cannot even be interrupted.
const frozen = (backend: JournalBackend.Backend): JournalBackend.Backend => ({
  ...backend,
  insert: () => Effect.uninterruptible(Effect.never),
  update: () => Effect.uninterruptible(Effect.never),
  get: () => Effect.uninterruptible(Effect.never),
  list: () => Effect.uninterruptible(Effect.never)
})

describe("Journal operationTimeout", () => {
  it.effect("a step the storage never answers fails after operationTimeout on the Clock, as a Storage timeout", () =>
    Effect.gen(function*() {
      const journal = yield* Journal.make(frozen(yield* JournalBackend.makeMemory), { operationTimeout: "2 seconds" })
      const get = yield* Effect.forkChild(Effect.exit(journal.get("a")))
      // Inside an uninterruptible region too, as track records a start.
      const begin = yield* Effect.forkChild(Effect.exit(Effect.uninterruptible(journal.begin(op("b")))))
      yield* TestClock.adjust("1999 millis")
      assert.isUndefined(get.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      const exits: ReadonlyArray<Exit.Exit<unknown, JournalError.JournalError>> = [
        yield* Fiber.join(get),
        yield* Fiber.join(begin)
      ]
      for (const exit of exits) {
        const error = errorOf(exit)
        assert.instanceOf(error, JournalError.JournalError)
        assert.strictEqual(error.reason, "Storage")
        assert.include(error.message, "did not answer within 2000 ms (operationTimeout)")
      }
      // the key begun is no longer run here
      assert.deepStrictEqual(yield* journal.running, [])
    }))

  it.effect("the default is Journal.defaultOperationTimeout (5 seconds)", () =>
    Effect.gen(function*() {
      assert.strictEqual(Journal.defaultOperationTimeout, "5 seconds")
      const journal = yield* Journal.make(frozen(yield* JournalBackend.makeMemory))
      const fiber = yield* Effect.forkChild(Effect.exit(journal.unfinished()))
      yield* TestClock.adjust("4999 millis")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(errorOf(yield* Fiber.join(fiber))?.reason, "Storage")
    }))

  it.effect("a step waiting on the storage is interrupted at once, without waiting for the storage", () =>
    Effect.gen(function*() {
      const journal = yield* Journal.make(frozen(yield* JournalBackend.makeMemory))
      const fiber = yield* Effect.forkChild(journal.get("a"))
      yield* Effect.yieldNow
      yield* Fiber.interrupt(fiber)
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause))
    }))
})

describe("JournaledOperation.run when the failure cannot be recorded", () => {
  it.effect("the caller gets the JournalError, whose cause is the operation's own failure; the entry stays", () =>
    Effect.gen(function*() {
      const backend = yield* JournalBackend.makeMemory
      const broken: JournalBackend.Backend = {
        ...backend,
        update: (key, where, patch) =>
          patch.status === "Failed"
            ? Effect.fail(new JournalError.JournalError({ reason: "Storage", detail: "the disk is full" }))
            : backend.update(key, where, patch)
      }
      const journal = yield* Journal.make(broken)
      const exit = yield* Effect.exit(
        Effect.fail("the tool broke").pipe(
          JournaledOperation.run("tool", "t-1", {}),
          Effect.provideService(Journal.Journal, journal)
        )
      )
      const error = errorOf(exit)
      assert.instanceOf(error, JournalError.JournalError)
      const journalError = error as JournalError.JournalError
      assert.deepStrictEqual([journalError.reason, journalError.key], ["Storage", "t-1"])
      assert.include(journalError.message, "the disk is full")
      assert.isTrue(Cause.isCause(journalError.cause))
      assert.deepStrictEqual(Cause.squash(journalError.cause as Cause.Cause<unknown>), "the tool broke")
      assert.strictEqual(Option.getOrThrow(yield* journal.get("t-1")).status, "InFlight")
      assert.deepStrictEqual(yield* journal.running, [])
    }))

  it.effect("an error too large to store is recorded as its message", () =>
    Effect.gen(function*() {
      const journal = yield* Journal.make(yield* JournalBackend.makeMemory, { maxPayloadBytes: 1000 })
      const exit = yield* Effect.exit(
        Effect.fail({ message: "too much", data: "x".repeat(2000) }).pipe(
          JournaledOperation.run("tool", "t-2", {}),
          Effect.provideService(Journal.Journal, journal)
        )
      )
      assert.deepStrictEqual(errorOf(exit), { message: "too much", data: "x".repeat(2000) })
      const entry = Option.getOrThrow(yield* journal.get("t-2"))
      assert.deepStrictEqual([entry.status, entry.error, entry.reason], ["Failed", { message: "too much" }, "too much"])
    }))
})

describe("Journal logs", () => {
  it.effect("a claim that cannot be renewed logs one short line per failure, and one when it is renewed again", () =>
    Effect.gen(function*() {
      const backend = yield* JournalBackend.makeMemory
      let down = false
      const flaky: JournalBackend.Backend = {
        ...backend,
        replaceClaim: (claim, where) =>
          down
            ? Effect.fail(
              new JournalError.JournalError({
                reason: "Storage",
                detail: "the journal could not be written: connect ECONNREFUSED 127.0.0.1:5432"
              })
            )
            : backend.replaceClaim(claim, where)
      }
      const logs = capture()
      yield* Effect.gen(function*() {
        const journal = yield* Journal.make(flaky)
        yield* journal.claim("host", { ttl: "30 seconds" })
        down = true
        yield* TestClock.adjust("20 seconds")
        down = false
        yield* TestClock.adjust("10 seconds")
        assert.isTrue(yield* journal.holds("host"))
      }).pipe(Effect.scoped, Effect.provide(logs.layer))
      const warnings = logs.lines.filter((line) => line.level === "Warn")
      assert.deepStrictEqual(
        warnings.map((line) => line.text),
        [1, 2].map((count) =>
          `journal: could not renew the claim on owner host (failure ${count} in a row): journal: Storage: ` +
          "the journal could not be written: connect ECONNREFUSED 127.0.0.1:5432"
        )
      )
      assert.deepStrictEqual(
        logs.lines.filter((line) => line.level === "Info").map((line) => line.text),
        ["journal: renewed the claim on owner host again after 2 failure(s)"]
      )
    }))

  it.effect("keys and kinds that a storage holds are escaped in recovery's log lines and annotations", () =>
    Effect.gen(function*() {
      const backend = yield* JournalBackend.makeMemory
      // Written by another program (or an older journal) straight into the storage: no check saw them.
      for (const [key, kind] of [["a\nlevel=INFO msg=forged", "llm"], ["b", "\u001b[2J\u001b]0;title\u0007"]]) {
        yield* backend.insert({
          key,
          kind,
          owner: "host",
          status: "InFlight",
          attempts: 1,
          payload: "null",
          result: null,
          error: null,
          reason: null,
          startedAt: 0,
          updatedAt: 0,
          finishedAt: null
        })
      }
      const logs = capture()
      const report = yield* Recovery.run({ owner: "host" }).pipe(
        Effect.scoped,
        Effect.provideServiceEffect(Journal.Journal, Journal.make(backend)),
        Effect.provide(logs.layer)
      )
      assert.strictEqual(report.failed.length, 2)
      const texts = logs.lines.map((line) => `${line.text} ${JSON.stringify(line.annotations)}`)
      assert.isTrue(texts.some((text) => text.includes("a\\u000alevel=INFO msg=forged")), texts.join("\n"))
      for (const line of logs.lines) {
        assert.notMatch(line.text, /[\u0000-\u001f]/, line.text)
        for (const value of Object.values(line.annotations)) assert.notMatch(String(value), /[\u0000-\u001f]/)
      }
    }))

  it("OwnerInUse says when a claim was taken and until when it holds, also for instants Date cannot show", () => {
    const error = (claimedAt: number, expiresAt: number) =>
      new JournalError.OwnerInUse({ owner: "host", pid: 7, claimedAt, expiresAt }).message
    assert.include(error(0, 30_000), "claimed at 1970-01-01T00:00:00.000Z, held until 1970-01-01T00:00:30.000Z")
    // A row written by another process (or a test) may hold any number: the message must not throw.
    assert.include(
      error(0, Number.MAX_SAFE_INTEGER),
      `held until ${Number.MAX_SAFE_INTEGER} ms since the epoch (not a date)`
    )
    assert.include(error(Number.NaN, Number.POSITIVE_INFINITY), "claimed at NaN ms since the epoch (not a date)")
  })
})
