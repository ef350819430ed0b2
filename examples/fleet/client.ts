/**
 * A client of the fleet fixture (it runs no entity): sends `<operations>` operations of kind `work`, spread over
 * `<sessions>` sessions (operation i goes to session i mod sessions), all at once, and prints one line per reply as it
 * arrives (after `sending <epoch ms>`, once it has joined): `reply <key> <epoch ms> <runner pid>` or `error <key> <epoch ms> <message>`. Once all are answered it
 * prints the journal's view of each (`journal <key> <status> <attempts>`), closes its sessions and prints `finished`.
 *
 * Usage: `node scripts/run-bundled.mjs examples/fleet/client.ts <postgres url> <run id> <operations> <sessions>`
 */
import * as ExtensionSession from "@lifeline/fleet/ExtensionSession"
import * as FleetRunner from "@lifeline/fleet/FleetRunner"
import * as Journal from "@lifeline/journal/Journal"
import * as NodeSignals from "@lifeline/node/NodeSignals"
import * as PgJournal from "@lifeline/postgres/PgJournal"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as References from "effect/References"

const [url, runId, operations, sessions, prefixArg] = process.argv.slice(2)
if (url === undefined || runId === undefined || operations === undefined || sessions === undefined) {
  process.stderr.write("usage: client.ts <postgres url> <run id> <operations> <sessions> [<session prefix>]\n")
  process.exit(2)
}
const prefix = prefixArg ?? runId
const keepSessions = process.env.FLEET_KEEP_SESSIONS === "1"
const maxConnections = process.env.FLEET_MAX_CONNECTIONS ? Number(process.env.FLEET_MAX_CONNECTIONS) : undefined
const sharding = JSON.parse(process.env.FLEET_SHARDING ?? "{}") as FleetRunner.ShardingOptions
const line = (text: string) => Effect.sync(() => process.stdout.write(`${text}\n`))

const main = Effect.gen(function*() {
  const keys = Array.from({ length: Number(operations) }, (_, i) => i)
  yield* line(`sending ${Date.now()}`)
  yield* Effect.forEach(keys, (i) => {
    const key = `${runId}/op-${i}`
    return ExtensionSession.run(`${prefix}-s${i % Number(sessions)}`, { key, kind: "work", payload: { i } }).pipe(
      Effect.flatMap((reply) => line(`reply ${key} ${Date.now()} ${(reply as { runner: number }).runner}`)),
      Effect.catch((error) => line(`error ${key} ${Date.now()} ${String(error).replace(/\s+/g, " ")}`))
    )
  }, { concurrency: "unbounded", discard: true })
  const journal = yield* Journal.Journal
  for (const i of keys) {
    const entry = yield* journal.get(`${runId}/op-${i}`)
    yield* line(
      Option.match(entry, {
        onNone: () => `journal ${runId}/op-${i} Missing 0`,
        onSome: (e) => `journal ${e.key} ${e.status} ${e.attempts}`
      })
    )
  }
  // Done with these sessions: their extensions stop once idle (the runner's `maxIdleTime`).
  if (!keepSessions) {
    yield* Effect.forEach(
      Array.from({ length: Number(sessions) }, (_, i) => `${prefix}-s${i}`),
      (sessionId) => Effect.ignore(ExtensionSession.close(sessionId)),
      { concurrency: "unbounded", discard: true }
    )
  }
  yield* line("finished")
})

NodeSignals.runMain(
  main.pipe(
    Effect.provide(
      PgJournal.layerClient.pipe(Layer.provideMerge(FleetRunner.layerClientPostgres({ url, sharding, maxConnections })))
    ),
    // `FLEET_LOG_LEVEL` (e.g. `Debug`): the least severe log line written to stderr (default Info).
    Effect.provideService(References.MinimumLogLevel, (process.env.FLEET_LOG_LEVEL ?? "Info") as LogLevel.LogLevel)
  )
)
