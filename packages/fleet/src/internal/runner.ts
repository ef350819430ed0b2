/**
 * The layers behind `FleetRunner`: Effect's cluster sharding over Postgres (or any SQL client), the runner's socket
 * server, the client side, and the retried resets of `retriedResets.ts`.
 *
 * @internal
 */
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as NodeCrypto from "@effect/platform-node/NodeCrypto"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as MessageStorage from "effect/cluster/MessageStorage"
import * as RunnerAddress from "effect/cluster/RunnerAddress"
import * as ShardingConfig from "effect/cluster/ShardingConfig"
import * as SqlMessageStorage from "effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "effect/cluster/SqlRunnerStorage"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as FleetRunner from "../FleetRunner.js"
import * as migrations from "./migrations.js"
import { withRetriedResets } from "./retriedResets.js"

// Effect's SQL message storage, with its resets of read marks retried until they succeed (see ./retriedResets.ts).
const messageStorage = (prefix: string, config: ShardingConfig.ShardingConfig["Service"]) =>
  Layer.effect(
    MessageStorage.MessageStorage,
    Effect.gen(function*() {
      return withRetriedResets(yield* MessageStorage.MessageStorage, yield* Effect.scope, lockInterval(config))
    })
  ).pipe(Layer.provide(SqlMessageStorage.layerStorage({ prefix }).pipe(Layer.provide(NodeCrypto.layerDigest))))

// How long Effect's `Sharding` waits for a lock operation, and for the reset of shards it took (its
// `shardLockInterval`: effect/src/cluster/internal/shardLock.ts).
const lockInterval = (config: ShardingConfig.ShardingConfig["Service"]) =>
  Duration.min(
    Duration.fromInputUnsafe(config.shardLockRefreshInterval),
    Duration.divideUnsafe(Duration.fromInputUnsafe(config.shardLockExpiration), 3)
  )

const storage = (prefix: string, config: ShardingConfig.ShardingConfig["Service"]) =>
  Layer.mergeAll(
    messageStorage(prefix, config),
    SqlRunnerStorage.layerStorage({ prefix })
  ).pipe(
    Layer.provide(Layer.succeed(ShardingConfig.ShardingConfig)(config)),
    // Built before the storages: the tables exist, migrated by one runner at a time.
    Layer.provide(Layer.effectDiscard(migrations.run({ prefix })))
  )

/** The whole configuration: `sharding` over Effect's defaults, so that no field is left to the environment. */
export const shardingConfig = (
  options: Pick<FleetRunner.Options, "host" | "port" | "listenHost" | "sharding"> | undefined
): ShardingConfig.ShardingConfig["Service"] => {
  const host = options?.host ?? "127.0.0.1"
  return {
    ...ShardingConfig.defaults,
    ...options?.sharding,
    runnerAddress: options === undefined || options.port === undefined
      ? Option.none()
      : Option.some(RunnerAddress.make(host, options.port)),
    runnerListenAddress: options?.listenHost === undefined || options.port === undefined
      ? Option.none()
      : Option.some(RunnerAddress.make(options.listenHost, options.port))
  }
}

export const layer = (options: FleetRunner.Options) => {
  const config = shardingConfig(options)
  const prefix = options.prefix ?? "cluster"
  return NodeClusterSocket.layer({
    storage: "byo",
    shardingConfig: config,
    serialization: options.serialization ?? "binary"
  }).pipe(Layer.provideMerge(storage(prefix, config)))
}

export const layerClient = (options?: {
  readonly prefix?: string | undefined
  readonly sharding?: FleetRunner.ShardingOptions | undefined
  readonly serialization?: "binary" | "ndjson" | undefined
}) => {
  const config = shardingConfig({ port: undefined as unknown as number, sharding: options?.sharding })
  const prefix = options?.prefix ?? "cluster"
  return NodeClusterSocket.layer({
    clientOnly: true,
    storage: "byo",
    shardingConfig: config,
    serialization: options?.serialization ?? "binary"
  }).pipe(Layer.provideMerge(storage(prefix, config)))
}

const pg = (options: FleetRunner.PostgresOptions) =>
  PgClient.layer({
    url: Redacted.isRedacted(options.url) ? options.url : Redacted.make(options.url),
    maxConnections: options.maxConnections ?? 10
  })

export const layerPostgres = (options: FleetRunner.Options & FleetRunner.PostgresOptions) =>
  layer(options).pipe(Layer.provideMerge(pg(options)))

export const layerClientPostgres = (
  options: FleetRunner.PostgresOptions & Parameters<typeof layerClient>[0]
) => layerClient(options).pipe(Layer.provideMerge(pg(options)))
