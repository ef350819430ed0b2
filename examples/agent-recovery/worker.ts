/**
 * The tool executor of the agent-recovery example: a child process that speaks JSON-RPC on its stdin and stdout
 * (`NodeStdio`; stdout is the protocol only, logs go to stderr). Each `tool/run` pretends to work for `ms`
 * milliseconds, then performs its side effect, one line appended to the effects file, and answers.
 *
 * When the agent goes away (its stdin ends), the worker stops under a drain policy: a tool that is running is
 * allowed to finish. So a worker whose agent crashed in the middle of a tool outlives it, an orphan, until the next
 * start of the agent finds it in the journal and kills it.
 *
 * Usage (started by `main.ts`): `node scripts/run-bundled.mjs examples/agent-recovery/worker.ts <effects file>`
 */
import type * as Connection from "@lifeline/kernel/Connection"
import * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import * as NodeSignals from "@lifeline/node/NodeSignals"
import * as NodeStdio from "@lifeline/node/NodeStdio"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import { type RunTool, ToolStarted, Worker } from "./protocol.js"

const effectsFile = process.argv[2]
if (effectsFile === undefined) {
  process.stderr.write("usage: worker.ts <effects file>\n")
  process.exit(2)
}

const main = Effect.gen(function*() {
  // The handler needs the connection (to notify the agent), which needs the handler: wired through a Deferred.
  const ready = yield* Deferred.make<Connection.Connection<typeof RunTool, typeof ToolStarted>>()
  const connection = yield* NodeStdio.makeConnection({
    protocol: Worker,
    handlers: {
      "tool/run": ({ attempt, input, key, ms, tool }) =>
        Effect.gen(function*() {
          const { peer } = yield* Deferred.await(ready)
          yield* Effect.ignore(peer.notify(ToolStarted, { key, pid: process.pid }))
          yield* Effect.logInfo(`${key}: ${tool} ${input} (attempt ${attempt})`)
          yield* Effect.sleep(Duration.millis(ms))
          // The side effect: what a retry after a crash may do a second time.
          yield* Effect.sync(() => Fs.appendFileSync(effectsFile, `${key} attempt ${attempt} pid ${process.pid}\n`))
          return { output: `${tool}(${input}): ok` }
        })
    },
    policy: ShutdownPolicy.drain("30 seconds")
  })
  yield* Deferred.succeed(ready, connection)
  yield* Effect.logInfo(`ready (pid ${process.pid})`)
  return yield* connection.awaitShutdown
}).pipe(Effect.scoped)

NodeSignals.runMain(main)
