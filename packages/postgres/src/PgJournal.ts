/**
 * The journal on PostgreSQL, through Effect's SQL client for Postgres (`@effect/sql-pg`): the same `Journal` contract
 * and schema as `@lifeline/sqlite`, for hosts that share one server (a fleet), each under its own
 * `JournalClaim.Owner`. Every write is one statement committed before its effect succeeds. The schema is migrated
 * at start under an advisory lock, so hosts that start at once on an empty database apply it once.
 *
 * @since 0.1.0
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import * as Journal from "@lifeline/journal/Journal"
import type * as JournalClaim from "@lifeline/journal/JournalClaim"
import type * as JournalError from "@lifeline/journal/JournalError"
import * as Config from "effect/Config"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import type * as SqlClient from "effect/sql/SqlClient"
import * as internal from "./internal/pgJournal.js"

/**
 * Options of the Postgres journal.
 *
 * - `identity`: the process recorded in its owner claims. Node's pid, host name and start time by default; in
 *   containers, whose host names and pids may repeat, give each host a distinct `host` (e.g. the pod's name), since a
 *   claimant takes over at once a holder "on its host" whose pid is gone.
 * - `operationTimeout`: how long one journal step may take (default `Journal.defaultOperationTimeout`, 5 seconds):
 *   a server that stopped answering (frozen, partitioned) fails the step with a `Storage` error that says it timed
 *   out, instead of holding the host and its shutdown; reading the server's settings and migrating at start are
 *   bounded by it too. On the pool of {@link layer} it is also the server-side
 *   `statement_timeout` and the connect timeout (unless the pool options give one).
 * - `maxPayloadBytes`: the largest payload, result or error stored (default `Journal.defaultMaxPayloadBytes`, 1 MiB),
 *   well below the driver's 16 MiB message limit, so that every stored row can be read back.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly identity?: JournalClaim.Identity | undefined
  readonly operationTimeout?: Duration.Input | undefined
  readonly maxPayloadBytes?: number | undefined
}

/**
 * Migrates the schema (`JournalSql.migrations`, under an advisory lock) and builds the journal on the `SqlClient` in
 * context, which must be a PostgreSQL one (`PgClient.layer`, or your app's own pool; set `statement_timeout` on it
 * yourself, see {@link Options}). Its owner claims record this process (pid, host, start time, or `options.identity`), so a claimant on the same host can tell at once whether a holder still runs;
 * holders on other hosts are taken over when their claims expire. Logs a warning when the server does not sync
 * commits (`synchronous_commit` off), since the journal is then not durable.
 *
 * @example
 * ```ts
 * import { PgJournal } from "@lifeline/postgres"
 * import { Effect, Layer } from "effect"
 * import type { SqlClient } from "effect/sql"
 *
 * // the app's own pool, e.g. `PgClient.layer({ url })` from @effect/sql-pg
 * declare const pool: Layer.Layer<SqlClient.SqlClient>
 *
 * const journal = PgJournal.make({ identity: { host: "worker-7" }, operationTimeout: "3 seconds" }).pipe(
 *   Effect.provide(pool)
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (
  options?: Options
) => Effect.Effect<Journal.Journal.Service, JournalError.JournalError, SqlClient.SqlClient> = internal.make

/**
 * The journal on the `SqlClient` in context (see {@link make}).
 *
 * @example
 * ```ts
 * import { PgJournal } from "@lifeline/postgres"
 * import { Layer } from "effect"
 * import type { SqlClient } from "effect/sql"
 *
 * // the app's own pool, shared with its own tables
 * declare const pool: Layer.Layer<SqlClient.SqlClient>
 *
 * const JournalLive = PgJournal.layerClient.pipe(Layer.provide(pool))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerClient: Layer.Layer<Journal.Journal, JournalError.JournalError, SqlClient.SqlClient> = Layer.effect(
  Journal.Journal,
  internal.make()
)

/**
 * The journal on a pool of its own, from `@effect/sql-pg`'s pool options (`url`, or `host`, `port`, `database`,
 * `username`, `password`; `maxConnections`, ...), closed with the layer; `options` as in {@link make}. The pool's
 * connections get `statement_timeout` = `operationTimeout`, and it is their connect timeout unless `poolOptions`
 * give one. A connection that fails says why (the server's reason: a database or role that does not exist, a refused
 * connection), never the password.
 *
 * @example
 * ```ts
 * import { Journal } from "@lifeline/journal"
 * import { PgJournal } from "@lifeline/postgres"
 * import { Effect, Redacted } from "effect"
 *
 * const program = Effect.flatMap(Journal.Journal, (journal) => journal.unfinished()).pipe(
 *   Effect.provide(PgJournal.layer(
 *     { url: Redacted.make("postgres://lifeline@127.0.0.1:5432/lifeline") },
 *     { identity: { host: "host-1" } }
 *   ))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  poolOptions: PgClient.PgPoolConfig,
  options?: Options
): Layer.Layer<Journal.Journal, JournalError.JournalError> =>
  Layer.effect(Journal.Journal, internal.make(options)).pipe(Layer.provide(internal.pool(poolOptions, options)))

/**
 * The variables naming the server, in order of precedence.
 *
 * @since 0.1.0
 * @category models
 */
export const URL_VARIABLES: ReadonlyArray<string> = ["LIFELINE_POSTGRES_URL", "DATABASE_URL"]

/**
 * The connection URL from the environment: `LIFELINE_POSTGRES_URL`, else `DATABASE_URL`
 * (`postgres://user:password@host:port/database`). With neither set, the `ConfigError` names both.
 *
 * @example
 * ```ts
 * import { ConfigProvider, Redacted } from "effect"
 * import { PgJournal } from "@lifeline/postgres"
 *
 * const url = PgJournal.config.parse(ConfigProvider.fromEnv({ env: { DATABASE_URL: "postgres://db/app" } }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const config: Config.Config<Redacted.Redacted<string>> = internal.config

/**
 * The journal on the server named by {@link config}.
 *
 * @example
 * ```ts
 * import { PgJournal } from "@lifeline/postgres"
 *
 * // LIFELINE_POSTGRES_URL=postgres://lifeline@db:5432/lifeline node host.js
 * const JournalLive = PgJournal.layerConfig
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<Journal.Journal, JournalError.JournalError | Config.ConfigError> = Layer.unwrap(
  Config.map(config, (url) => layer({ url }))
)
