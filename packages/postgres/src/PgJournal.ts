/**
 * The journal on PostgreSQL, through Effect's SQL client for Postgres (`@effect/sql-pg`): the same `Journal` contract
 * and schema as `@lifeline/sqlite`, for hosts that share one server (a fleet), each under its own
 * `JournalClaim.Owner`. Every write is one statement committed before its effect succeeds. The schema is migrated
 * at start under an advisory lock, so hosts that start at once on an empty database apply it once.
 *
 * @since 0.1.0
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import * as Journal from "@lifeline/kernel/Journal"
import type * as JournalError from "@lifeline/kernel/JournalError"
import * as Config from "effect/Config"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import type * as SqlClient from "effect/sql/SqlClient"
import * as internal from "./internal/pgJournal.js"

/**
 * Migrates the schema (`JournalSql.migrations`, under an advisory lock) and builds the journal on the `SqlClient` in
 * context, which must be a PostgreSQL one (`PgClient.layer`, or your app's own pool). Its owner claims record this
 * process (pid, host, start time), so a claimant on the same host can tell at once whether a holder still runs;
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
 * const journal = PgJournal.make().pipe(Effect.provide(pool))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: () => Effect.Effect<Journal.Journal.Service, JournalError.JournalError, SqlClient.SqlClient> =
  internal.make

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
 * `username`, `password`; `maxConnections`, ...), closed with the layer.
 *
 * @example
 * ```ts
 * import { Journal } from "@lifeline/kernel"
 * import { PgJournal } from "@lifeline/postgres"
 * import { Effect, Redacted } from "effect"
 *
 * const program = Effect.flatMap(Journal.Journal, (journal) => journal.unfinished()).pipe(
 *   Effect.provide(PgJournal.layer({ url: Redacted.make("postgres://lifeline@127.0.0.1:5432/lifeline") }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: PgClient.PgPoolConfig): Layer.Layer<Journal.Journal, JournalError.JournalError> =>
  layerClient.pipe(Layer.provide(internal.pool(options)))

/**
 * The variables naming the server, in order of precedence.
 *
 * @since 0.1.0
 * @category models
 */
export const URL_VARIABLES: ReadonlyArray<string> = ["LIFELINE_POSTGRES_URL", "DATABASE_URL"]

/**
 * The connection URL from the environment: `LIFELINE_POSTGRES_URL`, else `DATABASE_URL`
 * (`postgres://user:password@host:port/database`).
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
export const config: Config.Config<Redacted.Redacted<string>> = Config.Redacted("LIFELINE_POSTGRES_URL").pipe(
  Config.orElse(() => Config.Redacted("DATABASE_URL"))
)

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
