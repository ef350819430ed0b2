import { afterAll, assert, describe, it } from "@effect/vitest"
import type { JournalEntry } from "@lifeline/journal"
import { Journal, Recovery } from "@lifeline/journal"
import { SqliteJournal } from "@lifeline/sqlite"
import { ConfigProvider, Effect, Exit, Layer, Option, Scope } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-sqlite-journal-"))
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))

let files = 0
const freshFile = () => Path.join(root, `case-${++files}`, "journal.db")

const op = (key: string, extra?: Partial<JournalEntry.Operation>): JournalEntry.Operation => ({
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
    const journal = yield* SqliteJournal.makeFile({ filename, synchronous }).pipe(Scope.provide(scope))
    return { journal, close: Scope.close(scope, Exit.void) }
  })

/** The journal with the raw SqlClient beside it, to look at pragmas and tables; both live as long as the Scope. */
const withClient = (filename: string, synchronous?: SqliteJournal.Synchronous) =>
  Effect.gen(function*() {
    const sql = yield* SqliteJournal.makeClient(filename)
    const journal = yield* SqliteJournal.make({ synchronous }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    return { journal, sql }
  })

describe("SqliteJournal", () => {
  it.effect("opens in WAL mode, syncing every commit (FULL) unless told NORMAL", () =>
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
      assert.deepStrictEqual(rows, [{ migration_id: 1, name: "create_journal" }, {
        migration_id: 2,
        name: "create_owners"
      }])
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
        journal.batch(Effect.andThen(journal.begin(op("lost")), Effect.fail("abort" as const)))
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
    const [LIFELINE_DATA_DIR, HERMES_DATA_DIR] = SqliteJournal.DATA_DIR_VARIABLES
    const provider = (entries: ReadonlyArray<readonly [string, string]>) =>
      ConfigProvider.layer(ConfigProvider.fromEnv({ env: Object.fromEntries(entries) }))

    it.effect("puts the journal at <data dir>/lifeline/journal.db, creating the directory", () =>
      Effect.gen(function*() {
        const directory = Path.join(root, "hermes-data")
        yield* Effect.flatMap(Journal.Journal, (journal) => journal.begin(op("x"))).pipe(
          Effect.provide(SqliteJournal.layerConfig.pipe(Layer.provide(provider([[HERMES_DATA_DIR, directory]]))))
        )
        assert.isTrue(Fs.existsSync(Path.join(directory, "lifeline", "journal.db")))
      }))

    it.effect("LIFELINE_DATA_DIR comes first, XDG_DATA_HOME and HOME last; the sync mode is read too", () =>
      Effect.gen(function*() {
        const read = (entries: ReadonlyArray<readonly [string, string]>) =>
          SqliteJournal.config.parse(ConfigProvider.fromEnv({ env: Object.fromEntries(entries) }))
        assert.deepStrictEqual(
          yield* read([[LIFELINE_DATA_DIR, "/l"], [HERMES_DATA_DIR, "/h"], [
            SqliteJournal.SYNCHRONOUS_VARIABLE,
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
        const invalid = yield* Effect.flip(read([["HOME", "/h"], [SqliteJournal.SYNCHRONOUS_VARIABLE, "OFF"]]))
        assert.strictEqual(invalid.cause._tag, "SchemaError")
      }))
  })

  describe("owner claims", () => {
    it.effect("a journal file created by the previous schema gets the owners table; its entries stay", () =>
      Effect.gen(function*() {
        const filename = freshFile()
        // the file as the release before claims left it: migration 1 only, with an entry in flight
        yield* Effect.scoped(Effect.gen(function*() {
          const sql = yield* SqliteJournal.makeClient(filename)
          yield* Migrator.make({})({
            loader: Migrator.fromRecord({ "1_create_journal": SqliteJournal.migrations["1_create_journal"] }),
            table: SqliteJournal.tables.migrations
          }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
          yield* sql.unsafe(`INSERT INTO ${SqliteJournal.tables.journal}
  (op_key, kind, owner, status, attempts, payload, started_at, updated_at)
  VALUES ('old', 'llm', 'local', 'InFlight', 1, '{"turn":1}', 5, 5)`)
        }))
        const { journal, sql } = yield* withClient(filename)
        const migrations = yield* sql.unsafe(`SELECT migration_id FROM ${SqliteJournal.tables.migrations}`)
        assert.deepStrictEqual(migrations, [{ migration_id: 1 }, { migration_id: 2 }])
        const old = Option.getOrThrow(yield* journal.get("old"))
        assert.deepStrictEqual([old.status, old.payload], ["InFlight", { turn: 1 }])
        yield* journal.claim("local")
        const report = yield* Recovery.run().pipe(Effect.provideService(Journal.Journal, journal))
        assert.deepStrictEqual(report.failed.map((entry) => entry.key), ["old"])
      }).pipe(Effect.scoped))

    it.effect("the claim is in the file, naming this process, renewed on the Clock, and deleted on release", () =>
      Effect.gen(function*() {
        const filename = freshFile()
        const holder = yield* open(filename)
        const reader = yield* open(filename)
        const scope = yield* Scope.make()
        yield* TestClock.adjust("1 second")
        const claim = yield* holder.journal.claim("host", { ttl: "3 seconds" }).pipe(Scope.provide(scope))
        const stored = Option.getOrThrow(yield* reader.journal.holder("host"))
        assert.deepStrictEqual(stored, claim)
        assert.deepInclude(stored, { owner: "host", pid: process.pid, host: Os.hostname(), claimedAt: 1000 })
        assert.isNumber(stored.startedAt)
        // this process started within the last minutes, by its own account and by the one the claim recorded
        assert.isBelow(Math.abs(stored.startedAt! - (Date.now() - process.uptime() * 1000)), 5_000)
        yield* TestClock.adjust("1 second")
        assert.strictEqual(Option.getOrThrow(yield* reader.journal.holder("host")).expiresAt, 5_000)
        yield* Scope.close(scope, Exit.void)
        assert.isTrue(Option.isNone(yield* reader.journal.holder("host")))
        yield* holder.close
        yield* reader.close
      }))

    it.effect("two journals on one file in one process behave like two processes", () =>
      Effect.gen(function*() {
        const filename = freshFile()
        const { journal: first, sql } = yield* withClient(filename)
        const second = yield* open(filename)
        yield* first.claim("local", { ttl: "2 seconds" })
        yield* first.begin({ kind: "llm", key: "running", payload: null, owner: "local" })
        const refused = yield* Effect.flip(
          Recovery.run().pipe(Effect.provideService(Journal.Journal, second.journal))
        )
        assert.deepStrictEqual(
          refused._tag === "OwnerInUse" ? [refused.owner, refused.pid, refused.host] : [refused._tag],
          ["local", process.pid, Os.hostname()]
        )
        // past its expiry (as a stopped process that cannot renew), the holder is still alive on this host: refused
        yield* sql.unsafe(`UPDATE ${SqliteJournal.tables.owners} SET expires_at = 0`)
        assert.strictEqual((yield* Effect.flip(second.journal.claim("local")))._tag, "OwnerInUse")
        assert.strictEqual(Option.getOrThrow(yield* first.get("running")).status, "InFlight")
        yield* second.close
      }))

    it.effect("a claim whose process is gone (or whose pid was reused) is taken over at once, before it expires", () =>
      Effect.gen(function*() {
        const filename = freshFile()
        const { journal, sql } = yield* withClient(filename)
        const exited = ChildProcess.spawnSync(process.execPath, ["-e", "0"]).pid
        const forever = Date.now() + 3_600_000
        const insert = (owner: string, pid: number, startedAt: number) =>
          sql.unsafe(
            `INSERT INTO ${SqliteJournal.tables.owners} (owner, holder, pid, host, started_at, claimed_at, expires_at)
  VALUES (?, 'crashed', ?, ?, ?, 0, ?)`,
            [owner, pid, Os.hostname(), startedAt, forever]
          )
        yield* insert("gone", exited, Date.now())
        // this process's pid, recorded with a start an hour earlier: a pid the holder had and this process reuses
        yield* insert("reused", process.pid, Date.now() - 3_600_000)
        // a holder on another host cannot be checked: its claim's expiry decides
        yield* sql.unsafe(
          `INSERT INTO ${SqliteJournal.tables.owners} (owner, holder, pid, host, started_at, claimed_at, expires_at)
  VALUES ('remote', 'far', ?, 'another-host', 1, 0, ?)`,
          [exited, forever]
        )
        assert.strictEqual((yield* journal.claim("gone")).pid, process.pid)
        assert.strictEqual((yield* journal.claim("reused")).pid, process.pid)
        const remote = yield* Effect.flip(journal.claim("remote"))
        assert.deepStrictEqual(remote._tag === "OwnerInUse" ? remote.host : remote._tag, "another-host")
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
