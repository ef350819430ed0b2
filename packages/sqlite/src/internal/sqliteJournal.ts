/** @internal */
import * as Journal from "@lifeline/kernel/Journal"
import * as NodeJournal from "@lifeline/node/NodeJournal"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import { SqlError } from "effect/sql/SqlError"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as NodeSqlite from "./nodeSqlite.js"

/** @internal */
export const table = "lifeline_journal"

/** @internal */
export const migrationsTable = "lifeline_journal_migrations"

/** @internal */
export const ownersTable = "lifeline_journal_owners"

// Portable SQL: types and statements that SQLite, PostgreSQL and MySQL all accept, written with the client's template
// so that placeholders and quoted identifiers follow its dialect: a shared server can take over later. `op_key`, not
// `key`, which MySQL reserves; VARCHAR(255) so that MySQL can index it; times are epoch milliseconds.
/** @internal */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "1_create_journal": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE ${sql(table)} (
  op_key VARCHAR(255) NOT NULL PRIMARY KEY,
  kind VARCHAR(255) NOT NULL,
  owner VARCHAR(255) NOT NULL,
  status VARCHAR(16) NOT NULL CHECK (status IN ('InFlight', 'NeedsRecovery', 'Completed', 'Failed')),
  attempts INTEGER NOT NULL,
  payload TEXT NOT NULL,
  result TEXT,
  error TEXT,
  reason TEXT,
  started_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  finished_at BIGINT
)`
    yield* sql`CREATE INDEX ${sql(`${table}_by_status`)} ON ${sql(table)} (status, owner, started_at)`
  }),
  // One row per claimed owner: which journal holds it (`holder`, a random token), its process, and until when.
  "2_create_owners": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE ${sql(ownersTable)} (
  owner VARCHAR(255) NOT NULL PRIMARY KEY,
  holder VARCHAR(64) NOT NULL,
  pid INTEGER,
  host VARCHAR(255),
  started_at BIGINT,
  claimed_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL
)`
  })
}

const columnOf: { readonly [K in keyof Journal.Patch]-?: string } = {
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

const StoredRow = Schema.Struct({
  op_key: Schema.String,
  kind: Schema.String,
  owner: Schema.String,
  status: Journal.Status,
  attempts: Schema.Number,
  payload: Schema.String,
  result: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String),
  started_at: Schema.Number,
  updated_at: Schema.Number,
  finished_at: Schema.NullOr(Schema.Number)
})

const decodeRow = Schema.decodeUnknownResult(StoredRow)

const StoredClaim = Schema.Struct({
  owner: Schema.String,
  holder: Schema.String,
  pid: Schema.NullOr(Schema.Number),
  host: Schema.NullOr(Schema.String),
  started_at: Schema.NullOr(Schema.Number),
  claimed_at: Schema.Number,
  expires_at: Schema.Number
})

const decodeClaim = Schema.decodeUnknownResult(StoredClaim)

const toClaim = (stored: unknown): Effect.Effect<Journal.Claim, Journal.JournalError> => {
  const decoded = decodeClaim(stored)
  if (Result.isFailure(decoded)) {
    return Effect.fail(
      new Journal.JournalError({
        reason: "Corrupt",
        detail: "a stored owner claim does not have the expected columns and types",
        cause: decoded.failure
      })
    )
  }
  const row = decoded.success
  const claim: { -readonly [K in keyof Journal.Claim]: Journal.Claim[K] } = {
    owner: row.owner,
    holder: row.holder,
    claimedAt: row.claimed_at,
    expiresAt: row.expires_at
  }
  if (row.pid !== null) claim.pid = row.pid
  if (row.host !== null) claim.host = row.host
  if (row.started_at !== null) claim.startedAt = row.started_at
  return Effect.succeed(claim)
}

const toRow = (stored: unknown): Effect.Effect<Journal.Row, Journal.JournalError> => {
  const decoded = decodeRow(stored)
  if (Result.isFailure(decoded)) {
    const key = (stored as { op_key?: unknown } | null)?.op_key
    return Effect.fail(
      new Journal.JournalError({
        reason: "Corrupt",
        ...(typeof key === "string" ? { key } : {}),
        detail: "a stored row does not have the journal's columns and types",
        cause: decoded.failure
      })
    )
  }
  const row = decoded.success
  return Effect.succeed({
    key: row.op_key,
    kind: row.kind,
    owner: row.owner,
    status: row.status,
    attempts: row.attempts,
    payload: row.payload,
    result: row.result,
    error: row.error,
    reason: row.reason,
    startedAt: row.started_at,
    updatedAt: row.updated_at,
    finishedAt: row.finished_at
  })
}

const storage = (detail: string) => (cause: SqlError | Migrator.MigrationError) =>
  new Journal.JournalError({ reason: "Storage", detail: `${detail}: ${cause.message}`, cause })

// The number of rows a write changed. node:sqlite reports `changes`; a server driver would report its own field.
const changed = (raw: unknown): number => {
  const result = raw as { readonly changes?: unknown; readonly affectedRows?: unknown; readonly count?: unknown }
  const count = result.changes ?? result.affectedRows ?? result.count
  return typeof count === "number" ? count : Number(count ?? 0)
}

/** @internal */
export type Synchronous = "FULL" | "NORMAL"

/** @internal */
export const makeBackend = (sql: SqlClient.SqlClient): Journal.Backend => {
  const journal = sql(table)
  // A parameter in a SELECT list has no column to take its type from: PostgreSQL needs the cast, MySQL spells it.
  const integer = sql.literal(sql.onDialectOrElse({ mysql: () => "SIGNED", orElse: () => "BIGINT" }))
  const asInteger = (value: number | null) => sql`CAST(${value} AS ${integer})`
  // SQLite (3.35+) and PostgreSQL return the updated row with the write, saving a statement; MySQL cannot.
  const returning = sql.onDialectOrElse({ sqlite: () => true, pg: () => true, orElse: () => false })

  const selectOne = (key: string) =>
    Effect.flatMap(
      sql`SELECT * FROM ${journal} WHERE op_key = ${key}`,
      (rows) => rows.length === 0 ? Effect.succeedNone : Effect.asSome(toRow(rows[0]))
    )

  const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    sql.withTransaction(effect).pipe(
      Effect.mapError((error) => error instanceof SqlError ? storage("the journal could not be written")(error) : error)
    ) as Effect.Effect<A, Exclude<E, SqlError> | Journal.JournalError, R>

  const write = <A>(effect: Effect.Effect<A, SqlError | Journal.JournalError>) =>
    Effect.catchTag(effect, "SqlError", (error) => Effect.fail(storage("the journal could not be written")(error)))

  const read = <A>(effect: Effect.Effect<A, SqlError | Journal.JournalError>) =>
    Effect.catchTag(effect, "SqlError", (error) => Effect.fail(storage("the journal could not be read")(error)))

  // Each step is one statement, committed on its own: a conditional write is atomic without a transaction, and
  // BEGIN/COMMIT would add two statements to every step. The insert also writes first, so SQLite takes the write
  // lock at once and waits for another process's lock (busy timeout) instead of failing, as a transaction that
  // began with a read would once another process had written.
  const insert = (row: Journal.Row, tries: number): Effect.Effect<
    { readonly row: Journal.Row; readonly inserted: boolean },
    SqlError | Journal.JournalError
  > =>
    Effect.gen(function*() {
      const raw = yield* sql`INSERT INTO ${journal}
  (op_key, kind, owner, status, attempts, payload, result, error, reason, started_at, updated_at, finished_at)
  SELECT ${row.key}, ${row.kind}, ${row.owner}, ${row.status}, ${asInteger(row.attempts)}, ${row.payload},
    ${row.result}, ${row.error}, ${row.reason}, ${asInteger(row.startedAt)}, ${asInteger(row.updatedAt)},
    ${asInteger(row.finishedAt)}
  WHERE NOT EXISTS (SELECT 1 FROM ${journal} WHERE op_key = ${row.key})`.raw
      if (changed(raw) === 1) return { row, inserted: true }
      const stored = yield* selectOne(row.key)
      if (Option.isSome(stored)) return { row: stored.value, inserted: false }
      // Pruned between the two statements: try again.
      if (tries < 3) return yield* insert(row, tries + 1)
      return yield* new Journal.JournalError({ reason: "Storage", key: row.key, detail: "the row was not stored" })
    })

  const owners = sql(ownersTable)

  const selectClaim = (owner: string) =>
    Effect.flatMap(
      sql`SELECT * FROM ${owners} WHERE owner = ${owner}`,
      (rows) => rows.length === 0 ? Effect.succeedNone : Effect.asSome(toClaim(rows[0]))
    )

  // Like `insert`: the write comes first, so that SQLite takes the write lock at once.
  const insertClaim = (claim: Journal.Claim, tries: number): Effect.Effect<
    { readonly claim: Journal.Claim; readonly inserted: boolean },
    SqlError | Journal.JournalError
  > =>
    Effect.gen(function*() {
      const raw = yield* sql`INSERT INTO ${owners} (owner, holder, pid, host, started_at, claimed_at, expires_at)
  SELECT ${claim.owner}, ${claim.holder}, ${asInteger(claim.pid ?? null)}, ${claim.host ?? null},
    ${asInteger(claim.startedAt ?? null)}, ${asInteger(claim.claimedAt)}, ${asInteger(claim.expiresAt)}
  WHERE NOT EXISTS (SELECT 1 FROM ${owners} WHERE owner = ${claim.owner})`.raw
      if (changed(raw) === 1) return { claim, inserted: true }
      const stored = yield* selectClaim(claim.owner)
      if (Option.isSome(stored)) return { claim: stored.value, inserted: false }
      // Released between the two statements: try again.
      if (tries < 3) return yield* insertClaim(claim, tries + 1)
      return yield* new Journal.JournalError({
        reason: "Storage",
        detail: `the claim on ${claim.owner} was not stored`
      })
    })

  const matches = (row: Journal.Row, where: Journal.Where) =>
    where.statuses.includes(row.status) && (where.attempts === undefined || row.attempts === where.attempts)

  return {
    insert: (row) => write(insert(row, 0)),
    update: (key, where, patch) =>
      write(Effect.gen(function*() {
        const fields = (Object.keys(patch) as Array<keyof Journal.Patch>).filter((field) =>
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
        return changed(yield* update.raw) === 0 ? Option.none() : yield* selectOne(key)
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
      write(Effect.map(
        sql`DELETE FROM ${journal} WHERE ${
          sql.and([sql.in("status", statuses), sql`finished_at IS NOT NULL`, sql`finished_at < ${finishedBefore}`])
        }`.raw,
        changed
      )),
    batch: transaction,
    insertClaim: (claim) => write(insertClaim(claim, 0)),
    replaceClaim: (claim, where) =>
      write(Effect.map(
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
        }`.raw,
        (raw) => changed(raw) === 1
      )),
    getClaim: (owner) => read(selectClaim(owner)),
    deleteClaim: (owner, holder) =>
      write(Effect.map(
        sql`DELETE FROM ${owners} WHERE owner = ${owner} AND holder = ${holder}`.raw,
        (raw) => changed(raw) === 1
      ))
  }
}

/** @internal */
export const make = (
  options?: { readonly synchronous?: Synchronous | undefined }
): Effect.Effect<Journal.Journal.Service, Journal.JournalError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // FULL syncs the WAL on every commit: an entry `begin` returned survives a power loss or an OS crash, not only
    // a crash or a kill of the process (which NORMAL already survives, since the WAL is in the OS's page cache).
    const synchronous = options?.synchronous ?? "FULL"
    yield* sql.onDialectOrElse({
      sqlite: () =>
        Effect.all([
          sql.unsafe(`PRAGMA synchronous = ${synchronous}`),
          // Another process on the same file (a tool, a second host) makes a write wait this long, not fail at once.
          sql.unsafe("PRAGMA busy_timeout = 5000")
        ], { discard: true }),
      orElse: () => Effect.void
    }).pipe(Effect.mapError(storage("the journal could not be configured")))
    yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: migrationsTable }).pipe(
      Effect.mapError(storage("the journal's migrations failed"))
    )
    // This process, so that a claimant on this host can tell whether a claim's holder still runs.
    return yield* Journal.make(makeBackend(sql), {
      identity: yield* NodeJournal.identity,
      liveness: NodeJournal.liveness
    })
  })

/** @internal */
export const makeClient = (
  filename: string
): Effect.Effect<SqlClient.SqlClient, Journal.JournalError, Scope.Scope> =>
  Effect.gen(function*() {
    if (filename !== ":memory:") {
      yield* Effect.tryPromise({
        try: () => Fs.mkdir(Path.dirname(Path.resolve(filename)), { recursive: true }),
        catch: (cause) =>
          new Journal.JournalError({
            reason: "Storage",
            detail: `cannot create the directory of ${filename}`,
            cause
          })
      })
    }
    return yield* NodeSqlite.make({ filename }).pipe(
      Effect.mapError((cause) =>
        new Journal.JournalError({ reason: "Storage", detail: `cannot open ${filename}`, cause })
      )
    )
  })

/** @internal */
export const SqlClientTag = SqlClient.SqlClient
