import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import { describePostgres, usePostgres } from "../../../test/support/postgres.js"

const pg = usePostgres()

const currentDatabase = (url: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly name: string }>`SELECT current_database() AS name`
    return rows[0].name
  }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url) })))

describePostgres(pg, "test/support/postgres.js", () => {
  it.effect("gives this file a fresh database of its own, and more on demand", () =>
    Effect.gen(function*() {
      const first = yield* currentDatabase(pg.url())
      assert.match(first, /^lifeline_test_[0-9a-f]{12}$/)
      const url = yield* Effect.promise(() => pg.freshDatabase())
      const second = yield* currentDatabase(url)
      assert.match(second, /^lifeline_test_[0-9a-f]{12}$/)
      assert.notStrictEqual(first, second)
    }))
})
