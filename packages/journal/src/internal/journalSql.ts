/** @internal */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaGetter from "effect/SchemaGetter"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type * as JournalBackend from "../JournalBackend.js"
import type * as JournalClaim from "../JournalClaim.js"
import { Status } from "../JournalEntry.js"
import { JournalError } from "../JournalError.js"

/** @internal */
export const table = "lifeline_journal"

/** @internal */
export const migrationsTable = "lifeline_journal_migrations"

/** @internal */
export const ownersTable = "lifeline_journal_owners"

// Portable SQL: types and statements that SQLite, PostgreSQL and MySQL all accept, written with the client's template
// so that placeholders and quoted identifiers follow its dialect. `op_key`, not `key`, which MySQL reserves;
// VARCHAR(255) so that MySQL can index it; times are epoch milliseconds in BIGINT columns.
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

// An integer column as drivers return it: a number (node:sqlite), a bigint (@effect/sql-pg reads BIGINT as int8), or a
// decimal string (node-postgres, mysql2). Decoded to a number only when it is a safe integer: never cast.
const StoredInteger = Schema.Union([Schema.Number, Schema.BigInt, Schema.String]).pipe(
  Schema.decodeTo(
    Schema.Int.check(Schema.isBetween({ minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER })),
    {
      decode: SchemaGetter.transform((value: number | bigint | string) =>
        typeof value === "string" ? (/^-?\d+$/.test(value) ? Number(value) : Number.NaN) : Number(value)
      ),
      encode: SchemaGetter.transform((value: number) => value)
    }
  )
)

const StoredRow = Schema.Struct({
  op_key: Schema.String,
  kind: Schema.String,
  owner: Schema.String,
  status: Status,
  attempts: StoredInteger,
  payload: Schema.String,
  result: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String),
  started_at: StoredInteger,
  updated_at: StoredInteger,
  finished_at: Schema.NullOr(StoredInteger)
})

const StoredClaim = Schema.Struct({
  owner: Schema.String,
  holder: Schema.String,
  pid: Schema.NullOr(StoredInteger),
  host: Schema.NullOr(Schema.String),
  started_at: Schema.NullOr(StoredInteger),
  claimed_at: StoredInteger,
  expires_at: StoredInteger
})

const decodeRow = Schema.decodeUnknownResult(StoredRow)
const decodeClaim = Schema.decodeUnknownResult(StoredClaim)

/** @internal */
export const toClaim = (stored: unknown): Effect.Effect<JournalClaim.Claim, JournalError> => {
  const decoded = decodeClaim(stored)
  if (Result.isFailure(decoded)) {
    return Effect.fail(
      new JournalError({
        reason: "Corrupt",
        detail: "a stored owner claim does not have the expected columns and types",
        cause: decoded.failure
      })
    )
  }
  const row = decoded.success
  const claim: { -readonly [K in keyof JournalClaim.Claim]: JournalClaim.Claim[K] } = {
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

/** @internal */
export const toRow = (stored: unknown): Effect.Effect<JournalBackend.Row, JournalError> => {
  const decoded = decodeRow(stored)
  if (Result.isFailure(decoded)) {
    const key = (stored as { op_key?: unknown } | null)?.op_key
    return Effect.fail(
      new JournalError({
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

// A password written in a connection URL (`scheme://user:password@host`): never shown.
const urlPassword = /(\b[a-z][a-z0-9+.-]*:\/\/[^:/?#@\s]*:)[^@/\s]*@/gi

/**
 * What went wrong, as far down as the error says: a SQL error's message is often generic ("PgConnection: Failed to
 * connect"), and the real reason (the server's "database "x" does not exist", a refused connection) is in its
 * `reason` and `cause` chain. The distinct messages along it, joined, with any URL password removed; `shown` bounds
 * and escapes the result where it is printed.
 * @internal
 */
export const describeCause = (error: unknown): string => {
  const messages: Array<string> = []
  let current: unknown = error
  for (let depth = 0; depth < 8 && typeof current === "object" && current !== null; depth++) {
    const { cause, code, message, reason } = current as {
      cause?: unknown
      code?: unknown
      message?: unknown
      reason?: unknown
    }
    if (typeof message === "string" && message !== "" && !messages.some((seen) => seen.includes(message))) {
      messages.push(typeof code === "string" && /^[0-9A-Z]{5}$|^E[A-Z]+$/.test(code) ? `${message} (${code})` : message)
    }
    current = typeof reason === "object" && reason !== null && !(reason instanceof String) ? reason : cause
  }
  return (messages.length === 0 ? String(error) : messages.join(": ")).replace(urlPassword, "$1***@")
}

/** @internal */
export const storage = (detail: string) => (cause: SqlError | Migrator.MigrationError) =>
  new JournalError({ reason: "Storage", detail: `${detail}: ${describeCause(cause)}`, cause })

/**
 * How many rows a write changed, as the driver reports it: `rowCount` (@effect/sql-pg, node-postgres), `changes`
 * (node:sqlite, better-sqlite3), `affectedRows` (mysql2). A driver that reports none of them is an error, never 0:
 * reading a missing count as 0 made `claim` loop forever on Postgres.
 * @internal
 */
export const affectedRows = (raw: unknown): Effect.Effect<number, JournalError> => {
  const result = (typeof raw === "object" && raw !== null ? raw : {}) as {
    readonly rowCount?: unknown
    readonly changes?: unknown
    readonly affectedRows?: unknown
  }
  for (const count of [result.rowCount, result.changes, result.affectedRows]) {
    if (typeof count === "number" && Number.isInteger(count)) return Effect.succeed(count)
    if (typeof count === "bigint") return Effect.succeed(Number(count))
  }
  return Effect.fail(
    new JournalError({ reason: "Storage", detail: "the SQL driver did not report how many rows a write changed" })
  )
}

// Serializes the migrations of several processes starting at once on an empty database: a PostgreSQL advisory lock
// held by the transaction that runs the migrator (released when it commits), so that a second process waits, then
// finds them applied. SQLite serializes writers itself; other dialects run the migrator as it is.
const lockKey = "lifeline_journal_migrations"

/** @internal */
export const migrate: Effect.Effect<void, JournalError, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const run = Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: migrationsTable })
  yield* sql.onDialectOrElse({
    pg: () => sql.withTransaction(Effect.andThen(sql`SELECT pg_advisory_xact_lock(hashtext(${lockKey}))`, run)),
    orElse: () => run
  }).pipe(
    Effect.mapError((error) =>
      error instanceof JournalError ? error : storage("the journal's migrations failed")(error)
    )
  )
})
