/**
 * The LSP client example (`examples/lsp-client`) against real language servers, vscode-json-language-server from
 * vscode-langservers-extracted and bash-language-server (which analyses a document asynchronously), against a scripted
 * server that asks the client everything a server may ask and then never exits after `exit`, against one that
 * publishes no diagnostics, and against one whose strings are terminal escape sequences. The client runs as its own
 * process, as a user runs it, and prints a JSON report.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"

const here = Path.dirname(Url.fileURLToPath(import.meta.url))
const client = Path.join(here, "..", "examples", "lsp-client", "bin", "lsp-client")
// Run by this test's Node, not through node_modules/.bin, whose shim runs a `node` from PATH.
const jsonServerMain = Path.join(
  here,
  "node_modules",
  "vscode-langservers-extracted",
  "bin",
  "vscode-json-language-server"
)
const jsonServer = `${process.execPath} ${jsonServerMain}`
// bash-language-server's bin (`out/cli.js`), started as its README says: `bash-language-server start`.
const bashServer = `${process.execPath} ${
  Path.join(here, "node_modules", "bash-language-server", "out", "cli.js")
} start`

interface Report {
  readonly ok: boolean
  readonly initializeMs: number
  readonly requestMs: number
  readonly shutdownMs: number
  readonly firstDiagnostics: {
    readonly outcome: "received" | "none came" | "not awaited"
    readonly afterMs?: number
    readonly boundMs?: number
    readonly count?: number
    readonly note?: string
  }
  readonly serverRequests: ReadonlyArray<string>
  readonly result: unknown
  readonly exitedAfterExit: boolean
  readonly stop: { readonly endedBy: string }
  readonly exit: { readonly code: number | null; readonly signal: string | null } | null
}

/** Runs the client to its end (killed after `timeout` ms); its stdout is what a terminal would receive. */
const runTranscript = (args: ReadonlyArray<string>, timeout = 20_000) =>
  Effect.callback<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resume) => {
    const child = ChildProcess.execFile(client, args, { timeout }, (_error, stdout, stderr) => {
      resume(Effect.sync(() => ({ code: child.exitCode, stdout, stderr })))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** Runs the client to its end and reads its report; its exit code says whether the report is ok. */
const runClient = (args: ReadonlyArray<string>) =>
  Effect.map(
    runTranscript([...args, "--json"]),
    ({ code, stderr, stdout }) => ({ code, report: JSON.parse(stdout) as Report, stderr, stdout })
  )

const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-lsp-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** Writes `contents` to a file called `name` in a temporary directory removed with the Scope; answers its path. */
const tempFile = (name: string, contents: string) =>
  Effect.map(tempDir, (dir) => {
    const file = Path.join(dir, name)
    Fs.writeFileSync(file, contents)
    return file
  })

/** A scripted server's source written to a temporary file, as the `--server` command line that runs it. */
const serverCommand = (name: string, source: string) =>
  Effect.map(tempFile(name, source), (file) => `${process.execPath} ${file}`)

const document = `{
  "name": "demo",
  "version": "1.0.0",
  "scripts": { "build": "tsc" }
}
`

const settings = {
  json: {
    schemas: [{
      fileMatch: ["*.json"],
      schema: {
        type: "object",
        properties: { name: { type: "string", description: "The package name." }, private: { type: "boolean" } }
      }
    }],
    // The server registers its formatters dynamically once formatting is enabled.
    format: { enable: true }
  }
}

/**
 * A scripted language server around `handlers`, a script that defines `handle(message)`: `send(message)` writes one
 * frame, with `header` before its Content-Length; every message read from stdin but `shutdown` (answered null) is
 * given to `handle`.
 */
const scriptedServer = (handlers: string, header = "") => `
const send = (message) => {
  const body = Buffer.from(JSON.stringify(message), "utf8")
  process.stdout.write("${header}Content-Length: " + body.length + "\\r\\n\\r\\n")
  process.stdout.write(body)
}
${handlers}
const onMessage = (message) => {
  if (message.method === "shutdown") send({ jsonrpc: "2.0", id: message.id, result: null })
  else handle(message)
}
let buffer = Buffer.alloc(0)
process.stdin.on("data", (chunk) => {
  buffer = Buffer.concat([buffer, chunk])
  for (;;) {
    const end = buffer.indexOf("\\r\\n\\r\\n")
    if (end < 0) return
    const length = Number(/Content-Length: *(\\d+)/i.exec(buffer.subarray(0, end).toString())[1])
    if (buffer.length < end + 4 + length) return
    onMessage(JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString("utf8")))
    buffer = buffer.subarray(end + 4 + length)
  }
})
`

/**
 * A scripted language server: it writes `Content-Type` before `Content-Length`, uses string ids, asks the client for
 * configuration, a progress token, a registration and an unknown method, sends `$/progress` and `$/logTrace`, answers
 * `documentSymbol` with the answers it got, and then neither exits after `exit`, nor at the end of its input, nor on
 * SIGTERM.
 */
const stubbornServer = scriptedServer(
  `
const answers = {}
let symbolRequest
const asked = ["workspace/configuration", "window/workDoneProgress/create", "client/registerCapability", "custom/unknown"]
const maybeAnswerSymbols = () => {
  if (symbolRequest !== undefined && Object.keys(answers).length === asked.length) {
    send({ jsonrpc: "2.0", id: symbolRequest, result: answers })
  }
}
const handle = (message) => {
  if (message.method === "initialize") {
    send({ jsonrpc: "2.0", id: message.id, result: { capabilities: { documentSymbolProvider: true } } })
    send({ jsonrpc: "2.0", method: "$/logTrace", params: { message: "hello" } })
    send({ jsonrpc: "2.0", id: "s1", method: asked[0], params: { items: [{ section: "demo.answer" }, { section: "missing" }, {}] } })
    send({ jsonrpc: "2.0", id: "s2", method: asked[1], params: { token: "t" } })
    send({ jsonrpc: "2.0", method: "$/progress", params: { token: "t", value: { kind: "begin", title: "indexing" } } })
    send({ jsonrpc: "2.0", id: "s3", method: asked[2], params: { registrations: [{ id: "r", method: "workspace/didChangeWatchedFiles" }] } })
    send({ jsonrpc: "2.0", id: "s4", method: asked[3], params: [] })
  } else if (message.method === "textDocument/documentSymbol") {
    symbolRequest = message.id
    maybeAnswerSymbols()
  } else if (message.method === undefined && typeof message.id === "string") {
    answers[asked[Number(message.id.slice(1)) - 1]] = "error" in message ? { error: message.error.code } : { result: message.result }
    maybeAnswerSymbols()
  }
}
process.stdin.on("end", () => {})
process.on("SIGTERM", () => {})
setInterval(() => {}, 1000)
`,
  "Content-Type: application/vscode-jsonrpc; charset=utf-8\\r\\n"
)

/**
 * A language server whose strings are terminal escape sequences: its `serverInfo`, a request it sends (an OSC 52
 * clipboard write as the method name, answered -32601), the diagnostics it publishes and the symbol it answers hold
 * ESC, BEL, the one-byte C1 CSI and a right-to-left override. It answers `shutdown` and exits after `exit`.
 */
const hostileServer = scriptedServer(`
const range = { start: { line: 0, character: 0 }, end: { line: 0, character: 1 } }
const handle = (message) => {
  if (message.method === "initialize") {
    send({ jsonrpc: "2.0", id: message.id, result: { capabilities: { documentSymbolProvider: true }, serverInfo: { name: "\\u001b]0;owned\\u0007", version: "\\u009b2J" } } })
    send({ jsonrpc: "2.0", id: "h1", method: "\\u001b]52;c;b3duZWQ=\\u0007\\u001b[2J", params: {} })
  } else if (message.method === "textDocument/didOpen") {
    const diagnostic = { range, severity: 1, message: "\\u009b31mred\\u202e" }
    send({ jsonrpc: "2.0", method: "textDocument/publishDiagnostics", params: { uri: message.params.textDocument.uri, diagnostics: [diagnostic] } })
  } else if (message.method === "textDocument/documentSymbol") {
    send({ jsonrpc: "2.0", id: message.id, result: [{ name: "\\u001b[31mevil\\u009b0m", kind: 12, range, selectionRange: range }] })
  } else if (message.method === "exit") {
    process.exit(0)
  }
}
`)

/** What a terminal obeys instead of showing: ESC, BEL, the one-byte C1 CSI, a bidirectional override. */
const controls = /[\u001b\u0007\u009b\u202e]/

/** A shell script with two functions, in both of bash's spellings. */
const script = `#!/bin/bash
greet() {
  echo "hello $1"
}

function farewell {
  echo "bye $1"
}

greet world
farewell world
`

/**
 * A language server that publishes no diagnostics: it answers `initialize`, answers `documentSymbol` with one symbol
 * whose `detail` says how long after `didOpen` the request came, answers `shutdown` and exits after `exit`.
 */
const quietServer = scriptedServer(`
let openedAt
const handle = (message) => {
  if (message.method === "initialize") {
    send({ jsonrpc: "2.0", id: message.id, result: { capabilities: { documentSymbolProvider: true, textDocumentSync: 1 } } })
  } else if (message.method === "textDocument/didOpen") {
    openedAt = performance.now()
  } else if (message.method === "textDocument/documentSymbol") {
    const range = { start: { line: 0, character: 0 }, end: { line: 0, character: 1 } }
    const waited = String(Math.round(performance.now() - openedAt))
    send({ jsonrpc: "2.0", id: message.id, result: [{ name: "quiet", detail: waited, kind: 12, range, selectionRange: range }] })
  } else if (message.method === "exit") {
    process.exit(0)
  }
}
`)

// Each test runs the client, and the client a server, as processes of their own: seconds on a busy machine.
describe("lsp-client", { timeout: 15_000 }, () => {
  it.live(
    "drives vscode-json-language-server through its lifecycle: documentSymbol lists the keys",
    () =>
      Effect.gen(function*() {
        const file = yield* tempFile("package.json", document)
        const { code, report } = yield* runClient(["--server", `${jsonServer} --stdio`, "--file", file])
        assert.strictEqual(code, 0)
        assert.isTrue(report.ok)
        const symbols = report.result as ReadonlyArray<{ name: string; children: ReadonlyArray<{ name: string }> }>
        assert.deepStrictEqual(symbols.map((symbol) => symbol.name), ["name", "version", "scripts"])
        assert.deepStrictEqual(symbols[2]!.children.map((symbol) => symbol.name), ["build"])
        assert.isTrue(report.exitedAfterExit)
        assert.deepStrictEqual(report.exit, { code: 0, signal: null })
        assert.isBelow(report.initializeMs, 10_000)
        assert.isBelow(report.shutdownMs, 2_000)
      }),
    20_000
  )

  it.live(
    "hover and completion use a schema given by --settings; the server's registrations are answered",
    () =>
      Effect.gen(function*() {
        const file = yield* tempFile("package.json", document)
        const common = ["--server", `${jsonServer} --stdio`, "--file", file, "--settings", JSON.stringify(settings)]
        const hover = yield* runClient([...common, "--request", "hover", "--line", "1", "--character", "4"])
        assert.isTrue(hover.report.ok)
        assert.include(JSON.stringify(hover.report.result), "The package name")
        assert.isTrue(hover.report.serverRequests.includes("client/registerCapability"))
        const completion = yield* runClient([...common, "--request", "completion"])
        assert.isTrue(completion.report.ok)
        const items = (completion.report.result as { items: ReadonlyArray<{ label: string }> }).items
        assert.includeMembers(items.map((item) => item.label), ["name", "private"])
      }),
    20_000
  )

  it.live(
    "answers every server request; a server that never exits after exit is killed within the bound",
    () =>
      Effect.gen(function*() {
        const file = yield* tempFile("package.json", document)
        const { code, report } = yield* runClient([
          "--server",
          yield* serverCommand("stubborn-server.mjs", stubbornServer),
          "--file",
          file,
          "--settings",
          JSON.stringify({ demo: { answer: 42 } }),
          // It publishes no diagnostics: no need to wait the default 3 s for them.
          "--wait",
          "250ms"
        ])
        assert.deepStrictEqual(report.serverRequests, [
          "workspace/configuration",
          "window/workDoneProgress/create",
          "client/registerCapability",
          "custom/unknown"
        ])
        assert.deepStrictEqual(report.result, {
          "workspace/configuration": { result: [42, null, { demo: { answer: 42 } }] },
          "window/workDoneProgress/create": { result: null },
          "client/registerCapability": { result: null },
          "custom/unknown": { error: -32601 }
        })
        // 2 s to exit after `exit`, then end of stdin (1 s), SIGTERM (ignored, 1 s), SIGKILL.
        assert.isFalse(report.exitedAfterExit)
        assert.strictEqual(report.stop.endedBy, "Kill")
        assert.deepStrictEqual(report.exit, { code: null, signal: "SIGKILL" })
        assert.isBelow(report.shutdownMs, 6_000)
        assert.isFalse(report.ok)
        assert.strictEqual(code, 1)
      }),
    20_000
  )
  // Issue 13, item 8: bash-language-server analyses a document only once its `initialized` handler has the client's
  // configuration (a round trip), so a documentSymbol sent right after didOpen gets []. The client waits, as editors
  // do, for the document's first publishDiagnostics.
  it.live(
    "bash-language-server: documentSymbol after the first publishDiagnostics lists both functions; without the wait, []",
    () =>
      Effect.gen(function*() {
        const file = yield* tempFile("two-functions.sh", script)
        const { code, report } = yield* runClient(["--server", bashServer, "--file", file])
        assert.strictEqual(code, 0)
        assert.isTrue(report.ok)
        assert.strictEqual(report.firstDiagnostics.outcome, "received")
        assert.isBelow(report.firstDiagnostics.afterMs!, 3_000)
        const symbols = report.result as ReadonlyArray<{ name: string; kind: number }>
        assert.deepStrictEqual(symbols.map((symbol) => symbol.name).sort(), ["farewell", "greet"])
        assert.isTrue(symbols.every((symbol) => symbol.kind === 12), "both are functions (SymbolKind.Function)")
        assert.isTrue(report.exitedAfterExit)
        assert.deepStrictEqual(report.exit, { code: 0, signal: null })

        const unwaited = yield* runClient(["--server", bashServer, "--file", file, "--wait", "0"])
        assert.strictEqual(unwaited.report.firstDiagnostics.outcome, "not awaited")
        assert.deepStrictEqual(unwaited.report.result, [])
      })
  )

  it.live(
    "a server that publishes no diagnostics: the report says none came, and the request is sent after the bound",
    () =>
      Effect.gen(function*() {
        const file = yield* tempFile("package.json", document)
        const server = yield* serverCommand("quiet-server.mjs", quietServer)
        const { code, report } = yield* runClient(["--server", server, "--file", file, "--wait", "600ms"])
        assert.strictEqual(code, 0)
        assert.isTrue(report.ok)
        assert.strictEqual(report.firstDiagnostics.outcome, "none came")
        assert.strictEqual(report.firstDiagnostics.boundMs, 600)
        assert.isAtLeast(report.firstDiagnostics.afterMs!, 590)
        assert.include(report.firstDiagnostics.note!, "within 600 ms")
        const symbols = report.result as ReadonlyArray<{ name: string; detail: string }>
        assert.deepStrictEqual(symbols.map((symbol) => symbol.name), ["quiet"])
        // The server measured the time from didOpen to the request: the bound, not less.
        assert.isAtLeast(Number(symbols[0]!.detail), 550)
        assert.deepStrictEqual(report.exit, { code: 0, signal: null })
      })
  )

  it.live(
    "--wait takes the compact durations a user types; anything else is one line and exit 2",
    () =>
      Effect.gen(function*() {
        const file = yield* tempFile("package.json", document)
        const refused = yield* runTranscript(["--server", jsonServer, "--file", file, "--wait", "soon"], 10_000)
        assert.strictEqual(refused.code, 2)
        assert.include(refused.stderr.split("\n")[0]!, "--wait: not a duration: \"soon\"")
      })
  )

  it.live(
    "what the server chose is printed with its control characters shown, never sent to the terminal raw",
    () =>
      Effect.gen(function*() {
        const file = yield* tempFile("package.json", document)
        const args = ["--server", yield* serverCommand("hostile-server.mjs", hostileServer), "--file", file]
        const transcript = yield* runTranscript(args)
        assert.strictEqual(transcript.code, 0, transcript.stderr)
        assert.notMatch(transcript.stdout, controls)
        // The request's method, as the transcript shows it: ESC as ␛, BEL as ␇.
        assert.include(transcript.stdout, "← \u241b]52;c;b3duZWQ=\u2407\u241b[2J (answered -32601)")
        // The JSON report escapes them too, and still means the same strings.
        const { code, report, stdout } = yield* runClient(args)
        assert.strictEqual(code, 0)
        assert.notMatch(stdout, controls)
        assert.deepStrictEqual(report.serverRequests, ["\u001b]52;c;b3duZWQ=\u0007\u001b[2J"])
        assert.deepStrictEqual((report.result as ReadonlyArray<{ name: string }>).map((symbol) => symbol.name), [
          "\u001b[31mevil\u009b0m"
        ])
        assert.strictEqual(report.firstDiagnostics.count, 1)
      })
  )
})
