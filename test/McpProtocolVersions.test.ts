/**
 * The MCP client example (`examples/mcp-client`) and the two eras of MCP: against a server speaking 2026-07-28 (Effect's
 * own `McpServer`, `test/fixtures/mcp-2026-server.ts`) it opens with `server/discover` and no `initialize`, and every
 * request names its version; against servers that speak up to 2025-11-25 it falls back to `initialize` when the probe
 * is refused (the reference server, Effect's server configured for 2025-11-25) or not answered within
 * `--discover-timeout` (a server that ignores it). The report names the version. The bound itself is tested on the
 * TestClock in packages/mcp/test/Negotiation.test.ts.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Fixtures from "./support/fixtures.js"
import { everything, runClient } from "./support/mcpClient.js"

const line = (name: string) =>
  Effect.map(Fixtures.Programs, (programs) => [process.execPath, ...programs.argv(name)].join(" "))

layer(Fixtures.layer(["mcp-2026-server", "mcp-server"]), { excludeTestServices: true, timeout: "60 seconds" })(
  "mcp-client and MCP 2026-07-28",
  (it) => {
    it.effect("a 2026-07-28 server: server/discover, tools listed and called, a cancelled call seen by the server", () =>
      Effect.gen(function*() {
        const { code, report } = yield* runClient([
          "--server",
          yield* line("mcp-2026-server"),
          "--tool",
          "add",
          "--arguments",
          JSON.stringify({ a: 2, b: 40 }),
          "--slow-tool",
          "slow",
          "--slow-arguments",
          JSON.stringify({ ms: 10_000 }),
          "--cancel-after",
          "200 millis"
        ])
        assert.strictEqual(code, 0)
        assert.isTrue(report.ok)
        assert.strictEqual(report.protocolVersion, "2026-07-28")
        assert.strictEqual(report.era, "modern")
        assert.deepStrictEqual(report.probe, { _tag: "Answered" })
        assert.deepStrictEqual(report.supportedVersions, ["2026-07-28"])
        assert.deepStrictEqual(report.serverInfo, { name: "lifeline-mcp-2026-fixture", version: "0.2.0" })
        assert.deepStrictEqual(report.tools, ["echo", "add", "slow"])
        assert.deepStrictEqual(report.call?.result, {
          content: [{ type: "text", text: "42" }],
          structuredContent: 42,
          isError: false
        })
        assert.strictEqual(report.cancelled?.outcome, "Cancelled")
        // The server's own word: its slow handler (10 s) was interrupted while its input was still open, so by
        // notifications/cancelled (the close that follows 500 ms later would have ended stdin first, and it says so).
        const interrupted = report.stderrTail.find((entry) => entry.startsWith("slow: interrupted after"))
        assert.isDefined(interrupted, `the server's stderr: ${JSON.stringify(report.stderrTail)}`)
        assert.match(interrupted!, /, stdin open$/)
        assert.isBelow(Number(/after (\d+) ms/.exec(interrupted!)![1]), 5_000)
        assert.strictEqual(report.lateResponses, 0, "no answer to the cancelled call")
        assert.deepStrictEqual(report.serverRequests, [])
        assert.strictEqual(report.stop.endedBy, "EndOfInput")
        assert.deepStrictEqual(report.exit, { code: 0, signal: null })
      }))

    it.effect("a 2026-07-28 server that answers later than --discover-timeout: initialize refused (-32022), asked again", () =>
      Effect.gen(function*() {
        const { code, report } = yield* runClient([
          "--server",
          yield* line("mcp-2026-server"),
          "--tool",
          "echo",
          "--arguments",
          JSON.stringify({ text: "x" }),
          "--discover-timeout",
          "1ms"
        ])
        assert.strictEqual(code, 0)
        assert.strictEqual(report.protocolVersion, "2026-07-28")
        assert.deepStrictEqual(report.probe, { _tag: "AnsweredOnRetry", timeoutMillis: 1 })
      }))

    it.effect("the reference server (up to 2025-11-25): server/discover refused, initialize, 2025-11-25", () =>
      Effect.gen(function*() {
        const { code, report } = yield* runClient([
          "--server",
          everything,
          "--tool",
          "get-sum",
          "--arguments",
          JSON.stringify({ a: 2, b: 3 })
        ])
        assert.strictEqual(code, 0)
        assert.isTrue(report.ok)
        assert.strictEqual(report.protocolVersion, "2025-11-25")
        assert.strictEqual(report.era, "legacy")
        assert.deepStrictEqual(report.probe, { _tag: "Refused", code: -32601, message: "Method not found" })
        assert.strictEqual(report.serverInfo?.name, "mcp-servers/everything")
        assert.include(JSON.stringify(report.call?.result), "5")
        assert.strictEqual(report.serverExit.needed, "eof")
      }))

    it.effect("Effect's server configured for 2025-11-25 only: the same fallback", () =>
      Effect.gen(function*() {
        const { code, report } = yield* runClient(
          ["--server", yield* line("mcp-2026-server"), "--tool", "echo", "--arguments", JSON.stringify({ text: "x" })],
          { MCP_LEGACY: "1" }
        )
        assert.strictEqual(code, 0)
        assert.strictEqual(report.protocolVersion, "2025-11-25")
        assert.deepStrictEqual(report.probe, {
          _tag: "Refused",
          code: -32601,
          message: "Method not found: server/discover"
        })
        // 2025-11-25 carries no structuredContent for a result that is not an object.
        assert.deepStrictEqual(report.call?.result, { content: [{ type: "text", text: "x" }], isError: false })
      }))

    it.effect("a server that never answers server/discover: initialize after --discover-timeout, the probe cancelled", () =>
      Effect.gen(function*() {
        const { code, report } = yield* runClient(
          [
            "--server",
            yield* line("mcp-server"),
            "--tool",
            "echo",
            "--arguments",
            JSON.stringify({ text: "late" }),
            "--discover-timeout",
            "300ms"
          ],
          { MCP_IGNORE_DISCOVER: "1" }
        )
        assert.strictEqual(code, 0)
        assert.isTrue(report.ok)
        assert.deepStrictEqual(report.probe, { _tag: "Silent", timeoutMillis: 300 })
        assert.strictEqual(report.protocolVersion, "2025-06-18")
        assert.isAtLeast(report.negotiationMs, 300)
        assert.isBelow(report.negotiationMs, 2_000)
        assert.deepStrictEqual(report.call?.result, { content: [{ type: "text", text: "late" }] })
        assert.include(report.stderrTail, "server/discover: cancelled", "the probe was cancelled on the wire")
      }))

    it.effect("a server that exits on server/discover: started again, and spoken to with initialize alone", () =>
      Effect.gen(function*() {
        const { code, report } = yield* runClient(
          ["--server", yield* line("mcp-server"), "--tool", "echo", "--arguments", JSON.stringify({ text: "again" })],
          { MCP_EXIT_ON_DISCOVER: "1" }
        )
        assert.strictEqual(code, 0)
        assert.isTrue(report.ok)
        assert.isTrue(report.restartedAfterProbe)
        assert.deepStrictEqual(report.probe, { _tag: "Skipped" })
        assert.strictEqual(report.protocolVersion, "2025-06-18")
        assert.deepStrictEqual(report.call?.result, { content: [{ type: "text", text: "again" }] })
        assert.strictEqual(report.serverExit.needed, "eof")
      }))

    it.effect("under 2026-07-28 a server's request on stdio is refused (-32601); under 2025-11-25 it is answered", () =>
      Effect.gen(function*() {
        const args = [
          "--server",
          yield* line("mcp-server"),
          "--tool",
          "echo",
          "--arguments",
          JSON.stringify({ text: "r" })
        ]
        const modern = yield* runClient(args, { MCP_MODERN: "1" })
        assert.strictEqual(modern.code, 0)
        assert.strictEqual(modern.report.protocolVersion, "2026-07-28")
        assert.deepStrictEqual(modern.report.serverRequests, ["roots/list"])
        assert.include(modern.report.stderrTail, "roots/list: refused (-32601)")
        const legacy = yield* runClient([...args, "--protocol", "legacy"], { MCP_MODERN: "1" })
        assert.strictEqual(legacy.report.protocolVersion, "2025-06-18")
        assert.deepStrictEqual(legacy.report.probe, { _tag: "Skipped" })
        assert.include(legacy.report.stderrTail, "roots/list: answered")
      }))

    it.effect("a message over 10 MiB ends the connection with the peer's framing error (TransportFailed), exit code 1", () =>
      Effect.gen(function*() {
        const { code, stdout } = yield* runClient([
          "--server",
          [process.execPath, ...(yield* Fixtures.Programs).argv("mcp-huge-line.mjs")].join(" ")
        ])
        assert.strictEqual(code, 1)
        const report = JSON.parse(stdout) as { ok: boolean; error: { _tag: string; message: string } }
        assert.deepStrictEqual([report.ok, report.error._tag], [false, "PeerClosed"])
        assert.include(report.error.message, "TransportFailed")
      }))

    it.effect("--protocol 2026-07-28 against an older server: a NegotiationError (UnsupportedVersion), exit code 1", () =>
      Effect.gen(function*() {
        const { code, stdout } = yield* runClient(["--server", everything, "--protocol", "2026-07-28"])
        assert.strictEqual(code, 1)
        const report = JSON.parse(stdout) as { ok: boolean; error: { _tag: string; message: string } }
        assert.deepStrictEqual(report.error._tag, "NegotiationError")
        assert.include(report.error.message, "UnsupportedVersion")
      }))
  }
)
