/** @internal */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as TestClock from "effect/testing/TestClock"
import type * as Journal from "../Journal.js"
import type * as JournalEntry from "../JournalEntry.js"
import type * as JournalContract from "../testing/JournalContract.js"
import { check, ContractViolation, refused, same } from "./journalContractChecks.js"
import { claimCases } from "./journalContractClaims.js"
import { limitCases } from "./journalContractLimits.js"

type Service = Journal.Journal.Service

const op = (
  key: string,
  owner = "host",
  payload: unknown = { key, text: "héllo ✓", n: 1 }
): JournalEntry.Operation => ({
  kind: "llm",
  key,
  payload,
  owner
})

const get = (journal: Service, key: string) =>
  Effect.flatMap(journal.get(key), (entry) =>
    Option.isSome(entry)
      ? Effect.succeed(entry.value)
      : Effect.die(new ContractViolation(`entry ${key} is missing`)))

const keysOf = (entries: ReadonlyArray<JournalEntry.Entry>) => entries.map((entry) => entry.key)

/** @internal */
export const cases = (makeStore: JournalContract.MakeStore): ReadonlyArray<JournalContract.Case> => {
  const withStore = (f: (store: JournalContract.Store) => Effect.Effect<void, unknown, Scope.Scope>) =>
    Effect.flatMap(makeStore, f)
  const withJournal = (
    f: (journal: Service, store: JournalContract.Store) => Effect.Effect<void, unknown, Scope.Scope>
  ) => withStore((store) => Effect.flatMap(store.open, (journal) => f(journal, store)))
  const test = (name: string, run: Effect.Effect<void, unknown, Scope.Scope>): JournalContract.Case => ({ name, run })

  return [
    test(
      "begin records an InFlight entry with its payload as JSON and its start time from the Clock",
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* TestClock.adjust("1234 millis")
          const { entry, started } = yield* journal.begin(op("a"))
          yield* check(started, "begin of a new key starts it")
          yield* same(
            { ...entry },
            {
              key: "a",
              kind: "llm",
              owner: "host",
              status: "InFlight",
              attempts: 1,
              payload: op("a").payload,
              startedAt: 1234,
              updatedAt: 1234
            },
            "the begun entry"
          )
          yield* same(yield* get(journal, "a"), entry, "the stored entry")
          yield* same(yield* journal.running, ["a"], "running")
        })
      )
    ),
    test(
      "begin is idempotent: an unfinished or completed key returns the stored entry and does not start",
      withJournal((journal) =>
        Effect.gen(function*() {
          const first = yield* journal.begin(op("a"))
          const again = yield* journal.begin(op("a", "host", { other: true }))
          yield* check(!again.started, "a second begin does not start")
          yield* same(again.entry, first.entry, "a second begin returns the stored entry")
          yield* journal.complete("a", { answer: 42 })
          const afterCompletion = yield* journal.begin(op("a"))
          yield* check(!afterCompletion.started, "a completed key is never run again")
          yield* same(afterCompletion.entry.status, "Completed", "status")
        })
      )
    ),
    test(
      "complete records the result once; completing a failed entry is a Conflict",
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("a"))
          yield* TestClock.adjust("5 millis")
          const done = yield* journal.complete("a", { answer: [1, "two", null] })
          yield* same([done.status, done.result, done.finishedAt, done.updatedAt], [
            "Completed",
            { answer: [1, "two", null] },
            5,
            5
          ], "completed")
          yield* same(yield* journal.complete("a", "other"), done, "completing again returns the entry unchanged")
          yield* same(yield* journal.running, [], "running after complete")
          yield* journal.begin(op("b"))
          yield* journal.fail("b", new Error("boom"))
          yield* refused(journal.complete("b"), "Conflict", "completing a failed entry")
          yield* refused(journal.fail("a", "late"), "Conflict", "failing a completed entry")
          yield* refused(journal.complete("missing"), "NotFound", "completing an unknown key")
        })
      )
    ),
    test(
      "fail records the error as JSON and its message as the reason; a Failed key is retried as a new attempt",
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("a"))
          const failed = yield* journal.fail("a", new Error("boom"))
          yield* same([failed.status, failed.error, failed.reason], [
            "Failed",
            { name: "Error", message: "boom" },
            "boom"
          ], "failed")
          yield* same(yield* journal.fail("a", "again"), failed, "failing again returns the entry unchanged")
          const retry = yield* journal.begin(op("a"))
          yield* check(retry.started, "beginning a Failed key starts a retry")
          yield* same([retry.entry.status, retry.entry.attempts], ["InFlight", 2], "the retry")
        })
      )
    ),
    test(
      "bad input is Invalid: an empty or too long key, a payload that is not JSON",
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* refused(journal.begin(op("")), "Invalid", "an empty key")
          yield* refused(journal.begin(op("k".repeat(256))), "Invalid", "a 256-character key")
          yield* journal.begin(op("k".repeat(255)))
          yield* refused(journal.begin(op("bigint", "host", { n: BigInt(1) })), "Invalid", "a payload that is not JSON")
          yield* same(Option.isNone(yield* journal.get("bigint")), true, "nothing stored for an invalid payload")
        })
      )
    ),
    test(
      "unfinished lists InFlight and NeedsRecovery entries of one owner or all, oldest first",
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* TestClock.adjust("10 millis")
          yield* journal.begin(op("c"))
          yield* journal.begin(op("b"))
          yield* TestClock.adjust("10 millis")
          yield* journal.begin(op("a"))
          yield* journal.begin(op("x", "other-host"))
          yield* journal.begin(op("done"))
          yield* journal.complete("done")
          yield* journal.begin(op("failed"))
          yield* journal.fail("failed", "no")
          const marked = yield* journal.markNeedsRecovery(["b", "done", "missing"], "cut off")
          yield* same(marked.map((entry) => [entry.key, entry.status, entry.reason]), [[
            "b",
            "NeedsRecovery",
            "cut off"
          ]], "markNeedsRecovery changes only InFlight entries")
          yield* same(
            keysOf(yield* journal.unfinished("host")),
            ["b", "c", "a"],
            "unfinished of the owner, by start then key"
          )
          yield* same(keysOf(yield* journal.unfinished()), ["b", "c", "a", "x"], "unfinished of all owners")
        })
      )
    ),
    test(
      "a journal reopened on the same store sees every entry, runs nothing, and resumes a leftover once",
      withStore((store) =>
        Effect.gen(function*() {
          const crashed = yield* store.open
          yield* crashed.begin(op("a", "host", { deep: { list: [1, 2, { s: "x" }] } }))
          yield* crashed.begin(op("b"))
          yield* crashed.complete("b", { ok: true })
          const next = yield* store.open
          yield* same(yield* next.running, [], "a reopened journal runs nothing")
          yield* same(
            (yield* get(next, "a")).payload,
            { deep: { list: [1, 2, { s: "x" }] } },
            "payload after reopening"
          )
          yield* same((yield* get(next, "b")).result, { ok: true }, "result after reopening")
          const resumed = yield* next.resume("a", { attempts: 1 })
          yield* same([resumed.status, resumed.attempts], ["InFlight", 2], "resumed")
          yield* refused(next.resume("a", { attempts: 1 }), "Conflict", "resuming an entry a fiber here runs")
          yield* refused(crashed.resume("a", { attempts: 1 }), "Conflict", "resuming with a stale guard")
          yield* next.complete("a", "finally")
          yield* refused(next.resume("a"), "Conflict", "resuming an ended entry")
        })
      )
    ),
    test(
      "fail with a guard is a recovery decision: refused while this process runs the entry or when it moved on",
      withStore((store) =>
        Effect.gen(function*() {
          const journal = yield* store.open
          yield* journal.begin(op("a"))
          yield* refused(
            journal.fail("a", "decided", { attempts: 1 }),
            "Conflict",
            "a guarded fail of an entry a fiber here runs"
          )
          yield* journal.release("a")
          yield* same(yield* journal.running, [], "release forgets the key")
          yield* same((yield* get(journal, "a")).status, "InFlight", "release leaves the entry InFlight")
          yield* refused(
            journal.fail("a", "decided", { attempts: 2 }),
            "Conflict",
            "a guarded fail with the wrong attempts"
          )
          const failed = yield* journal.fail("a", "decided", { attempts: 1 })
          yield* same(failed.status, "Failed", "a guarded fail that holds")
        })
      )
    ),
    test(
      "prune deletes ended entries that ended before the given time, and nothing unfinished",
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.begin(op("old"))
          yield* journal.complete("old")
          yield* journal.begin(op("oldFailed"))
          yield* journal.fail("oldFailed", "x")
          yield* journal.begin(op("running"))
          yield* TestClock.adjust("100 millis")
          yield* journal.begin(op("new"))
          yield* journal.complete("new")
          yield* same(yield* journal.prune(50), 2, "pruned")
          yield* same(Option.isNone(yield* journal.get("old")), true, "old is gone")
          yield* same((yield* get(journal, "running")).status, "InFlight", "unfinished entries stay")
          yield* same((yield* get(journal, "new")).status, "Completed", "recent entries stay")
        })
      )
    ),
    test(
      "batch runs its writes together",
      withJournal((journal) =>
        Effect.gen(function*() {
          yield* journal.batch(Effect.forEach(["a", "b", "c"], (key) => journal.begin(op(key)), { discard: true }))
          yield* same(keysOf(yield* journal.unfinished("host")), ["a", "b", "c"], "entries written in a batch")
        })
      )
    ),
    test(
      "two journals begin the same key at once: exactly one starts it",
      withStore((store) =>
        Effect.gen(function*() {
          const [one, two] = yield* Effect.all([store.open, store.open])
          for (let round = 0; round < 10; round++) {
            const results = yield* Effect.all([one.begin(op(`k${round}`)), two.begin(op(`k${round}`))], {
              concurrency: 2
            })
            yield* same(
              results.filter((result) => result.started).length,
              1,
              `round ${round}: journals that started the key`
            )
          }
        })
      )
    ),
    test(
      "two recoveries resume the same leftover at once: exactly one takes it",
      withStore((store) =>
        Effect.gen(function*() {
          const crashed = yield* store.open
          for (let round = 0; round < 10; round++) yield* crashed.begin(op(`k${round}`))
          const [one, two] = yield* Effect.all([store.open, store.open])
          for (let round = 0; round < 10; round++) {
            const results = yield* Effect.all(
              [one, two].map((journal) => Effect.exit(journal.resume(`k${round}`, { attempts: 1 }))),
              { concurrency: 2 }
            )
            yield* same(results.filter(Exit.isSuccess).length, 1, `round ${round}: recoveries that resumed the entry`)
            yield* same((yield* get(one, `k${round}`)).attempts, 2, `round ${round}: attempts`)
          }
        })
      )
    ),
    ...claimCases(withStore, withJournal, test),
    ...limitCases(withJournal, test)
  ]
}
