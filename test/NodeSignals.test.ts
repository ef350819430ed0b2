import { assert, layer } from "@effect/vitest"
import { NodeChildProcess, NodeSignals } from "@lifeline/node"
import { Deferred, Effect, Stream } from "effect"
import { ChildProcess } from "effect/process"
import * as Fixtures from "./support/fixtures.js"
import { awaitGone, isAlive } from "./support/processes.js"

const elapsedSince = (start: number) => performance.now() - start

/**
 * Starts `host.ts`, which spawns `server.ts` with Lifeline, and waits for the pid of that server, which the host
 * prints on its stdout once the server has answered.
 */
const startHost = (env: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const programs = yield* Fixtures.Programs
    const command = yield* Fixtures.command("host", ...programs.argv("server"))
    const host = yield* NodeChildProcess.make({ command: ChildProcess.setEnv(command, env), name: "host" })
    const serverPid = yield* Deferred.make<number>()
    let text = ""
    yield* host.transport.incoming.pipe(
      Stream.runForEach((chunk) =>
        Effect.suspend(() => {
          text += new TextDecoder().decode(chunk)
          const line = /\{"child":(\d+)\}\n/.exec(text)
          return line === null ? Effect.void : Deferred.succeed(serverPid, Number(line[1]))
        })
      ),
      Effect.forkScoped
    )
    const server = yield* Deferred.await(serverPid).pipe(
      Effect.timeoutOrElse({
        duration: "30 seconds",
        orElse: () => Effect.fail(new Error("the host never reported its child"))
      })
    )
    return { host, server }
  })

layer(Fixtures.layer(["host", "server"]), { excludeTestServices: true, timeout: "60 seconds" })(
  "NodeSignals: no orphans",
  (it) => {
    it.effect("the host dies of SIGKILL: its child sees the end of its stdin and exits by itself within 1 s", () =>
      Effect.gen(function*() {
        const { host, server } = yield* startHost()
        assert.isTrue(isAlive(server))
        process.kill(host.pid, "SIGKILL")
        const start = performance.now()
        yield* host.exit
        const elapsed = yield* awaitGone(server, 1000)
        yield* Effect.logInfo(
          `host SIGKILL → orphaned child gone after ${elapsed.toFixed(0)} ms (${elapsedSince(start).toFixed(0)} ms ` +
            `from the host's observed exit)`
        )
        assert.isBelow(elapsed, 1000)
      }))

    it.effect("the host gets SIGTERM: it stops its child (shutdown answered), leaves nothing, exits 143", () =>
      Effect.gen(function*() {
        const { host, server } = yield* startHost()
        const start = performance.now()
        process.kill(host.pid, "SIGTERM")
        const exit = yield* host.exit
        assert.deepStrictEqual(exit, { exitCode: NodeSignals.ExitCode.Terminate, signal: null })
        assert.isFalse(isAlive(server))
        assert.isBelow(elapsedSince(start), 5000)
      }))

    it.effect("a second SIGTERM cuts the host's wait for its child's shutdown short: SIGKILL, exit code 2", () =>
      Effect.gen(function*() {
        const { host, server } = yield* startHost({ SHUTDOWN_DELAY: "20000" })
        process.kill(host.pid, "SIGTERM")
        yield* Effect.sleep("300 millis")
        assert.isTrue(isAlive(server), "the host waits for the answer to shutdown")
        const start = performance.now()
        process.kill(host.pid, "SIGTERM")
        const exit = yield* host.exit
        assert.deepStrictEqual(exit, { exitCode: NodeSignals.ExitCode.Forced, signal: null })
        assert.isBelow(elapsedSince(start), 1500)
        assert.isFalse(isAlive(server))
      }))
  }
)
