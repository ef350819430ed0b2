/**
 * The cluster's tables (messages, replies, runners, shard locks) created or upgraded once per database, one runner at
 * a time: runners that start together on an empty database take turns behind a Postgres advisory lock instead of
 * racing each other's `CREATE TABLE` (the fault this module exists for: three runners started at once on a fresh
 * database crashed one with `relation "cluster_migrations" already exists`).
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Migrator from "effect/sql/Migrator"
import type * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import * as internal from "./internal/migrations.js"

/**
 * The prefix of the cluster's tables unless `prefix` says otherwise: `cluster_messages`, `cluster_replies`,
 * `cluster_runners`, `cluster_locks` and their histories `cluster_migrations`, `cluster_runner_migrations`.
 *
 * @since 0.1.0
 * @category models
 */
export const defaultPrefix = "cluster"

/**
 * The first key of the advisory lock (`pg_advisory_xact_lock(key, hash(prefix))`) that serializes the migrations.
 * Any value other programs on the same database do not use for their own advisory locks.
 *
 * @since 0.1.0
 * @category models
 */
export const lockKey = 0x4c464c54 // "LFLT"

/**
 * Applies the message-storage and runner-storage migrations of Effect's cluster (`SqlMessageStorage.migrations`,
 * `SqlRunnerStorage.migrations`) in one transaction that first takes a transaction-scoped advisory lock: a second
 * runner waits for the first to commit, then finds nothing left to apply. On a dialect other than Postgres it
 * applies them without the lock (Effect's migrator then treats a concurrent run as `Locked`).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { SqlClient } from "effect/sql"
 * import { FleetMigrations } from "@lifeline/fleet"
 *
 * // The fleet's Postgres, e.g. `PgClient.layer({ url })` of `@effect/sql-pg`.
 * declare const SqlLive: Layer.Layer<SqlClient.SqlClient>
 *
 * // A deploy step that migrates before any runner starts (each runner also does, under the same lock).
 * const migrate = FleetMigrations.run().pipe(Effect.provide(SqlLive))
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const run: (options?: {
  readonly prefix?: string | undefined
}) => Effect.Effect<void, SqlError.SqlError | Migrator.MigrationError, SqlClient.SqlClient> = internal.run
