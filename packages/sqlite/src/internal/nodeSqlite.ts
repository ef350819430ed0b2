/**
 * A `SqlClient` over Node's built-in SQLite (`node:sqlite`, `DatabaseSync`): one connection shared through a
 * semaphore, a cache of prepared statements, transactions with savepoints, and the file closed with the Scope. No
 * native addon to build.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Reactivity from "effect/reactivity/Reactivity"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlConnection from "effect/sql/SqlConnection"
import * as SqlError from "effect/sql/SqlError"
import * as Statement from "effect/sql/Statement"
import * as Stream from "effect/Stream"
import { DatabaseSync } from "node:sqlite"
import type { StatementSync } from "node:sqlite"

/** @internal */
export interface Options {
  readonly filename: string
}

// Prepared statements kept, least recently used out first: the journal runs a few dozen distinct statements.
const prepareCacheSize = 200

// How long a statement waits for another connection's lock (ms) before it fails with SQLITE_BUSY.
const busyTimeout = 5000

/** A prepared statement and what it was last set to, so that each run sets only what changed. */
interface Prepared {
  readonly statement: StatementSync
  /** Whether it returns rows (a SELECT, a PRAGMA that reports, a write with RETURNING): run with `all`. */
  readonly reader: boolean
  bigints: boolean
}

// node:sqlite errors carry SQLite's extended result code in `errcode` (and `code: "ERR_SQLITE_ERROR"`), where
// `SqlError.classifySqliteError` reads `code` or `errno`: the same classification, on `errcode`, keeping the
// original error as the cause.
const reasonOf = (cause: unknown, message: string, operation: string): SqlError.SqlErrorReason => {
  if (!Predicate.hasProperty(cause, "errcode") || typeof cause.errcode !== "number") {
    return SqlError.classifySqliteError(cause, { message, operation })
  }
  const props = { cause, message, operation }
  // SQLITE_CONSTRAINT_UNIQUE
  if (cause.errcode === 2067) {
    const text = Predicate.hasProperty(cause, "message") && typeof cause.message === "string" ? cause.message : ""
    const at = text.indexOf("UNIQUE constraint failed:")
    const constraint = at === -1 ? "" : text.slice(at + "UNIQUE constraint failed:".length).trim()
    return new SqlError.UniqueViolation({ ...props, constraint: constraint === "" ? "unknown" : constraint })
  }
  switch (cause.errcode & 0xff) {
    case 3:
      return new SqlError.AuthorizationError(props)
    case 5:
    case 6:
      return new SqlError.LockTimeoutError(props)
    case 14:
      return new SqlError.ConnectionError(props)
    case 19:
      return new SqlError.ConstraintError(props)
    case 23:
      return new SqlError.AuthenticationError(props)
    default:
      return new SqlError.UnknownError(props)
  }
}

const sqlError = (cause: unknown, message: string, operation: string) =>
  new SqlError.SqlError({ reason: reasonOf(cause, message, operation) })

// node:sqlite returns rows with a null prototype; better-sqlite3, and most code that reads rows, use plain objects.
const plainRows = (rows: Array<Record<string, unknown>>): Array<Record<string, unknown>> => {
  for (let i = 0; i < rows.length; i++) rows[i] = { ...rows[i] }
  return rows
}

type Mode = "rows" | "raw" | "values"

const openDatabase = (options: Options): Effect.Effect<DatabaseSync, SqlError.SqlError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        // `timeout` is the busy timeout from the first statement on, so that switching to WAL waits for another
        // connection's lock too. Foreign keys are enforced and double-quoted strings refused, as node:sqlite does by
        // default (and as better-sqlite3's build did).
        const db = new DatabaseSync(options.filename, { timeout: busyTimeout })
        try {
          // Readers never block the writer, and a commit appends to the WAL; `synchronous` (set by the journal)
          // decides whether each commit is synced.
          db.exec("PRAGMA journal_mode = WAL")
        } catch (error) {
          db.close()
          throw error
        }
        return db
      },
      catch: (cause) => sqlError(cause, `Failed to open ${options.filename}`, "open")
    }),
    (db) => Effect.sync(() => db.close())
  )

/**
 * Opens the database and builds a `SqlClient` on it; the file is closed with the Scope. Integers come back as numbers
 * unless `SqlClient.SafeIntegers` is set, as bigints then.
 *
 * @internal
 */
export const make = (options: Options): Effect.Effect<SqlClient.SqlClient, SqlError.SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const db = yield* openDatabase(options)
    // Insertion order is recency: a hit moves its statement to the end, the first one is evicted.
    const cache = new Map<string, Prepared>()

    const prepare = (sql: string): Prepared => {
      const statement = db.prepare(sql)
      return { statement, reader: statement.columns().length > 0, bigints: false }
    }

    const cached = (sql: string): Prepared => {
      let prepared = cache.get(sql)
      if (prepared !== undefined) {
        cache.delete(sql)
      } else {
        prepared = prepare(sql)
        if (cache.size >= prepareCacheSize) cache.delete(cache.keys().next().value!)
      }
      cache.set(sql, prepared)
      return prepared
    }

    const run = (sql: string, params: ReadonlyArray<unknown>, mode: Mode, reuse: boolean) =>
      Effect.withFiber<any, SqlError.SqlError>((fiber) => {
        let prepared: Prepared
        try {
          prepared = reuse ? cached(sql) : prepare(sql)
        } catch (cause) {
          return Effect.fail(sqlError(cause, "Failed to prepare statement", "prepare"))
        }
        const { reader, statement } = prepared
        try {
          const bigints = fiber.getRef(SqlClient.SafeIntegers)
          if (prepared.bigints !== bigints) {
            statement.setReadBigInts(bigints)
            prepared.bigints = bigints
          }
          const args = params as Array<any>
          if (!reader) {
            const result = statement.run(...args)
            return Effect.succeed(
              mode === "raw" ? { changes: result.changes, lastInsertRowid: result.lastInsertRowid } : []
            )
          }
          if (mode !== "values") return Effect.succeed(plainRows(statement.all(...args)))
          statement.setReturnArrays(true)
          try {
            return Effect.succeed(statement.all(...args))
          } finally {
            statement.setReturnArrays(false)
          }
        } catch (cause) {
          return Effect.fail(sqlError(cause, "Failed to execute statement", "execute"))
        }
      })

    const connection: SqlConnection.Connection = {
      execute: (sql, params, transformRows) =>
        transformRows === undefined
          ? run(sql, params, "rows", true)
          : Effect.map(run(sql, params, "rows", true), transformRows),
      executeRaw: (sql, params) => run(sql, params, "raw", true),
      executeValues: (sql, params) => run(sql, params, "values", true),
      executeValuesUnprepared: (sql, params) => run(sql, params, "values", false),
      executeUnprepared: (sql, params, transformRows) =>
        transformRows === undefined
          ? run(sql, params, "rows", false)
          : Effect.map(run(sql, params, "rows", false), transformRows),
      // DatabaseSync reads synchronously: the rows are read at once and then streamed.
      executeStream: (sql, params, transformRows) =>
        Stream.unwrap(Effect.map(
          run(sql, params, "rows", true),
          (rows: ReadonlyArray<object>) => Stream.fromIterable(transformRows === undefined ? rows : transformRows(rows))
        ))
    }

    const acquirers = SqlClient.makeSqliteAcquirers({
      connection: Effect.succeed(connection),
      semaphore: yield* Semaphore.make(1),
      isTransaction: () => db.isTransaction
    })

    return yield* SqlClient.make({
      ...acquirers,
      compiler: Statement.makeCompilerSqlite(),
      driver: "node:sqlite",
      spanAttributes: [["db.system.name", "sqlite"]],
      // SQLite prepares BEGIN, COMMIT, ROLLBACK and savepoints like any statement: they join the cache.
      prepareTransactionControls: true,
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`
    }).pipe(Effect.provideServiceEffect(Reactivity.Reactivity, Reactivity.make))
  })
