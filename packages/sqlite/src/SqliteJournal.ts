/**
 * The embedded default journal: SQLite through Node's built-in `node:sqlite` (no native addon), in WAL mode, with every
 * write synced before it returns, in one file under the data directory. The child processes a crashed host left behind
 * are killed by `@lifeline/node`'s `NodeReaper.reapProcess`.
 *
 * @since 0.1.0
 */
import * as Journal from "@lifeline/journal/Journal"
import type * as JournalError from "@lifeline/journal/JournalError"
import * as JournalSql from "@lifeline/journal/JournalSql"
import * as Config from "effect/Config"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type * as SqlClient from "effect/sql/SqlClient"
import * as Path from "node:path"
import * as internal from "./internal/sqliteJournal.js"

/**
 * How SQLite syncs a commit to disk in WAL mode.
 *
 * - `FULL` (default): the WAL is synced on every commit, so an entry `begin` returned survives a power loss or an OS
 *   crash, as the journal promises.
 * - `NORMAL`: the WAL is synced only at checkpoints. An entry still survives a crash or a SIGKILL of the process (the
 *   write is in the OS's page cache), but the last commits may be lost if the machine itself goes down.
 *
 * @since 0.1.0
 * @category models
 */
export type Synchronous = internal.Synchronous

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The database file; its directory is created when missing. */
  readonly filename: string
  readonly synchronous?: Synchronous | undefined
  /**
   * How long one journal step may take (default `Journal.defaultOperationTimeout`, 5 seconds), then a `Storage`
   * error that says it timed out. node:sqlite runs a statement synchronously, so this bounds the wait for the write
   * lock (busy timeout, 5 s) rather than a statement already running.
   */
  readonly operationTimeout?: Duration.Input | undefined
  /** The largest payload, result or error stored, in bytes of JSON (default `Journal.defaultMaxPayloadBytes`, 1 MiB). */
  readonly maxPayloadBytes?: number | undefined
}

/**
 * The table that holds the entries, the one that holds the owners' claims, and the one that records which
 * migrations ran.
 *
 * @since 0.1.0
 * @category models
 */
export const tables: { readonly journal: string; readonly owners: string; readonly migrations: string } =
  JournalSql.tables

/**
 * The schema migrations, for `Migrator.fromRecord`. The SQL is portable (SQLite, PostgreSQL, MySQL), so that a
 * shared server can hold the journal of several hosts, each under its own `JournalClaim.Owner`.
 *
 * @since 0.1.0
 * @category models
 */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = JournalSql.migrations

/**
 * A journal over the `SqlClient` in context: sets the SQLite pragmas (synchronous, a 5 s busy timeout for writes
 * from other processes), runs the migrations, and builds the journal. Its owner claims record this process (pid,
 * host name, start time), and a claimant on the same host takes over the claim of a holder whose process is gone
 * (or whose pid now names a later process) at once, without waiting for the claim to expire; a holder still running
 * keeps its claim, even past expiry.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { SqlClient } from "effect/sql"
 * import { SqliteJournal } from "@lifeline/sqlite"
 *
 * // any SQLite `SqlClient` will do; this one is SqliteJournal's own, over node:sqlite
 * const journal = Effect.flatMap(
 *   SqliteJournal.makeClient("journal.db"),
 *   (client) => SqliteJournal.make({ synchronous: "NORMAL" }).pipe(Effect.provideService(SqlClient.SqlClient, client))
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (
  options?: Omit<Options, "filename">
) => Effect.Effect<Journal.Journal.Service, JournalError.JournalError, SqlClient.SqlClient> = internal.make

/**
 * Opens the database file (creating its directory) as a `SqlClient` over `node:sqlite` (WAL mode, a 5 s busy timeout,
 * prepared statements cached), closed with the Scope. An app that keeps its own tables in the same file can give this
 * client to {@link make} and write its state and the journal in one transaction.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { SqlClient } from "effect/sql"
 * import { SqliteJournal } from "@lifeline/sqlite"
 *
 * const program = Effect.gen(function*() {
 *   const client = yield* SqliteJournal.makeClient("/tmp/lifeline/journal.db")
 *   return yield* SqliteJournal.make().pipe(Effect.provideService(SqlClient.SqlClient, client))
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeClient: (
  filename: string
) => Effect.Effect<SqlClient.SqlClient, JournalError.JournalError, Scope.Scope> = internal.makeClient

/**
 * Opens (and creates) the database file and builds the journal on it; the file is closed with the Scope.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { SqliteJournal } from "@lifeline/sqlite"
 *
 * const program = Effect.gen(function*() {
 *   const journal = yield* SqliteJournal.makeFile({ filename: "/tmp/lifeline/journal.db" })
 *   return yield* journal.unfinished()
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeFile = (
  options: Options
): Effect.Effect<Journal.Journal.Service, JournalError.JournalError, Scope.Scope> =>
  Effect.flatMap(
    internal.makeClient(options.filename),
    (client) => internal.make(options).pipe(Effect.provideService(internal.SqlClientTag, client))
  )

/**
 * The journal in a SQLite file.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal } from "@lifeline/journal"
 * import { SqliteJournal } from "@lifeline/sqlite"
 *
 * const program = Effect.flatMap(Journal.Journal, (journal) => journal.unfinished()).pipe(
 *   Effect.provide(SqliteJournal.layer({ filename: "/var/lib/myapp/lifeline/journal.db" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<Journal.Journal, JournalError.JournalError> =>
  Layer.effect(Journal.Journal, makeFile(options))

/**
 * The variables naming the data directory, in order of precedence.
 *
 * @since 0.1.0
 * @category models
 */
export const DATA_DIR_VARIABLES: ReadonlyArray<string> = ["LIFELINE_DATA_DIR", "HERMES_DATA_DIR"]

/**
 * The variable choosing `FULL` or `NORMAL` sync.
 *
 * @since 0.1.0
 * @category models
 */
export const SYNCHRONOUS_VARIABLE = "LIFELINE_JOURNAL_SYNCHRONOUS"

/**
 * The journal's options from the environment: `<dir>/lifeline/journal.db`, where `<dir>` is `LIFELINE_DATA_DIR`,
 * else `HERMES_DATA_DIR`, else `XDG_DATA_HOME`, else `$HOME/.local/share`; `LIFELINE_JOURNAL_SYNCHRONOUS` is `FULL`
 * (default) or `NORMAL`.
 *
 * @example
 * ```ts
 * import { ConfigProvider } from "effect"
 * import { SqliteJournal } from "@lifeline/sqlite"
 *
 * const options = SqliteJournal.config.parse(ConfigProvider.fromEnv({ env: { HERMES_DATA_DIR: "/data/hermes" } }))
 * // { filename: "/data/hermes/lifeline/journal.db", synchronous: "FULL" }
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const config: Config.Config<{ readonly filename: string; readonly synchronous: Synchronous }> = Config.all({
  // The data directory: the journal is <dir>/lifeline/journal.db
  directory: Config.NonEmptyString("LIFELINE_DATA_DIR").pipe(
    Config.orElse(() => Config.NonEmptyString("HERMES_DATA_DIR")),
    Config.orElse(() => Config.NonEmptyString("XDG_DATA_HOME")),
    Config.orElse(() => Config.map(Config.NonEmptyString("HOME"), (home) => Path.join(home, ".local", "share")))
  ),
  // How SQLite syncs the journal: FULL (default, survives power loss) or NORMAL
  synchronous: Config.Literals(["FULL", "NORMAL"], SYNCHRONOUS_VARIABLE).pipe(Config.withDefault("FULL" as const))
}).pipe(
  Config.map(({ directory, synchronous }) => ({
    filename: Path.join(directory, "lifeline", "journal.db"),
    synchronous
  }))
)

/**
 * The journal in the data directory read by {@link config}: the default when nothing else is configured.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { SqliteJournal } from "@lifeline/sqlite"
 *
 * // LIFELINE_DATA_DIR=/var/lib/myapp node host.js
 * const JournalLive = SqliteJournal.layerConfig
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<Journal.Journal, JournalError.JournalError | Config.ConfigError> = Layer.effect(
  Journal.Journal,
  Effect.flatMap(config, makeFile)
)
