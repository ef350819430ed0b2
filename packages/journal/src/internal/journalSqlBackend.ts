/** @internal */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import { SqlError } from "effect/sql/SqlError"
import type * as Statement from "effect/sql/Statement"
import type * as Journal from "../Journal.js"
import type * as JournalBackend from "../JournalBackend.js"
import type * as JournalClaim from "../JournalClaim.js"
import { JournalError } from "../JournalError.js"
import { make as makeJournal } from "./journal.js"
import { affectedRows, migrate, ownersTable, storage, table, toClaim, toRow } from "./journalSql.js"

const columnOf: { readonly [K in keyof JournalBackend.Patch]-?: string } = {
  kind: "kind",
  owner: "owner",
  status: "status",
  attempts: "attempts",
  payload: "payload",
  result: "result",
  error: "error",
  reason: "reason",
  startedAt: "started_at",
  updatedAt: "updated_at",
  finishedAt: "finished_at"
}

const matches = (row: JournalBackend.Row, where: JournalBackend.Where) =>
  where.statuses.includes(row.status) && (where.attempts === undefined || row.attempts === where.attempts)

/** @internal */
export const makeBackend = (sql: SqlClient.SqlClient): JournalBackend.Backend => {
  const journal = sql(table)
  const owners = sql(ownersTable)
  // SQLite (3.35+) and PostgreSQL say which rows a write changed (RETURNING) and skip a duplicate key without an error
  // (ON CONFLICT DO NOTHING): each step is then one statement whose answer decides, whatever the driver reports.
  // Elsewhere (MySQL) a write is followed by the driver's count of affected rows and, for an update, a read.
  const returning = sql.onDialectOrElse({ sqlite: () => true, pg: () => true, orElse: () => false })
  // A parameter in a SELECT list has no column to take its type from: PostgreSQL needs the cast, MySQL spells it.
  const integer = sql.literal(sql.onDialectOrElse({ mysql: () => "SIGNED", orElse: () => "BIGINT" }))
  const asInteger = (value: number | null) => sql`CAST(${value} AS ${integer})`

  const selectOne = (key: string) =>
    Effect.flatMap(
      sql`SELECT * FROM ${journal} WHERE op_key = ${key}`,
      (rows) => rows.length === 0 ? Effect.succeedNone : Effect.asSome(toRow(rows[0]))
    )

  const selectClaim = (owner: string) =>
    Effect.flatMap(
      sql`SELECT * FROM ${owners} WHERE owner = ${owner}`,
      (rows) => rows.length === 0 ? Effect.succeedNone : Effect.asSome(toClaim(rows[0]))
    )

  const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    sql.withTransaction(effect).pipe(
      Effect.mapError((error) => error instanceof SqlError ? storage("the journal could not be written")(error) : error)
    ) as Effect.Effect<A, Exclude<E, SqlError> | JournalError, R>

  const write = <A>(effect: Effect.Effect<A, SqlError | JournalError>) =>
    Effect.catchTag(effect, "SqlError", (error) => Effect.fail(storage("the journal could not be written")(error)))

  const read = <A>(effect: Effect.Effect<A, SqlError | JournalError>) =>
    Effect.catchTag(effect, "SqlError", (error) => Effect.fail(storage("the journal could not be read")(error)))

  // Inserts unless the key exists; whether this statement wrote the row. The write comes first, so that SQLite takes
  // the write lock at once and waits for another process's lock (busy timeout) instead of failing.
  const insertIfAbsent = (
    tableName: string,
    keyColumn: string,
    record: Readonly<Record<string, string | number | null>>
  ): Effect.Effect<boolean, SqlError | JournalError> => {
    const into = sql(tableName)
    if (returning) {
      return Effect.map(
        sql`INSERT INTO ${into} ${sql.insert(record)} ON CONFLICT (${sql(keyColumn)}) DO NOTHING RETURNING ${
          sql(keyColumn)
        }`,
        (rows) => rows.length === 1
      )
    }
    const columns = Object.keys(record)
    const names = sql.csv(columns.map((column) => sql`${sql(column)}`))
    const values = sql.csv(columns.map((column) => {
      const value = record[column]
      return typeof value === "number" ? asInteger(value) : sql`${value}`
    }))
    return Effect.flatMap(
      sql`INSERT INTO ${into} (${names}) SELECT ${values}
  WHERE NOT EXISTS (SELECT 1 FROM ${into} WHERE ${sql(keyColumn)} = ${record[keyColumn]})`.raw,
      (raw) => Effect.map(affectedRows(raw), (count) => count === 1)
    )
  }

  // The stored row when the insert found one; inserted again when it was deleted between the two statements.
  const insert = (row: JournalBackend.Row, tries: number): Effect.Effect<
    { readonly row: JournalBackend.Row; readonly inserted: boolean },
    SqlError | JournalError
  > =>
    Effect.gen(function*() {
      const inserted = yield* insertIfAbsent(table, "op_key", {
        op_key: row.key,
        kind: row.kind,
        owner: row.owner,
        status: row.status,
        attempts: row.attempts,
        payload: row.payload,
        result: row.result,
        error: row.error,
        reason: row.reason,
        started_at: row.startedAt,
        updated_at: row.updatedAt,
        finished_at: row.finishedAt
      })
      if (inserted) return { row, inserted: true }
      const stored = yield* selectOne(row.key)
      if (Option.isSome(stored)) return { row: stored.value, inserted: false }
      if (tries < 3) return yield* insert(row, tries + 1)
      return yield* new JournalError({ reason: "Storage", key: row.key, detail: "the row was not stored" })
    })

  const insertClaim = (claim: JournalClaim.Claim, tries: number): Effect.Effect<
    { readonly claim: JournalClaim.Claim; readonly inserted: boolean },
    SqlError | JournalError
  > =>
    Effect.gen(function*() {
      const inserted = yield* insertIfAbsent(ownersTable, "owner", {
        owner: claim.owner,
        holder: claim.holder,
        pid: claim.pid ?? null,
        host: claim.host ?? null,
        started_at: claim.startedAt ?? null,
        claimed_at: claim.claimedAt,
        expires_at: claim.expiresAt
      })
      if (inserted) return { claim, inserted: true }
      const stored = yield* selectClaim(claim.owner)
      if (Option.isSome(stored)) return { claim: stored.value, inserted: false }
      // Released between the two statements: try again.
      if (tries < 3) return yield* insertClaim(claim, tries + 1)
      return yield* new JournalError({ reason: "Storage", detail: `the claim on ${claim.owner} was not stored` })
    })

  // A conditional UPDATE or DELETE: how many rows it changed, from RETURNING where the dialect has it.
  const changedRows = (statement: Statement.Statement<unknown>, keyColumn: string) =>
    returning
      ? Effect.map(sql`${statement} RETURNING ${sql(keyColumn)}`, (rows) => rows.length)
      : Effect.flatMap(statement.raw, affectedRows)

  return {
    insert: (row) => write(insert(row, 0)),
    update: (key, where, patch) =>
      write(Effect.gen(function*() {
        const fields = (Object.keys(patch) as Array<keyof JournalBackend.Patch>).filter((field) =>
          Object.hasOwn(columnOf, field) && patch[field] !== undefined
        )
        if (fields.length === 0) return Option.filter(yield* selectOne(key), (row) => matches(row, where))
        const conditions = [sql`op_key = ${key}`, sql.in("status", where.statuses)]
        if (where.attempts !== undefined) conditions.push(sql`attempts = ${where.attempts}`)
        const update = sql`UPDATE ${journal} SET ${
          sql.csv(fields.map((field) => sql`${sql(columnOf[field])} = ${patch[field] ?? null}`))
        } WHERE ${sql.and(conditions)}`
        if (returning) {
          const rows = yield* sql`${update} RETURNING *`
          return rows.length === 0 ? Option.none() : Option.some(yield* toRow(rows[0]))
        }
        // The row as read right after the write; another process may have changed it since, never this one.
        return (yield* affectedRows(yield* update.raw)) === 0 ? Option.none() : yield* selectOne(key)
      })),
    get: (key) => read(selectOne(key)),
    list: (statuses, owner) =>
      read(Effect.gen(function*() {
        const conditions = [sql.in("status", statuses)]
        if (owner !== undefined) conditions.push(sql`owner = ${owner}`)
        const rows = yield* sql`SELECT * FROM ${journal} WHERE ${sql.and(conditions)} ORDER BY started_at, op_key`
        return yield* Effect.forEach(rows, toRow)
      })),
    remove: (statuses, finishedBefore) =>
      write(changedRows(
        sql`DELETE FROM ${journal} WHERE ${
          sql.and([sql.in("status", statuses), sql`finished_at IS NOT NULL`, sql`finished_at < ${finishedBefore}`])
        }`,
        "op_key"
      )),
    batch: transaction,
    insertClaim: (claim) => write(insertClaim(claim, 0)),
    replaceClaim: (claim, where) =>
      write(Effect.map(
        changedRows(
          sql`UPDATE ${owners} SET ${
            sql.csv([
              sql`holder = ${claim.holder}`,
              sql`pid = ${claim.pid ?? null}`,
              sql`host = ${claim.host ?? null}`,
              sql`started_at = ${claim.startedAt ?? null}`,
              sql`claimed_at = ${claim.claimedAt}`,
              sql`expires_at = ${claim.expiresAt}`
            ])
          } WHERE ${
            sql.and([
              sql`owner = ${claim.owner}`,
              sql`holder = ${where.holder}`,
              ...(where.expiresAt === undefined ? [] : [sql`expires_at = ${where.expiresAt}`])
            ])
          }`,
          "owner"
        ),
        (count) => count === 1
      )),
    getClaim: (owner) => read(selectClaim(owner)),
    deleteClaim: (owner, holder) =>
      write(Effect.map(
        changedRows(sql`DELETE FROM ${owners} WHERE owner = ${owner} AND holder = ${holder}`, "owner"),
        (count) => count === 1
      ))
  }
}

/** @internal */
export const make = (
  options?: Journal.MakeOptions
): Effect.Effect<Journal.Journal.Service, JournalError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* migrate
    return yield* makeJournal(makeBackend(sql), options)
  })
