/**
 * A Lifeline host as a runner of Effect's cluster: it listens on a socket for the other runners, keeps its messages,
 * replies, registrations and shard locks in Postgres (Effect's `SqlMessageStorage` and `SqlRunnerStorage`, on the
 * `SqlClient` in context), and runs the entities whose shards it holds. The cluster's tables are migrated first, one
 * runner at a time (`FleetMigrations`).
 *
 * @since 0.1.0
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import type * as MessageStorage from "effect/cluster/MessageStorage"
import type * as Runners from "effect/cluster/Runners"
import type * as Sharding from "effect/cluster/Sharding"
import type * as ShardingConfig from "effect/cluster/ShardingConfig"
import type { ConfigError } from "effect/Config"
import type * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import type * as SocketServer from "effect/socket/SocketServer"
import type * as Migrator from "effect/sql/Migrator"
import type * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import * as internal from "./internal/runner.js"

/**
 * The cluster settings a fleet may tune (`ShardingConfig` of `effect/cluster`). The ones that bound a takeover:
 *
 * - `shardLockExpiration` (Effect's default 35 s): how long a dead runner's shards stay locked when its database
 *   session is not seen to end. A SIGKILLed process's connections are closed by its operating system, so Postgres
 *   releases its advisory locks at once; a frozen or partitioned one holds them until this expiry.
 * - `shardLockRefreshInterval` (10 s, at most a third of the expiry): how often a runner renews its locks. Each
 *   renewal must also finish within that interval: a runner that misses it (its event loop or its Postgres busy with a
 *   burst, on a loaded machine) releases every shard it holds, and every session it ran is stopped and started again,
 *   with a new child. Keep the expiry long enough that a third of it outlasts the runner's worst stall (a SIGKILLed
 *   runner's locks are released at once anyway, whatever the expiry).
 * - `refreshAssignmentsInterval` (3 s): how often a runner re-reads who is alive and takes the shards it is assigned.
 * - `runnerHealthCheckInterval` (1 min): how often runners check each other (a ping) and report unhealthy ones.
 * - `entityMessagePollInterval` (10 s): how often a runner reads messages it has not seen from storage; a shard it
 *   takes over is read at once, and a message sent while the sender knows the shard's runner is read at once too
 *   (the sender notifies it over its socket), so this bounds only messages sent while the shard had no known runner.
 *
 * Values must agree across the runners of a fleet, `shardsPerGroup` above all.
 *
 * @since 0.1.0
 * @category models
 */
export type ShardingOptions = Partial<ShardingConfig.ShardingConfig["Service"]>

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The host other runners reach this one at. Default `127.0.0.1`. */
  readonly host?: string | undefined
  readonly port: number
  /** The address to listen on, when it differs from `host` (e.g. `0.0.0.0` behind NAT). Default: `host`. */
  readonly listenHost?: string | undefined
  /** The prefix of the cluster's tables. Default `cluster` (see `FleetMigrations.defaultPrefix`). */
  readonly prefix?: string | undefined
  readonly sharding?: ShardingOptions | undefined
  /** How runners encode their messages to each other. Default `binary` (Effect's schema-driven binary format). */
  readonly serialization?: "binary" | "ndjson" | undefined
}

/**
 * The runner: `Sharding` (register entities with it, and send to any entity of the fleet), `Runners` and the
 * `MessageStorage`. Built in this order: the cluster's migrations (serialized by an advisory lock), the storages,
 * the socket server, then the runner's registration and its shards. The `SqlClient` must be Postgres' (`PgClient`
 * of `@effect/sql-pg`); the journal of the sessions may share it.
 *
 * The sharding settings are `options.sharding` over Effect's defaults; the environment (`ShardingConfig.layerFromEnv`)
 * is read too, and anything set in `options` wins.
 *
 * When the runner takes shards, the read marks of their unanswered messages are cleared, so that messages a previous
 * holder read but did not answer (its entities stopped: a runner that lost Postgres for a while) are delivered again.
 * Effect's `Sharding` waits for that reset only `min(shardLockRefreshInterval, shardLockExpiration / 3)` and ignores
 * its failure, and a message whose mark stays set is not read again for ten minutes: this layer's storage retries the
 * reset past that wait (every 500 ms, each try within 5 s, for up to ten minutes), with a warning on its first failure.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { SqlClient } from "effect/sql"
 * import { FleetRunner } from "@lifeline/fleet"
 *
 * // The fleet's Postgres, e.g. `PgClient.layer({ url })` of `@effect/sql-pg`.
 * declare const SqlLive: Layer.Layer<SqlClient.SqlClient>
 *
 * const Runner = FleetRunner.layer({ port: 34431, sharding: { shardLockExpiration: "10 seconds" } }).pipe(
 *   Layer.provide(SqlLive)
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: (options: Options) => Layer.Layer<
  Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage,
  SocketServer.SocketServerError | ConfigError | SqlError.SqlError | Migrator.MigrationError,
  SqlClient.SqlClient
> = internal.layer

/**
 * A client of the fleet that runs no entity: it sends operations (persisted in storage, so they outlive it) and
 * reads their replies, and takes no shard. For a program that only submits work.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { SqlClient } from "effect/sql"
 * import { FleetRunner } from "@lifeline/fleet"
 *
 * declare const SqlLive: Layer.Layer<SqlClient.SqlClient>
 *
 * const Client = FleetRunner.layerClient().pipe(Layer.provide(SqlLive))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerClient: (options?: {
  readonly prefix?: string | undefined
  readonly sharding?: ShardingOptions | undefined
  readonly serialization?: "binary" | "ndjson" | undefined
}) => Layer.Layer<
  Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage,
  ConfigError | SqlError.SqlError | Migrator.MigrationError,
  SqlClient.SqlClient
> = internal.layerClient

/**
 * {@link layer} on a Postgres server of its own, reached at `url` (`PgClient` of `@effect/sql-pg`, a pool of
 * `maxConnections`, default 10). The `SqlClient` is provided too, for the sessions' journal.
 *
 * @example
 * ```ts
 * import { FleetRunner } from "@lifeline/fleet"
 *
 * const Runner = FleetRunner.layerPostgres({ url: "postgres://lifeline@127.0.0.1:5432/postgres", port: 34431 })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPostgres: (options: Options & PostgresOptions) => Layer.Layer<
  Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage | SqlClient.SqlClient | PgClient.PgClient,
  SocketServer.SocketServerError | ConfigError | SqlError.SqlError | Migrator.MigrationError
> = internal.layerPostgres

/**
 * {@link layerClient} on a Postgres server of its own.
 *
 * @example
 * ```ts
 * import { FleetRunner } from "@lifeline/fleet"
 *
 * const Client = FleetRunner.layerClientPostgres({ url: "postgres://lifeline@127.0.0.1:5432/postgres" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerClientPostgres: (
  options: PostgresOptions & {
    readonly prefix?: string | undefined
    readonly sharding?: ShardingOptions | undefined
    readonly serialization?: "binary" | "ndjson" | undefined
  }
) => Layer.Layer<
  Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage | SqlClient.SqlClient | PgClient.PgClient,
  ConfigError | SqlError.SqlError | Migrator.MigrationError
> = internal.layerClientPostgres

/**
 * Where the fleet's Postgres is.
 *
 * @since 0.1.0
 * @category models
 */
export interface PostgresOptions {
  readonly url: string | Redacted.Redacted
  /** The most connections this process opens (the runner keeps one for its shard locks). Default 10. */
  readonly maxConnections?: number | undefined
}
