/**
 * The MCP client example (`examples/mcp-client`) against an MCP server written with Lifeline
 * (`test/fixtures/mcp-server.ts`) and against the MCP reference server (`@modelcontextprotocol/server-everything`,
 * run as a user runs it), over stdio with newline-delimited JSON: the whole lifecycle, the cancellation of a slow call,
 * a close by the end of stdin, and a close that escalates to SIGKILL within its bounds when the server will not stop.
 * The client runs as its own process, as a user runs it, and prints a JSON report whose `ok` is about the client's own
 * steps and whose `serverExit` says what the server needed to exit. Both servers speak up to 2025-11-25: the client
 * probes with `server/discover` (MCP 2026-07-28), is refused, and falls back to `initialize`; the 2026-07-28 side is
 * test/McpProtocolVersions.test.ts.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import * as Url from "node:url"
import * as Fixtures from "./support/fixtures.js"
import { everything, everythingMain, runClient, runTranscript } from "./support/mcpClient.js"

const here = Path.dirname(Url.fileURLToPath(import.meta.url))

const serverLine = (env: string = "") =>
  Effect.map(Fixtures.Programs, (programs) => `${env}${[process.execPath, ...programs.argv("mcp-server")].join(" ")}`)

/** Runs the client against the reference server, with its `echo` tool called with `message`; `args` follow. */
const echoOnEverything = (message: string, ...args: Array<string>) =>
  runClient(["--server", everything, "--tool", "echo", "--arguments", JSON.stringify({ message }), ...args])

/** What a terminal obeys instead of showing: ESC, BEL, the one-byte C1 CSI, a bidirectional override. */
const controls = /[\u001b\u0007\u009b\u202e]/

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

/**
 * An MCP client on `node:child_process` alone, to see the reference server without Lifeline in between: initialize
 * (declaring the roots capability or not), notifications/initialized, one `echo` call, then the end of stdin right
 * after its answer, as a short session does. Resolves with how long after the end of stdin the server exited, or null
 * if it had not within `bound` ms (it is then killed), and the methods of the server's requests.
 */
const independentSession = (declareRoots: boolean, bound: number) =>
  Effect.callback<{ readonly exitedAfterMs: number | null; readonly serverRequests: ReadonlyArray<string> }>(
    (resume) => {
      const child = ChildProcess.spawn(process.execPath, [everythingMain, "stdio"], {
        stdio: ["pipe", "pipe", "ignore"]
      })
      const serverRequests: Array<string> = []
      const send = (message: unknown) => child.stdin.write(JSON.stringify(message) + "\n")
      let endedAt = 0
      let timer: ReturnType<typeof setTimeout> | undefined
      let buffer = ""
      child.stdout.on("data", (chunk: Buffer) => {
        buffer += chunk.toString("utf8")
        for (let end = buffer.indexOf("\n"); end >= 0; end = buffer.indexOf("\n")) {
          const message = JSON.parse(buffer.slice(0, end)) as { id?: unknown; method?: string }
          buffer = buffer.slice(end + 1)
          if (message.method !== undefined && message.id !== undefined) serverRequests.push(message.method)
          if (message.id === 1 && message.method === undefined) {
            send({ jsonrpc: "2.0", method: "notifications/initialized" })
            send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "echo", arguments: { message: "x" } } })
          } else if (message.id === 2 && message.method === undefined) {
            endedAt = performance.now()
            child.stdin.end()
            timer = setTimeout(() => {
              child.kill("SIGKILL")
              resume(Effect.succeed({ exitedAfterMs: null, serverRequests }))
            }, bound)
          }
        }
      })
      child.once("exit", () => {
        if (timer === undefined) return
        clearTimeout(timer)
        resume(Effect.succeed({ exitedAfterMs: performance.now() - endedAt, serverRequests }))
      })
      send({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-06-18",
          capabilities: declareRoots ? { roots: { listChanged: false } } : {},
          clientInfo: { name: "independent", version: "0" }
        }
      })
      return Effect.sync(() => {
        clearTimeout(timer)
        child.kill("SIGKILL")
      })
    }
  ).pipe(Effect.timeout("10 seconds"))

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
      assert.strictEqual(report.era, "legacy")
      assert.deepStrictEqual(report.probe, {
        _tag: "Refused",
        code: -32601,
        message: "Method not found: server/discover"
      })
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
      assert.strictEqual(report.serverExit.needed, "eof")
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
      // Issue 13, item 9: what the server needed is reported apart; the client itself did everything right. (This
      // test asserted `ok: false` and exit code 1 before the report kept the two apart.)
      assert.deepStrictEqual(report.serverExit, {
        ...report.serverExit,
        code: null,
        signal: "SIGKILL",
        needed: "SIGKILL"
      })
      assert.isAtLeast(report.serverExit.after!, 550)
      assert.isTrue(report.ok)
      assert.strictEqual(code, 0)
    }))

  it.effect("what the server chose is printed with its control characters shown, never sent to the terminal raw", () =>
    Effect.gen(function*() {
      // A tool named with an OSC 0 title, BEL and a C1 CSI (printed raw by tools/list's transcript line before); an
      // echo whose text the server sends back holds an ESC CSI, a C1 CSI and a right-to-left override.
      const hostileName = "\u001b]0;owned\u0007\u009b2J"
      const echoed = "\u001b[2J\u009b31mred\u202e"
      const args = ["--server", yield* serverLine(), "--tool", "echo", "--arguments", JSON.stringify({ text: echoed })]
      const transcript = yield* runTranscript(args, { MCP_HOSTILE: "1" })
      assert.strictEqual(transcript.code, 0)
      assert.notMatch(transcript.stdout, controls)
      assert.include(transcript.stdout, "tools/list: echo, slow, \u241b]0;owned\u2407\\u009b2J")
      // The JSON report escapes them too, and still means the same strings.
      const { code, report, stdout } = yield* runClient(args, { MCP_HOSTILE: "1" })
      assert.strictEqual(code, 0)
      assert.notMatch(stdout, controls)
      assert.deepStrictEqual(report.tools, ["echo", "slow", hostileName])
      assert.deepStrictEqual(report.call?.result, { content: [{ type: "text", text: echoed }] })
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
  // Issue 13, item 9: the reference server exits at the end of its input, as the MCP stdio transport asks, when
  // nothing of the client's keeps it alive.
  it.effect("the reference server: initialize, tools/list, tools/call echo, and an exit at the end of stdin", () =>
    Effect.gen(function*() {
      const { code, report } = yield* echoOnEverything("hello, everything")
      assert.strictEqual(code, 0)
      assert.isTrue(report.ok)
      assert.strictEqual(report.protocolVersion, "2025-11-25")
      assert.includeMembers([...report.tools], ["echo", "get-sum"])
      assert.deepStrictEqual(report.call?.result, { content: [{ type: "text", text: "Echo: hello, everything" }] })
      assert.deepStrictEqual(report.roots, { declared: false, askedAtMs: null })
      assert.deepStrictEqual(report.serverRequests, [])
      assert.strictEqual(report.serverExit.needed, "eof")
      assert.strictEqual(report.serverExit.code, 0)
      assert.isNull(report.serverExit.signal)
      // Before the 1 s after which SIGTERM would follow. The server's own 350 ms timer after
      // notifications/initialized (`syncRoots`) holds it up to then in a session this short.
      assert.isBelow(report.serverExit.after!, 1_000)
      assert.strictEqual(report.stop.endedBy, "EndOfInput")
    }))

  it.effect("the reference server with --root: roots/list is answered before the close, and it still exits on EOF", () =>
    Effect.gen(function*() {
      const { code, report } = yield* echoOnEverything("r", "--root", here)
      assert.strictEqual(code, 0)
      assert.isTrue(report.ok)
      assert.isTrue(report.roots.declared)
      assert.isNotNull(report.roots.askedAtMs, "the client waited for the server's roots/list")
      assert.deepStrictEqual(report.serverRequests, ["roots/list"])
      assert.strictEqual(report.serverExit.needed, "eof")
      assert.deepStrictEqual([report.serverExit.code, report.serverExit.signal], [0, null])
      assert.isBelow(report.serverExit.after!, 1_000)
    }))

  // The cause, without Lifeline: a client that declares roots and closes before the server asks for them (350 ms after
  // notifications/initialized) strands the server's roots/list, which the MCP SDK keeps pending with a 60 s timer, so
  // the end of stdin does not end the server. Declaring no roots, it exits at the end of stdin.
  it.effect("the reference server, driven by node:child_process alone: a stranded roots/list keeps it alive", () =>
    Effect.gen(function*() {
      const stranded = yield* independentSession(true, 1_500)
      assert.isNull(stranded.exitedAfterMs, "still running 1.5 s after the end of its input")
      assert.deepStrictEqual(stranded.serverRequests, ["roots/list"], "asked after its input had ended")
      const clean = yield* independentSession(false, 1_500)
      assert.isNotNull(clean.exitedAfterMs)
      assert.isBelow(clean.exitedAfterMs!, 1_000)
      assert.deepStrictEqual(clean.serverRequests, [])
    }))

  // The same stranded request through mcp-client (`--roots-wait 0` turns its wait off): the client did everything
  // right, the server needed SIGTERM, and the report keeps the two apart.
  it.effect("a server that needs SIGTERM after the end of stdin: ok, and serverExit.needed says SIGTERM", () =>
    Effect.gen(function*() {
      const { code, report } = yield* echoOnEverything(
        "s",
        "--root",
        here,
        "--roots-wait",
        "0",
        "--close-timeout",
        "400ms"
      )
      assert.strictEqual(code, 0)
      assert.isTrue(report.ok)
      if (report.roots.askedAtMs === null) {
        assert.deepStrictEqual(report.serverExit, {
          ...report.serverExit,
          code: null,
          signal: "SIGTERM",
          needed: "SIGTERM"
        })
        assert.isAtLeast(report.serverExit.after!, 390)
        assert.strictEqual(report.stop.endedBy, "Terminate")
      } else {
        // A machine so slow that the server asked before the close: then nothing was stranded.
        assert.strictEqual(report.serverExit.needed, "eof")
      }
    }))
})
