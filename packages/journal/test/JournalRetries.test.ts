import { assert, describe, it } from "@effect/vitest"
import { Journal, JournalBackend, JournalError } from "@lifeline/journal"
import { Effect, Exit, Fiber, Ref } from "effect"
import { TestClock } from "effect/testing"

const op = { kind: "tool", key: "k-1", payload: {}, owner: "host" }

/** A journal whose storage can be taken down for its updates (the steps that record an end), counting the tries. */
const flaky = Effect.gen(function*() {
  const memory = yield* JournalBackend.makeMemory
  const down = yield* Ref.make(false)
  const tries = yield* Ref.make(0)
  const backend: JournalBackend.Backend = {
    ...memory,
    update: (key, where, patch) =>
      Effect.flatMap(Ref.get(down), (isDown) =>
        isDown
          ? Effect.andThen(
            Ref.update(tries, (n) => n + 1),
            Effect.fail(new JournalError.JournalError({ reason: "Storage", detail: "connection refused" }))
          )
          : memory.update(key, where, patch))
  }
  const journal = yield* Journal.make(backend)
  return { journal, down, tries }
})

describe("Journal.withRecordRetries", () => {
  it.effect("an end record is retried every 500 ms while the storage is down, and lands once it is back", () =>
    Effect.gen(function*() {
      const { down, journal, tries } = yield* flaky
      yield* journal.begin(op)
      yield* Ref.set(down, true)
      const completing = yield* Effect.forkChild(
        Journal.withRecordRetries(journal, "30 seconds").complete("k-1", { ok: true })
      )
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* Ref.get(tries), 3) // at once, at 500 ms, at 1 s
      yield* Ref.set(down, false)
      yield* TestClock.adjust("500 millis")
      const entry = yield* Fiber.join(completing)
      assert.strictEqual(entry.status, "Completed")
    }))

  it.effect("past its window the Storage error is the caller's; other errors are not retried", () =>
    Effect.gen(function*() {
      const { down, journal, tries } = yield* flaky
      yield* journal.begin(op)
      yield* Ref.set(down, true)
      const failing = yield* Effect.forkChild(
        Effect.exit(Journal.withRecordRetries(journal, "2 seconds").fail("k-1", "boom"))
      )
      yield* TestClock.adjust("3 seconds")
      const exit = yield* Fiber.join(failing)
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(yield* Ref.get(tries), 6) // at once, then every 500 ms while at most 2 s have passed
      yield* Ref.set(down, false)
      const missing = yield* Effect.flip(Journal.withRecordRetries(journal, "2 seconds").complete("nope", {}))
      assert.strictEqual(missing.reason, "NotFound")
    }))
})
