import { PgClient } from "@effect/sql-pg"
import { assert, it } from "@effect/vitest"
import { Journal, JournaledOperation, JournalSql, Recovery } from "@lifeline/journal"
import { PgJournal } from "@lifeline/postgres"
import { ConfigProvider, Deferred, Effect, Fiber, Layer, Logger, Option, Redacted, Schema } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import * as Url from "node:url"
import { describePostgres, usePostgres } from "../../../test/support/postgres.js"

const pg = usePostgres()

const root = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "../../..")
const fixture = Path.join(Path.dirname(Url.fileURLToPath(import.meta.url)), "fixtures", "start-journal.ts")

const fresh = Effect.map(Effect.promise(() => pg.freshDatabase()), Redacted.make)

const client = (url: Redacted.Redacted) => PgClient.make({ url }).pipe(Effect.provide(Reactivity.layer))

const journalOn = (url: Redacted.Redacted) =>
  Effect.flatMap(client(url), (sql) => PgJournal.make().pipe(Effect.provideService(SqlClient.SqlClient, sql)))

const migrationsApplied = (url: Redacted.Redacted) =>
  Effect.flatMap(
    client(url),
    (sql) =>
      sql<{ readonly migration_id: number }>`SELECT migration_id FROM ${sql(JournalSql.tables.migrations)}
      ORDER BY migration_id`.pipe(Effect.map((rows) => rows.map((row) => row.migration_id)))
  )

const op = (key: string) => ({ kind: "llm", key, payload: { key }, owner: "host" })

describePostgres(pg, "PgJournal", () => {
  it.effect(
    "three journals started at once on an empty database migrate it once, and all of them work",
    () =>
      Effect.gen(function*() {
        for (let round = 0; round < 3; round++) {
          const url = yield* fresh
          const journals = yield* Effect.all([journalOn(url), journalOn(url), journalOn(url)], {
            concurrency: "unbounded"
          })
          assert.deepStrictEqual(yield* migrationsApplied(url), [1, 2])
          for (const [index, journal] of journals.entries()) {
            assert.isTrue((yield* journal.begin(op(`round-${round}/${index}`))).started)
          }
          assert.strictEqual((yield* journals[0].unfinished("host")).length, 3)
        }
      }).pipe(Effect.scoped),
    60_000
  )

  it.effect(
    "three processes started at once on an empty database migrate it once, and all of them work",
    () =>
      Effect.gen(function*() {
        const url = yield* fresh
        const run = (name: string) =>
          Effect.callback<{ readonly code: number | null; readonly output: string }>((resume) => {
            const child = ChildProcess.spawn(
              process.execPath,
              ["--import", "tsx", fixture, Redacted.value(url), name],
              { cwd: root, stdio: ["ignore", "pipe", "pipe"] }
            )
            let output = ""
            child.stdout.on("data", (chunk) => (output += chunk))
            child.stderr.on("data", (chunk) => (output += chunk))
            child.on("exit", (code) => resume(Effect.succeed({ code, output })))
            return Effect.sync(() => child.kill("SIGKILL"))
          })
        const results = yield* Effect.all(["one", "two", "three"].map(run), { concurrency: "unbounded" })
        for (const [index, name] of ["one", "two", "three"].entries()) {
          assert.strictEqual(results[index].code, 0, results[index].output)
          assert.include(results[index].output, `started ${name}`)
        }
        assert.deepStrictEqual(yield* migrationsApplied(url), [1, 2])
        const journal = yield* journalOn(url)
        assert.deepStrictEqual((yield* journal.unfinished()).map((entry) => entry.key).sort(), [
          "start/one",
          "start/three",
          "start/two"
        ])
      }).pipe(Effect.scoped),
    120_000
  )

  it.effect("BIGINT columns come back as numbers: times past 2^31 ms, decoded with a Schema, never cast", () =>
    Effect.gen(function*() {
      const url = yield* fresh
      yield* TestClock.setTime(1_764_000_000_123)
      const journal = yield* journalOn(url)
      yield* journal.begin(op("a"))
      const done = yield* journal.complete("a", { ok: true })
      assert.strictEqual(typeof done.startedAt, "number")
      assert.deepStrictEqual([done.startedAt, done.finishedAt], [1_764_000_000_123, 1_764_000_000_123])
      const read = Option.getOrThrow(yield* (yield* journalOn(url)).get("a"))
      assert.deepStrictEqual(read, done)
      const claim = yield* journal.claim("host", { ttl: "30 seconds" })
      const stored = Option.getOrThrow(yield* journal.holder("host"))
      assert.deepStrictEqual([stored.claimedAt, stored.expiresAt, stored.pid], [
        claim.claimedAt,
        claim.expiresAt,
        process.pid
      ])
    }).pipe(Effect.scoped))

  it.effect("a stored integer beyond 2^53 is reported as Corrupt, not rounded", () =>
    Effect.gen(function*() {
      const url = yield* fresh
      const journal = yield* journalOn(url)
      yield* journal.begin(op("a"))
      const sql = yield* client(url)
      yield* sql`UPDATE ${sql(JournalSql.tables.journal)} SET started_at = 9007199254740993 WHERE op_key = 'a'`
      const error = yield* Effect.flip(journal.get("a"))
      assert.deepStrictEqual([error._tag, error.reason], ["JournalError", "Corrupt"])
    }).pipe(Effect.scoped))

  it.effect("a server that does not sync commits is named in a warning: the journal would not be durable", () =>
    Effect.gen(function*() {
      const url = yield* fresh
      const sql = yield* client(url)
      const database = new URL(Redacted.value(url)).pathname.slice(1)
      yield* sql.unsafe(`ALTER DATABASE "${database}" SET synchronous_commit = off`)
      const logs: Array<string> = []
      const capture = Logger.layer([
        Logger.make(({ logLevel, message }) => logs.push(`${logLevel}: ${[message].flat().map(String).join(" ")}`))
      ])
      yield* journalOn(url).pipe(Effect.provide(capture))
      assert.isTrue(
        logs.some((line) => line.startsWith("Warn") && line.includes("synchronous_commit is off")),
        logs.join("\n")
      )
      logs.length = 0
      yield* journalOn(yield* fresh).pipe(Effect.provide(capture))
      assert.isFalse(logs.some((line) => line.includes("synchronous_commit")))
    }).pipe(Effect.scoped))

  it.effect("a host that crashed mid-operation is recovered by the next one through the public API", () =>
    Effect.gen(function*() {
      const url = yield* fresh
      const layer = PgJournal.layerConfig.pipe(
        Layer.provide(
          ConfigProvider.layer(ConfigProvider.fromEnv({ env: { LIFELINE_POSTGRES_URL: Redacted.value(url) } }))
        )
      )
      // The first host begins a request and is cut off before it ends: as after a crash, the entry stays InFlight.
      const begun = yield* Deferred.make<void>()
      const host = yield* Deferred.succeed(begun, undefined).pipe(
        Effect.andThen(Effect.never),
        JournaledOperation.run("llm", "turn-1", { text: "hi" }, { result: Schema.String }),
        Effect.provide(layer),
        Effect.forkChild
      )
      yield* Deferred.await(begun)
      yield* Fiber.interrupt(host)
      // The next host recovers it: resumed once, completed, answered from the journal afterwards.
      const report = yield* Effect.gen(function*() {
        const report = yield* Recovery.run({
          decisions: {
            llm: (entry) => Recovery.resume(() => Effect.succeed(`continued ${JSON.stringify(entry.payload)}`))
          }
        })
        const again = yield* Effect.succeed("never run").pipe(
          JournaledOperation.run("llm", "turn-1", { text: "hi" }, { result: Schema.String })
        )
        const unfinished = yield* Effect.flatMap(Journal.Journal, (journal) => journal.unfinished())
        return { report, again, unfinished }
      }).pipe(Effect.scoped, Effect.provide(layer))
      assert.deepStrictEqual(report.report.resumed.map((entry) => [entry.key, entry.attempts]), [["turn-1", 2]])
      assert.strictEqual(report.again, `continued {"text":"hi"}`)
      assert.deepStrictEqual(report.unfinished, [])
    }).pipe(Effect.scoped))

  it.effect(
    "a connection that fails says why: no such database, no such role, refused; never the password",
    () =>
      Effect.gen(function*() {
        const server = new URL(pg.url())
        const failure = (url: URL) =>
          Effect.flip(Layer.build(PgJournal.layer({ url: Redacted.make(url.toString()) }))).pipe(
            Effect.map((error) => error.message)
          )
        const noDatabase = new URL(server)
        noDatabase.pathname = "/no_such_database"
        noDatabase.password = "s3cret-password"
        const noRole = new URL(server)
        noRole.username = "no_such_role"
        noRole.password = "s3cret-password"
        const refused = new URL(server)
        refused.port = "1"
        const messages = [yield* failure(noDatabase), yield* failure(noRole), yield* failure(refused)]
        assert.include(messages[0], `database "no_such_database" does not exist`)
        assert.include(messages[1], `role "no_such_role" does not exist`)
        assert.include(messages[2], "ECONNREFUSED")
        for (const message of messages) assert.notInclude(message, "s3cret")
      }).pipe(Effect.scoped),
    30_000
  )

  it.effect("options.identity names this process in its claims, e.g. a container's own host name", () =>
    Effect.gen(function*() {
      const url = yield* fresh
      const journal = yield* Effect.flatMap(
        client(url),
        (sql) => PgJournal.make({ identity: { host: "pod-7" } }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
      )
      const claim = yield* journal.claim("host")
      assert.deepStrictEqual([claim.host, claim.pid], ["pod-7", process.pid])
      assert.strictEqual(Option.getOrThrow(yield* journal.holder("host")).host, "pod-7")
    }).pipe(Effect.scoped))

  it.effect(
    "a payload the driver could not read back (over 16 MiB) is refused before it is written",
    () =>
      Effect.gen(function*() {
        const url = yield* fresh
        const journal = yield* journalOn(url)
        const error = yield* Effect.flip(
          journal.begin({ ...op("huge"), payload: { text: "x".repeat(17 * 1024 * 1024) } })
        )
        assert.strictEqual(error.reason, "Invalid")
        yield* journal.begin(op("small"))
        assert.deepStrictEqual((yield* journal.unfinished("host")).map((entry) => entry.key), ["small"])
      }).pipe(Effect.scoped),
    30_000
  )
})

it.effect("with neither variable set, the configuration error names LIFELINE_POSTGRES_URL and DATABASE_URL", () =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(PgJournal.config.parse(ConfigProvider.fromEnv({ env: {} })))
    assert.include(error.message, "LIFELINE_POSTGRES_URL")
    assert.include(error.message, "DATABASE_URL")
    const url = yield* PgJournal.config.parse(ConfigProvider.fromEnv({ env: { DATABASE_URL: "postgres://db/app" } }))
    assert.strictEqual(Redacted.value(url), "postgres://db/app")
  }))
