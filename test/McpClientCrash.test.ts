/**
 * The MCP client example (`examples/mcp-client`) SIGKILLed while its server runs: the server, in a process group of its
 * own and deaf to the end of its input and to SIGTERM (`MCP_STUBBORN=1`), outlives it, and the next start of the
 * client sweeps it from the journal (`NodeSupervisedSpawner`, the supervision `@lifeline/mcp` runs on).
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Fixtures from "./support/fixtures.js"
import { client, journalDirectory, runClient } from "./support/mcpClient.js"
import { awaitGone, isAlive, killOnExit, spawnLines } from "./support/processes.js"

layer(Fixtures.layer(["mcp-server", "mcp-2026-server"]), { excludeTestServices: true, timeout: "60 seconds" })(
  "mcp-client SIGKILLed",
  (it) => {
    it.effect("its stubborn server survives it, and the next start of the client sweeps it", () =>
      Effect.gen(function*() {
        const programs = yield* Fixtures.Programs
        const stubborn = ["env", "MCP_STUBBORN=1", process.execPath, ...programs.argv("mcp-server")].join(" ")
        const first = yield* spawnLines(client, [
          "--server",
          stubborn,
          "--slow-tool",
          "slow",
          "--cancel-after",
          "30s",
          "--journal-directory",
          journalDirectory
        ], { cwd: process.cwd() })
        const pid = yield* first.line(
          (line) => /spawned .* \(pid (\d+)\)/.exec(line)?.[1],
          () => new Error(`the client exited: ${first.stderr()}`)
        ).pipe(Effect.map(Number), Effect.timeout("15 seconds"))
        yield* killOnExit(pid)
        yield* first.line((line) => line.includes("tools/call echo") ? true : undefined, () => new Error("exited"))
          .pipe(Effect.timeout("15 seconds"))
        first.child.kill("SIGKILL")
        yield* first.exited
        yield* Effect.sleep("300 millis")
        assert.isTrue(isAlive(pid), "the server outlives the client that was SIGKILLed")

        const again = yield* runClient(["--server", [process.execPath, ...programs.argv("mcp-2026-server")].join(" ")])
        assert.strictEqual(again.code, 0)
        // The sweep at start: SIGTERM (ignored), SIGKILL a grace (1 s) later.
        const goneAfter = yield* awaitGone(pid, 3_000)
        assert.isBelow(goneAfter, 3_000)
      }))
  }
)
