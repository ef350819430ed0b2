/**
 * The MCP client example (`examples/mcp-client`) against an MCP server written with Lifeline
 * (`test/fixtures/mcp-server.ts`), over stdio with newline-delimited JSON: the whole lifecycle, the cancellation of a
 * slow call, and a close that escalates to SIGKILL within its bounds when the server will not stop. The client runs as
 * its own process, as a user runs it, and prints a JSON report.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import * as Url from "node:url"
import * as Fixtures from "./support/fixtures.js"

const here = Path.dirname(Url.fileURLToPath(import.meta.url))
const client = Path.join(here, "..", "examples", "mcp-client", "bin", "mcp-client")

interface Report {
  readonly ok: boolean
  readonly protocolVersion: string | null
  readonly initializeMs: number
  readonly tools: ReadonlyArray<string>
  readonly call: { readonly name: string; readonly result: unknown } | null
  readonly cancelled: {
    readonly outcome: string
    readonly afterMs: number
    readonly serverNotifiedMs: number | null
  } | null
  readonly notifications: ReadonlyArray<{ readonly method: string; readonly params: unknown }>
  readonly lateResponses: number
  readonly closeMs: number
  readonly stop: { readonly endedBy: string }
  readonly exit: { readonly code: number | null; readonly signal: string | null } | null
}

const serverLine = (env: string = "") =>
  Effect.map(Fixtures.Programs, (programs) => `${env}${[process.execPath, ...programs.argv("mcp-server")].join(" ")}`)

/** Runs the client to its end and reads its report; its exit code says whether the report is ok. */
const runClient = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.callback<{ readonly code: number | null; readonly report: Report }>((resume) => {
    const child = ChildProcess.execFile(
      client,
      [...args, "--json"],
      { timeout: 20_000, env: { ...process.env, ...env } },
      (_error, stdout) => resume(Effect.sync(() => ({ code: child.exitCode, report: JSON.parse(stdout) as Report })))
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** Writes `lines` to the fixture, one a line, and reads its output until `until` holds for what it has written. */
const exchange = (argv: ReadonlyArray<string>, lines: ReadonlyArray<unknown>, until: (out: string) => boolean) =>
  Effect.callback<ReadonlyArray<Record<string, unknown>>>((resume) => {
    const child = ChildProcess.spawn(process.execPath, [...argv], { stdio: ["pipe", "pipe", "ignore"] })
    let out = ""
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8")
      if (until(out)) {
        child.stdin.end()
        resume(Effect.sync(() => out.trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>)))
      }
    })
    for (const line of lines) child.stdin.write(JSON.stringify(line) + "\n")
    return Effect.sync(() => child.kill("SIGKILL"))
  }).pipe(Effect.timeout("10 seconds"))

layer(Fixtures.layer(["mcp-server"]), { excludeTestServices: true, timeout: "60 seconds" })("mcp-client", (it) => {
  it.effect("initializes, lists and calls tools, cancels a slow call, and closes by ending stdin", () =>
    Effect.gen(function*() {
      const { code, report } = yield* runClient([
        "--server",
        yield* serverLine(),
        "--tool",
        "echo",
        "--arguments",
        JSON.stringify({ text: "hello, mcp" }),
        "--slow-tool",
        "slow",
        "--slow-arguments",
        JSON.stringify({ ms: 10_000 }),
        "--cancel-after",
        "200 millis"
      ])
      assert.strictEqual(code, 0)
      assert.isTrue(report.ok)
      assert.strictEqual(report.protocolVersion, "2025-06-18")
      assert.deepStrictEqual(report.tools, ["echo", "slow"])
      assert.deepStrictEqual(report.call, {
        ...report.call!,
        name: "echo",
        result: { content: [{ type: "text", text: "hello, mcp" }] }
      })
      assert.strictEqual(report.cancelled?.outcome, "Cancelled")
      assert.isBelow(report.cancelled!.afterMs, 2_000)
      assert.isNotNull(report.cancelled!.serverNotifiedMs, "the server logged that it stopped the slow call")
      const logged = report.notifications.map((n) => (n.params as { data?: string }).data ?? "")
      assert.isTrue(logged.some((data) => data.startsWith("slow: cancelled after")))
      assert.strictEqual(report.lateResponses, 0, "no answer to the cancelled call")
      assert.strictEqual(report.stop.endedBy, "EndOfInput")
      assert.deepStrictEqual(report.exit, { code: 0, signal: null })
      assert.isBelow(report.closeMs, 1_500)
    }))

  it.effect("a server that stops neither at the end of its input nor on SIGTERM is killed within the bounds", () =>
    Effect.gen(function*() {
      const { code, report } = yield* runClient(
        ["--server", yield* serverLine(), "--close-timeout", "300 millis"],
        { MCP_STUBBORN: "1" }
      )
      assert.strictEqual(report.stop.endedBy, "Kill")
      assert.deepStrictEqual(report.exit, { code: null, signal: "SIGKILL" })
      // end of stdin (300 ms), SIGTERM (300 ms), SIGKILL.
      assert.isBelow(report.closeMs, 1_500)
      assert.isFalse(report.ok)
      assert.strictEqual(code, 1)
    }))

  // Regression: the kernel answered every request the peer cancelled with -32800, as LSP wants; MCP says the receiver
  // of notifications/cancelled SHOULD NOT answer. `Cancellation.answerCancelled: false` turns the answer off.
  it.effect("a request cancelled with notifications/cancelled gets no answer; string ids round-trip", () =>
    Effect.gen(function*() {
      const programs = yield* Fixtures.Programs
      const messages = yield* exchange(
        programs.argv("mcp-server"),
        [
          {
            jsonrpc: "2.0",
            id: 1,
            method: "initialize",
            params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } }
          },
          { jsonrpc: "2.0", method: "notifications/initialized" },
          { jsonrpc: "2.0", id: "slow-1", method: "tools/call", params: { name: "slow", arguments: { ms: 10_000 } } },
          { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "slow-1", reason: "test" } },
          { jsonrpc: "2.0", id: "ping-1", method: "ping" }
        ],
        (out) => out.includes("\"ping-1\"") && out.includes("slow: cancelled")
      )
      assert.deepStrictEqual(messages.filter((m) => m.id === "ping-1"), [{ jsonrpc: "2.0", id: "ping-1", result: {} }])
      assert.deepStrictEqual(messages.filter((m) => m.id === "slow-1"), [])
    }))
})
