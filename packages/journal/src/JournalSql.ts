/**
 * The journal on any Effect SQL client (`effect/sql`'s `SqlClient`): one schema and one storage backend for SQLite
 * (`@lifeline/sqlite`), PostgreSQL (`@lifeline/postgres`) and other servers. The SQL is portable; what differs by
 * dialect is handled here: PostgreSQL's migrations run under an advisory lock, so that several processes starting at
 * once on an empty database apply them once; each write's effect is read from `RETURNING` where the dialect has it,
 * else from the driver's count of changed rows (an error, not 0, when the driver reports none); integer columns are
 * decoded whether the driver returns numbers, `bigint`s or strings.
 *
 * Every step is one statement committed before its effect succeeds, so the journal is as durable as the server's
 * commit (SQLite `synchronous = FULL`, PostgreSQL `synchronous_commit = on`).
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"
import * as internal from "./internal/journalSql.js"
import * as backend from "./internal/journalSqlBackend.js"
import type * as Journal from "./Journal.js"
import type * as JournalBackend from "./JournalBackend.js"
import type { JournalError } from "./JournalError.js"

/**
 * The table that holds the entries, the one that holds the owners' claims, and the one that records which
 * migrations ran.
 *
 * @example
 * ```ts
 * import { JournalSql } from "@lifeline/journal"
 *
 * const tables = JournalSql.tables // { journal: "lifeline_journal", owners: "lifeline_journal_owners", ... }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const tables: { readonly journal: string; readonly owners: string; readonly migrations: string } = {
  journal: internal.table,
  owners: internal.ownersTable,
  migrations: internal.migrationsTable
}

/**
 * The schema migrations, for `Migrator.fromRecord` (with {@link tables}`.migrations` as the table). The SQL is
 * portable (SQLite, PostgreSQL, MySQL), so that a shared server can hold the journal of several hosts, each under its
 * own `JournalClaim.Owner`.
 *
 * @since 0.1.0
 * @category models
 */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = internal.migrations

/**
 * Applies the {@link migrations} that have not run yet. On PostgreSQL it holds a transaction-scoped advisory lock
 * while it does, so that processes starting at once on an empty database wait for the first one instead of failing.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { JournalSql } from "@lifeline/journal"
 *
 * // e.g. in a deployment step, before any host starts
 * const program = JournalSql.migrate.pipe(Effect.catchTag("JournalError", (error) => Effect.logError(error)))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const migrate: Effect.Effect<void, JournalError, SqlClient.SqlClient> = internal.migrate

/**
 * What a storage error says, as far down its `reason` and `cause` chain as it goes: the SQL client's message is
 * often generic ("Failed to connect") and the server's reason ("database "x" does not exist", "role "y" does not
 * exist", "connect ECONNREFUSED") is below it. The distinct messages, joined by `: `, with any password written in a
 * connection URL replaced by `***`. The journal's `Storage` errors use it.
 *
 * @example
 * ```ts
 * import { JournalSql } from "@lifeline/journal"
 *
 * const error = new Error("Failed to connect", { cause: new Error("database \"app\" does not exist") })
 * JournalSql.describeError(error) // 'Failed to connect: database "app" does not exist'
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const describeError: (error: unknown) => string = internal.describeCause

/**
 * The storage backend on a SQL client whose schema is migrated, for `Journal.make`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { SqlClient } from "effect/sql"
 * import { Journal, JournalSql } from "@lifeline/journal"
 *
 * const journal = Effect.gen(function*() {
 *   yield* JournalSql.migrate
 *   return yield* Journal.make(JournalSql.makeBackend(yield* SqlClient.SqlClient))
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeBackend: (sql: SqlClient.SqlClient) => JournalBackend.Backend = backend.makeBackend

/**
 * Migrates the schema, then builds the journal on the `SqlClient` in context. `options` describe the process for
 * owner claims (`@lifeline/node`'s `NodeJournal.identity` and `NodeJournal.liveness` on Node).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { JournalSql } from "@lifeline/journal"
 *
 * // needs a SqlClient: SqliteJournal.makeClient, PgClient.layer, ...
 * const journal = JournalSql.make({ identity: { pid: 4242, host: "build-1" } })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (
  options?: Journal.MakeOptions
) => Effect.Effect<Journal.Journal.Service, JournalError, SqlClient.SqlClient> = backend.make
