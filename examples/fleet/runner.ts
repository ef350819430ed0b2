/**
 * A runner of the fleet fixture: a Lifeline host that joins the fleet on Postgres and runs `ExtensionSession`s whose
 * child is `extension.ts`. Writes `ready <pid>` to stdout once it has joined. Sharding settings come as JSON in
 * `FLEET_SHARDING` (the tests shorten the shard-lock expiry); `FLEET_MAX_CONNECTIONS` sets the size of its Postgres
 * pool (default: `FleetRunner`'s) and `FLEET_SESSION_CONCURRENCY` how many operations of one session run at once
 * (default `unbounded`); `FLEET_LOG_LEVEL` (e.g. `Debug`) the least severe log line it writes to stderr.
 *
 * Usage: `node scripts/run-bundled.mjs examples/fleet/runner.ts <postgres url> <port> <effects file>`
 */
import * as ExtensionSession from "@lifeline/fleet/ExtensionSession"
import * as FleetRunner from "@lifeline/fleet/FleetRunner"
import * as NodeSignals from "@lifeline/node/NodeSignals"
import * as PgJournal from "@lifeline/postgres/PgJournal"
import * as ShardId from "effect/cluster/ShardId"
import * as Sharding from "effect/cluster/Sharding"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import * as ChildProcess from "effect/process/ChildProcess"
import * as References from "effect/References"
import * as Path from "node:path"
import { root } from "./harness.js"
import { Host, Work } from "./protocol.js"

const [url, port, effectsFile] = process.argv.slice(2)
if (url === undefined || port === undefined || effectsFile === undefined) {
  process.stderr.write("usage: runner.ts <postgres url> <port> <effects file>\n")
  process.exit(2)
}
const here = Path.join(root, "examples/fleet")
const sharding = JSON.parse(process.env.FLEET_SHARDING ?? "{}") as FleetRunner.ShardingOptions
const shardsTotal = sharding.shardsPerGroup ?? 300
const workMs = Number(process.env.FLEET_WORK_MS ?? "400")
const maxConnections = process.env.FLEET_MAX_CONNECTIONS ? Number(process.env.FLEET_MAX_CONNECTIONS) : undefined
const concurrency = process.env.FLEET_SESSION_CONCURRENCY === undefined ||
    process.env.FLEET_SESSION_CONCURRENCY === "unbounded"
  ? "unbounded" as const
  : Number(process.env.FLEET_SESSION_CONCURRENCY)

const Sessions = ExtensionSession.layer({
  command: (sessionId) =>
    ChildProcess.make(process.execPath, [
      Path.join(root, "scripts/run-bundled.mjs"),
      Path.join(here, "extension.ts"),
      sessionId,
      effectsFile,
      String(process.pid)
    ]),
  protocol: Host,
  run: (peer, operation) => peer.call(Work, { key: operation.key, attempt: operation.attempt, ms: workMs }),
  decisions: { work: () => "Resume" },
  concurrency,
  maxIdleTime: "5 seconds",
  claim: { ttl: sharding.shardLockExpiration ?? "10 seconds" },
  // `FLEET_DRAIN_TIMEOUT` (e.g. `1 second`): how long operations in flight may finish when the runner stops.
  drainTimeout: process.env.FLEET_DRAIN_TIMEOUT as Duration.Input | undefined,
  stop: { exitGrace: "200 millis", killGrace: "500 millis" }
})

const Runner = FleetRunner.layerPostgres({ url, port: Number(port), sharding, maxConnections })

// Reports how many shards this runner holds whenever that changes: `shards <n>`.
const reportShards = Effect.gen(function*() {
  const sharding = yield* Sharding.Sharding
  const total = shardsTotal
  let last = -1
  while (true) {
    let held = 0
    for (let id = 1; id <= total; id++) if (sharding.hasShardId(ShardId.make("default", id))) held++
    if (held !== last) {
      last = held
      yield* Effect.sync(() => process.stdout.write(`shards ${held}\n`))
    }
    yield* Effect.sleep("200 millis")
  }
})

const main = Effect.gen(function*() {
  yield* Effect.sync(() => process.stdout.write(`ready ${process.pid}\n`))
  return yield* reportShards
})

// `FLEET_LOG_LEVEL` (e.g. `Debug`): the least severe log line written to stderr (default Info).
const logLevel = (process.env.FLEET_LOG_LEVEL ?? "Info") as LogLevel.LogLevel

NodeSignals.runMain(
  Effect.scoped(Layer.launch(
    Layer.merge(Sessions, Layer.effectDiscard(Effect.forkScoped(main))).pipe(
      Layer.provide(PgJournal.layerClient),
      Layer.provideMerge(Runner)
    )
  )).pipe(Effect.provideService(References.MinimumLogLevel, logLevel))
)
