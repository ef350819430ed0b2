import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, it } from "@effect/vitest"
import { FleetMigrations } from "@lifeline/fleet"
import { Deferred, Effect, Exit, Fiber, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { describePostgres, usePostgres } from "../../../test/support/postgres.js"
import { prefixHash } from "../src/internal/migrations.js"

const pg = usePostgres()
const client = (url: string) => PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })

const tables = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ readonly name: string }>`SELECT table_name AS name FROM information_schema.tables
    WHERE table_schema = 'public' AND table_name LIKE 'cluster%' ORDER BY table_name`
  return rows.map((row) => row.name)
})

describePostgres(pg, "FleetMigrations", () => {
  it.live(
    "three runners migrating an empty database at once all succeed, and the tables are created once",
    () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => pg.freshDatabase())
        const exits = yield* Effect.all(
          [1, 2, 3].map(() => Effect.exit(Effect.provide(FleetMigrations.run(), client(url)))),
          { concurrency: "unbounded" }
        )
        for (const exit of exits) assert.isTrue(Exit.isSuccess(exit), String(exit))
        const names = yield* Effect.provide(tables, client(url))
        assert.deepStrictEqual(names, [
          "cluster_locks",
          "cluster_messages",
          "cluster_migrations",
          "cluster_replies",
          "cluster_runner_migrations",
          "cluster_runners"
        ])
        // A later start finds nothing to apply.
        yield* Effect.provide(FleetMigrations.run(), client(url))
      }),
    60_000
  )

  it.live("waits while another runner holds the migration lock, then goes on", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(() => pg.freshDatabase())
      const locked = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      // Another runner in the middle of its migrations: the lock held in an open transaction.
      const holder = yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT pg_advisory_xact_lock(${FleetMigrations.lockKey}, ${prefixHash("cluster")})`
          yield* Deferred.succeed(locked, undefined)
          yield* Deferred.await(release)
        }))
      }).pipe(Effect.provide(client(url)), Effect.forkChild)
      yield* Deferred.await(locked)
      const migrating = yield* Effect.forkChild(Effect.provide(FleetMigrations.run(), client(url)))
      yield* Effect.sleep("1 second")
      assert.isUndefined(migrating.pollUnsafe(), "migrated while the lock was held")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.join(migrating)
      assert.strictEqual((yield* Effect.provide(tables, client(url))).length, 6)
    }), 60_000)
})
