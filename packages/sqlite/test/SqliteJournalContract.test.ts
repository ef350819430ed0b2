import { afterAll, describe, it } from "@effect/vitest"
import { JournalSql } from "@lifeline/journal"
import { JournalContract } from "@lifeline/journal/testing"
import { SqliteJournal } from "@lifeline/sqlite"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-sqlite-contract-"))
afterAll(() => Fs.rmSync(root, { recursive: true, force: true }))

let files = 0

// A fresh file per case; each journal opens a connection of its own on it, as another process would.
const sqliteStore: JournalContract.MakeStore = Effect.gen(function*() {
  const filename = Path.join(root, `case-${++files}`, "journal.db")
  const open = Effect.flatMap(
    SqliteJournal.makeClient(filename),
    (client) => SqliteJournal.make().pipe(Effect.provideService(SqlClient.SqlClient, client))
  )
  yield* open
  return { open, backend: JournalSql.makeBackend(yield* SqliteJournal.makeClient(filename)) }
})

describe("JournalContract: SqliteJournal", () => {
  for (const { name, run } of JournalContract.cases(sqliteStore)) {
    it.effect(name, () => Effect.scoped(run))
  }
})
