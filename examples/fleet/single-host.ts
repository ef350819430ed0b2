/**
 * The single-host baseline of the fleet's throughput figure: one process, no cluster, the same extension (one child
 * per session) and the same Postgres journal; each operation is journaled (`JournaledOperation.run`: begin, then
 * complete) around one `work` call to its session's child. Sends `<operations>` over `<sessions>` sessions at once
 * after a warm-up call per session, and prints `throughput <operations> <ms> <first send, epoch ms> <last reply, epoch
 * ms>`.
 *
 * Usage: `node scripts/run-bundled.mjs examples/fleet/single-host.ts <postgres url> <operations> <sessions>`
 */
import * as FleetRunner from "@lifeline/fleet/FleetRunner"
import * as JournaledOperation from "@lifeline/journal/JournaledOperation"
import * as NodeChildProcess from "@lifeline/node/NodeChildProcess"
import * as NodeSignals from "@lifeline/node/NodeSignals"
import * as PgJournal from "@lifeline/postgres/PgJournal"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ChildProcess from "effect/process/ChildProcess"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { root } from "./harness.js"
import { Host, Work } from "./protocol.js"

const [url, operations, sessions] = process.argv.slice(2)
if (url === undefined || operations === undefined || sessions === undefined) {
  process.stderr.write("usage: single-host.ts <postgres url> <operations> <sessions>\n")
  process.exit(2)
}
const effectsFile = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-single-")), "effects")

const main = Effect.gen(function*() {
  const peers = yield* Effect.forEach(Array.from({ length: Number(sessions) }, (_, i) => i), (i) =>
    Effect.map(
      NodeChildProcess.makePeer({
        command: ChildProcess.make(process.execPath, [
          Path.join(root, "scripts/run-bundled.mjs"),
          Path.join(root, "examples/fleet/extension.ts"),
          `single-s${i}`,
          effectsFile,
          String(process.pid)
        ]),
        protocol: Host,
        handlers: {}
      }),
      ({ peer }) => peer
    ), { concurrency: "unbounded" })
  const run = (key: string, session: number) =>
    peers[session]!.call(Work, { key, attempt: 1, ms: 0 }).pipe(JournaledOperation.run("work", key, { key }))
  yield* Effect.forEach(peers, (_, i) => run(`single-warm-${Date.now()}-${i}`, i), { concurrency: "unbounded" })
  const started = Date.now()
  const id = Date.now()
  yield* Effect.forEach(
    Array.from({ length: Number(operations) }, (_, i) => i),
    (i) => run(`single-${id}-${i}`, i % Number(sessions)),
    { concurrency: "unbounded", discard: true }
  )
  const ended = Date.now()
  yield* Effect.sync(() => process.stdout.write(`throughput ${operations} ${ended - started} ${started} ${ended}\n`))
}).pipe(Effect.scoped)

NodeSignals.runMain(
  main.pipe(Effect.provide(PgJournal.layerClient.pipe(Layer.provide(FleetRunner.layerClientPostgres({ url })))))
)
