import { PgClient } from "@effect/sql-pg"
import { it } from "@effect/vitest"
import { JournalSql } from "@lifeline/journal"
import { JournalContract } from "@lifeline/journal/testing"
import { PgJournal } from "@lifeline/postgres"
import { Effect, Redacted } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { describePostgres, usePostgres } from "../../../test/support/postgres.js"

const pg = usePostgres()

// A fresh database per case; each journal opens a pool of its own on it, as another process would.
const pgStore: JournalContract.MakeStore = Effect.gen(function*() {
  const url = Redacted.make(yield* Effect.promise(() => pg.freshDatabase()))
  const client = PgClient.make({ url }).pipe(Effect.provide(Reactivity.layer))
  const open = Effect.flatMap(
    client,
    (sql) => PgJournal.make().pipe(Effect.provideService(SqlClient.SqlClient, sql))
  )
  yield* open
  return { open, backend: JournalSql.makeBackend(yield* client) }
})

describePostgres(pg, "JournalContract: PgJournal", () => {
  for (const { name, run } of JournalContract.cases(pgStore)) {
    it.effect(name, () => Effect.scoped(run))
  }
})
