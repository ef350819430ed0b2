/**
 * The extension of a fleet session: speaks JSON-RPC on stdio; each `work` appends `start` and then, `ms` later,
 * `done` to the effects file (a negative `ms` fails it after `start`) (`<event> <key> <attempt> <runner pid> <own pid> <epoch ms>`), so that a test can count what ran
 * where and how often. It stops at once when its stdin ends (its runner stopped it, or died).
 *
 * Usage: `node scripts/run-bundled.mjs examples/fleet/extension.ts <session id> <effects file> <runner pid>`
 */
import * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import * as NodeSignals from "@lifeline/node/NodeSignals"
import * as NodeStdio from "@lifeline/node/NodeStdio"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import { Extension } from "./protocol.js"

const [, effectsFile, runnerPid] = process.argv.slice(2)
if (effectsFile === undefined || runnerPid === undefined) {
  process.stderr.write("usage: extension.ts <session id> <effects file> <runner pid>\n")
  process.exit(2)
}
// Given by the runner, not read from `process.ppid`: an extension whose runner died is already an orphan.
const runner = Number(runnerPid)
const record = (event: string, key: string, attempt: number) =>
  Effect.sync(() =>
    Fs.appendFileSync(effectsFile, `${event} ${key} ${attempt} ${runner} ${process.pid} ${Date.now()}\n`)
  )

const main = Effect.gen(function*() {
  const connection = yield* NodeStdio.makeConnection({
    protocol: Extension,
    handlers: {
      work: ({ attempt, key, ms }) =>
        Effect.gen(function*() {
          yield* record("start", key, attempt)
          if (ms < 0) return yield* Effect.die(new Error(`asked to fail (${key})`))
          yield* Effect.sleep(Duration.millis(ms))
          yield* record("done", key, attempt)
          return { key, pid: process.pid, runner }
        })
    },
    policy: ShutdownPolicy.FailFast()
  })
  return yield* connection.awaitShutdown
}).pipe(Effect.scoped)

NodeSignals.runMain(main)
