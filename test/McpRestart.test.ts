/**
 * `Reconnect.reconnecting` with the MCP SDK's `Client` (v1, and v2 for the restart) over `@lifeline/mcp`'s transport
 * and a real server that crashes (test/fixtures/mcp-crashing.mjs): the call in flight fails at once, the server is
 * started again within its budget and `tools/call` works again; a server that no longer starts is given up after the
 * budget, with `RestartBudgetExhausted` on `closed` and `client.onerror`; nothing of any start is left running.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Reconnect, StdioClientTransport } from "@lifeline/mcp"
import { Client as ClientV2 } from "@modelcontextprotocol/client"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import * as Duration from "effect/Duration"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import { alive } from "./support/mcp.js"

const here = Path.dirname(Url.fileURLToPath(import.meta.url))
const crashing = Path.join(here, "fixtures", "mcp-crashing.mjs")
const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-mcp-restart-"))
afterAll(() => Fs.rmSync(directory, { recursive: true, force: true }))

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const measured = (line: string) => process.stderr.write(`[mcp measured] ${line}\n`)

const setUp = (name: string, env: Record<string, string>) => {
  const starts = Path.join(directory, `${name}.starts`)
  Fs.writeFileSync(starts, "")
  const makeTransport = () =>
    new StdioClientTransport.StdioClientTransport({
      command: process.execPath,
      args: [crashing],
      env: { MCP_STARTS: starts, ...env },
      stderr: "ignore",
      journalDirectory: Path.join(directory, "journal")
    })
  const pids = () => Fs.readFileSync(starts, "utf8").trim().split("\n").filter((line) => line !== "").map(Number)
  return { makeTransport, pids }
}

const text = (result: unknown): string => JSON.stringify((result as { content: unknown }).content)

const clients = {
  v1: () => new Client({ name: "lifeline-test", version: "1.0.0" }),
  v2: () => new ClientV2({ name: "lifeline-test", version: "1.0.0" })
}

describe("restart of a crashed MCP server with the SDK's Client", () => {
  for (const [version, makeClient] of Object.entries(clients)) {
    it(
      `${version}: restarted within the budget: the call in flight fails, tools/call works again after the restart`,
      async () => {
        const { makeTransport, pids } = setUp(`within-${version}`, { MCP_CRASH_AT_CALL: "2" })
        const client = makeClient()
        let closes = 0
        client.onclose = () => closes++
        const events: Array<Reconnect.RestartEvent> = []
        let reconnected: (restart: number) => void = () => {}
        const back = new Promise<number>((resolve) => reconnected = resolve)
        const connection = await Reconnect.reconnecting(client, makeTransport, {
          initialDelay: "100 millis",
          restartBudget: 2,
          onRestart: (event) => events.push(event),
          onReconnected: (restart) => reconnected(restart)
        })
        assert.include(text(await client.callTool({ name: "count" })), "start 1 call 1")

        // The second call crashes the server: it fails at once, as the dead server's request.
        const crashAt = performance.now()
        const error = await client.callTool({ name: "count" }).then(() => undefined, (e: unknown) => e)
        const failedAfter = performance.now() - crashAt
        assert.match(String(error), /Connection closed/)
        assert.isBelow(failedAfter, 2000)

        // The restart: the Client initializes again with a new server, and answers again.
        assert.strictEqual(await back, 1)
        const backAfter = performance.now() - crashAt
        const answer = text(await client.callTool({ name: "count" }))
        measured(
          `${version} restart: in-flight call failed after ${failedAfter.toFixed(0)} ms, tools/call back after ` +
            `${backAfter.toFixed(0)} ms (delay 100 ms)`
        )
        assert.include(answer, "start 2 call 1")
        assert.strictEqual(connection.restarts, 1)
        assert.strictEqual(events.length, 1)
        assert.strictEqual(Duration.toMillis(events[0]!.delay), 100)
        assert.strictEqual(closes, 1, "the Client's onclose at the crash, as without the helper")
        const [first, second] = pids()
        assert.deepStrictEqual(alive([first!]), [], "the crashed server is gone")
        assert.strictEqual(connection.transport?.pid, second)

        await client.close()
        await connection.closed
        assert.deepStrictEqual(alive(pids()), [])
        assert.strictEqual(pids().length, 2, "no restart after client.close()")
      },
      15_000
    )
  }

  it(
    "given up after the budget: closed rejects with RestartBudgetExhausted, onerror gets it, nothing left",
    async () => {
      const { makeTransport, pids } = setUp("exhausted", { MCP_CRASH_AT_CALL: "1", MCP_WORKING_STARTS: "1" })
      const client = new Client({ name: "lifeline-test", version: "1.0.0" })
      const errors: Array<Error> = []
      client.onerror = (error) => errors.push(error)
      const connection = await Reconnect.reconnecting(client, makeTransport, {
        initialDelay: "50 millis",
        restartBudget: 2
      })
      const error = await client.callTool({ name: "count" }).then(() => undefined, (e: unknown) => e)
      assert.match(String(error), /Connection closed/)

      const started = performance.now()
      const outcome = await connection.closed.then(() => undefined, (e: unknown) => e)
      measured(`give-up: after ${(performance.now() - started).toFixed(0)} ms (delays 50 + 100 ms, 2 failed starts)`)
      assert.instanceOf(outcome, Reconnect.RestartBudgetExhausted)
      const exhausted = outcome as Reconnect.RestartBudgetExhausted
      assert.strictEqual(exhausted._tag, "RestartBudgetExhausted")
      assert.strictEqual(exhausted.restarts, 2)
      assert.isTrue(errors.includes(exhausted), "reported to client.onerror")
      assert.strictEqual(pids().length, 3, "the first start and two restarts, no more")
      await sleep(300)
      assert.strictEqual(pids().length, 3)
      assert.deepStrictEqual(alive(pids()), [])
      assert.isUndefined(connection.transport)
      // Requests after the give-up fail at once.
      const late = await client.callTool({ name: "count" }).then(() => undefined, (e: unknown) => e)
      assert.match(String(late), /Not connected/)
    },
    15_000
  )
})
