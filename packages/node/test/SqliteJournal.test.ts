import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Journal, Recovery } from "@lifeline/kernel"
import { SqliteJournal } from "@lifeline/node"
import { ConfigProvider, Context, Effect, Exit, Layer, Option, Scope, TestClock } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-sqlite-journal-"))
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))

let files = 0
const freshFile = () => Path.join(root, `case-${++files}`, "journal.db")

const op = (key: string, extra?: Partial<Journal.Operation>): Journal.Operation => ({
  kind: "llm",
  key,
  payload: { turn: key, text: "héllo ✓", nested: [1, { deep: null }] },
  owner: "host",
  ...extra
})

/** Opens the file in a scope of its own, which the test closes: a process that stops and starts again. */
const open = (filename: string, synchronous?: SqliteJournal.Synchronous) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const journal = yield* SqliteJournal.makeFile({ filename, synchronous }).pipe(Scope.extend(scope))
    return { journal, close: Scope.close(scope, Exit.void) }
  })

/** The journal with the raw SqlClient beside it, to look at pragmas and tables; both live as long as the Scope. */
const withClient = (filename: string, synchronous?: SqliteJournal.Synchronous) =>
  Effect.gen(function*() {
    Fs.mkdirSync(Path.dirname(filename), { recursive: true })
    const context = yield* Layer.build(SqliteClient.layer({ filename }))
    const sql = Context.get(context, SqlClient.SqlClient)
    const journal = yield* SqliteJournal.make({ synchronous }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    return { journal, sql }
  })

describe("SqliteJournal", () => {
  it.scoped("opens in WAL mode, syncing every commit (FULL) unless told NORMAL", () =>
    Effect.gen(function*() {
      const full = yield* withClient(freshFile())
      assert.deepStrictEqual(yield* full.sql.unsafe("PRAGMA journal_mode"), [{ journal_mode: "wal" }])
      assert.deepStrictEqual(yield* full.sql.unsafe("PRAGMA synchronous"), [{ synchronous: 2 }])
      assert.deepStrictEqual(yield* full.sql.unsafe("PRAGMA busy_timeout"), [{ timeout: 5000 }])
      const normal = yield* withClient(freshFile(), "NORMAL")
      assert.deepStrictEqual(yield* normal.sql.unsafe("PRAGMA synchronous"), [{ synchronous: 1 }])
    }))

  it.effect("entries survive closing and reopening the file, with their JSON intact", () =>
    Effect.gen(function*() {
      const filename = freshFile()
      const first = yield* open(filename)
      yield* first.journal.begin(op("a"))
      yield* first.journal.begin(op("b"))
      yield* first.journal.complete("b", { text: "done" })
      yield* first.journal.begin(op("c"))
      yield* first.journal.fail(
        "c",
        new Recovery.InterruptedByCrash({
          key: "c",
          kind: "llm",
          attempts: 1,
          startedAt: 0,
          detail: "test"
        })
      )
      const before = yield* Effect.all(["a", "b", "c"].map((key) => first.journal.get(key)))
      yield* first.close

      const second = yield* open(filename)
      const after = yield* Effect.all(["a", "b", "c"].map((key) => second.journal.get(key)))
      assert.deepStrictEqual(after, before)
      const a = Option.getOrThrow(after[0])
      assert.deepStrictEqual(a.payload, op("a").payload)
      assert.strictEqual(a.status, "InFlight")
      assert.deepStrictEqual(Option.getOrThrow(after[1]).result, { text: "done" })
      assert.strictEqual(Option.getOrThrow(Recovery.interruptedByCrash(Option.getOrThrow(after[2]))).detail, "test")
      assert.deepStrictEqual((yield* second.journal.unfinished()).map((entry) => entry.key), ["a"])
      // nothing runs in the reopened journal: `a` is a leftover for Recovery
      assert.deepStrictEqual(yield* second.journal.running, [])
      yield* second.close
    }))

  it.effect("the migrations run once, however often the file is opened", () =>
    Effect.gen(function*() {
      const filename = freshFile()
      yield* Effect.scoped(withClient(filename))
      const rows = yield* Effect.scoped(
        Effect.flatMap(withClient(filename), ({ sql }) =>
          sql.unsafe(`SELECT migration_id, name FROM ${SqliteJournal.tables.migrations}`))
      )
      assert.deepStrictEqual(rows, [{ migration_id: 1, name: "create_journal" }])
    }))

  it.effect("concurrent begins of one key start it once, in one journal and across two connections", () =>
    Effect.gen(function*() {
      const filename = freshFile()
      const one = yield* open(filename)
      const two = yield* open(filename)
      const results = yield* Effect.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? one : two).journal.begin(op("same"))),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(results.filter((result) => result.started).length, 1)
      const entries = results.map((result) => result.entry)
      assert.isTrue(entries.every((entry) => entry.startedAt === entries[0].startedAt && entry.attempts === 1))
      assert.strictEqual((yield* one.journal.unfinished()).length, 1)
      yield* one.close
      yield* two.close
    }))

  it.effect("unfinished lists InFlight and NeedsRecovery entries, by owner, oldest first", () =>
    Effect.gen(function*() {
      const { close, journal } = yield* open(freshFile())
      yield* TestClock.adjust("10 millis")
      yield* journal.begin(op("z", { owner: "one" }))
      yield* TestClock.adjust("10 millis")
      yield* journal.begin(op("a", { owner: "two" }))
      yield* TestClock.adjust("10 millis")
      yield* journal.begin(op("m", { owner: "one" }))
      yield* journal.begin(op("done", { owner: "one" }))
      yield* journal.complete("done")
      yield* journal.markNeedsRecovery(["m"], "drain timeout")
      assert.deepStrictEqual((yield* journal.unfinished("one")).map((entry) => [entry.key, entry.status]), [
        ["z", "InFlight"],
        ["m", "NeedsRecovery"]
      ])
      assert.deepStrictEqual((yield* journal.unfinished()).map((entry) => entry.key), ["z", "a", "m"])
      yield* close
    }))

  it.effect("every step keeps its rules on SQLite: retry, resume guards, conflicts, prune", () =>
    Effect.gen(function*() {
      const { close, journal } = yield* open(freshFile())
      yield* journal.begin(op("a"))
      yield* journal.fail("a", "boom")
      const retry = yield* journal.begin(op("a"))
      assert.deepStrictEqual([retry.started, retry.entry.attempts, retry.entry.status], [true, 2, "InFlight"])
      assert.strictEqual((yield* Effect.flip(journal.resume("a"))).reason, "Conflict")
      yield* journal.release("a")
      assert.strictEqual((yield* Effect.flip(journal.resume("a", { attempts: 1 }))).reason, "Conflict")
      assert.strictEqual((yield* journal.resume("a", { attempts: 2 })).attempts, 3)
      yield* journal.complete("a", [1, 2, 3])
      assert.strictEqual((yield* Effect.flip(journal.fail("a", "late"))).reason, "Conflict")
      assert.strictEqual((yield* Effect.flip(journal.complete("missing"))).reason, "NotFound")
      assert.strictEqual(yield* journal.prune(Number.MAX_SAFE_INTEGER), 1)
      assert.isTrue(Option.isNone(yield* journal.get("a")))
      yield* close
    }))

  it.effect("a batch commits its writes together, and none of them when it fails", () =>
    Effect.gen(function*() {
      const filename = freshFile()
      const { close, journal } = yield* open(filename)
      yield* journal.batch(Effect.forEach(["b1", "b2", "b3"], (key) => journal.begin(op(key))))
      const failed = yield* Effect.exit(
        journal.batch(Effect.zipRight(journal.begin(op("lost")), Effect.fail("abort" as const)))
      )
      assert.isTrue(Exit.isFailure(failed))
      assert.deepStrictEqual((yield* journal.unfinished()).map((entry) => entry.key), ["b1", "b2", "b3"])
      yield* close
    }))

  it.effect("a row that cannot be read is a Corrupt error, not a defect", () =>
    Effect.gen(function*() {
      const filename = freshFile()
      yield* Effect.scoped(Effect.gen(function*() {
        const { journal, sql } = yield* withClient(filename)
        yield* journal.begin(op("bad"))
        yield* sql.unsafe(`UPDATE ${SqliteJournal.tables.journal} SET payload = '{not json' WHERE op_key = 'bad'`)
        const error = yield* Effect.flip(journal.get("bad"))
        assert.deepStrictEqual([error._tag, error.reason, error.key], ["JournalError", "Corrupt", "bad"])
      }))
    }))

  it.effect("a file that cannot be opened is a Storage error", () =>
    Effect.gen(function*() {
      const directory = Path.dirname(freshFile())
      Fs.mkdirSync(directory, { recursive: true })
      const error = yield* Effect.flip(Effect.scoped(SqliteJournal.makeFile({ filename: directory })))
      assert.deepStrictEqual([error._tag, error.reason], ["JournalError", "Storage"])
    }))

  describe("layerConfig", () => {
    const provider = (entries: ReadonlyArray<readonly [string, string]>) =>
      Layer.setConfigProvider(ConfigProvider.fromMap(new Map(entries)))

    it.effect("puts the journal at <data dir>/lifeline/journal.db, creating the directory", () =>
      Effect.gen(function*() {
        const directory = Path.join(root, "hermes-data")
        yield* Effect.flatMap(Journal.Journal, (journal) => journal.begin(op("x"))).pipe(
          Effect.provide(SqliteJournal.layerConfig.pipe(Layer.provide(provider([["HERMES_DATA_DIR", directory]]))))
        )
        assert.isTrue(Fs.existsSync(Path.join(directory, "lifeline", "journal.db")))
      }))

    it.effect("LIFELINE_DATA_DIR comes first, XDG_DATA_HOME and HOME last; the sync mode is read too", () =>
      Effect.gen(function*() {
        const read = (entries: ReadonlyArray<readonly [string, string]>) =>
          SqliteJournal.config.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(entries))))
        assert.deepStrictEqual(
          yield* read([["LIFELINE_DATA_DIR", "/l"], ["HERMES_DATA_DIR", "/h"], [
            "LIFELINE_JOURNAL_SYNCHRONOUS",
            "NORMAL"
          ]]),
          { filename: "/l/lifeline/journal.db", synchronous: "NORMAL" }
        )
        assert.deepStrictEqual(yield* read([["XDG_DATA_HOME", "/x"], ["HOME", "/home/u"]]), {
          filename: "/x/lifeline/journal.db",
          synchronous: "FULL"
        })
        assert.deepStrictEqual(
          (yield* read([["HOME", "/home/u"]])).filename,
          "/home/u/.local/share/lifeline/journal.db"
        )
        const invalid = yield* Effect.flip(read([["HOME", "/h"], ["LIFELINE_JOURNAL_SYNCHRONOUS", "OFF"]]))
        assert.strictEqual(invalid._op, "InvalidData")
      }))
  })

  it.effect("Recovery over a reopened file resumes the leftover once and records it", () =>
    Effect.gen(function*() {
      const filename = freshFile()
      const crashed = yield* open(filename)
      yield* crashed.journal.begin(op("turn-1"))
      yield* crashed.close
      const restarted = yield* open(filename)
      let runs = 0
      const report = yield* Recovery.run({
        owner: "host",
        decisions: { llm: () => Recovery.resume(() => Effect.sync(() => ({ runs: ++runs }))) }
      }).pipe(Effect.provideService(Journal.Journal, restarted.journal))
      assert.strictEqual(runs, 1)
      assert.deepStrictEqual(report.resumed.map((entry) => [entry.key, entry.attempts, entry.result]), [
        ["turn-1", 2, { runs: 1 }]
      ])
      yield* restarted.close
    }))
})
