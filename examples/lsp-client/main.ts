/**
 * A generic LSP client for the command line: it spawns a language server with the kernel's child-process transport
 * (Content-Length framing), runs its whole lifecycle (`initialize`, `initialized`, `textDocument/didOpen`, a wait for
 * the document's first `textDocument/publishDiagnostics` as editors do, one request, `shutdown`, `exit`), answers every
 * request the server sends back, and reports timings, the server's requests, the diagnostics, the result and how the
 * process ended. Whatever the server chose (method names, answers, diagnostics, error messages) is printed through
 * `visible` / `visibleJson`: a control character is shown, never obeyed by the terminal.
 *
 *   examples/lsp-client/bin/lsp-client --server "vscode-json-language-server --stdio" --file package.json --json
 */
// Deep imports keep start-up short: the barrels would load every module of every package.
import { splitCommandLine } from "@lifeline/hermes-node/NodeSpawner"
import { visible, visibleJson } from "@lifeline/hermes-node/TerminalText"
import type * as Message from "@lifeline/jsonrpc/Message"
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Cancellation from "@lifeline/kernel/Cancellation"
import * as DurationText from "@lifeline/kernel/DurationText"
import * as Protocol from "@lifeline/kernel/Protocol"
import * as NodeChildProcess from "@lifeline/node/NodeChildProcess"
import * as NodeSignals from "@lifeline/node/NodeSignals"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ChildProcess from "effect/process/ChildProcess"
import * as References from "effect/References"
import * as Result from "effect/Result"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Url from "node:url"
import * as Util from "node:util"

const usage = `lsp-client: drive a language server over stdio through its whole lifecycle

  lsp-client --server "<command line>" --file PATH [--request documentSymbol|hover|completion] [--root DIR]
             [--line N --character N] [--wait DURATION] [--init-options JSON] [--settings JSON] [--json] [--verbose]

  --server        the server's command line, e.g. "vscode-json-language-server --stdio"
  --file          the document to open
  --request       what to ask about it (default documentSymbol)
  --line          0-based position of hover/completion (default: just inside the first string of the file)
  --character
  --root          the workspace folder (default: the file's directory)
  --wait          how long to wait after didOpen for the document's first textDocument/publishDiagnostics before
                  the request, as editors do: many servers analyse a document asynchronously and answer requests
                  about it with nothing until then (default 3s; 0 skips the wait)
  --init-options  initializationOptions of initialize, as JSON
  --settings      settings, as JSON: workspace/configuration is answered by section from them, and they are pushed
                  once with workspace/didChangeConfiguration
  --json          print one JSON report instead of the transcript

  A DURATION is ${DurationText.forms}.`

const { values: args } = Util.parseArgs({
  options: {
    server: { type: "string" },
    file: { type: "string" },
    request: { type: "string", default: "documentSymbol" },
    line: { type: "string" },
    character: { type: "string" },
    root: { type: "string" },
    wait: { type: "string", default: "3s" },
    "init-options": { type: "string" },
    settings: { type: "string" },
    json: { type: "boolean", default: false },
    verbose: { type: "boolean", default: false },
    help: { type: "boolean", default: false }
  }
})

/** One line on stderr (then the usage) and exit code 2: a mistake on the command line is no crash. */
const fail = (message: string): never => {
  process.stderr.write(`lsp-client: ${visible(message.replace(/\s*\n\s*/g, " "))}\n\n${usage}\n`)
  process.exit(2)
}

if (args.help) {
  process.stdout.write(usage + "\n")
  process.exit(0)
}
const requests = {
  documentSymbol: "textDocument/documentSymbol",
  hover: "textDocument/hover",
  completion: "textDocument/completion"
} as const
const requestKind = args.request as keyof typeof requests
if (!(requestKind in requests)) fail(`unknown --request ${args.request}`)
const serverLine = splitCommandLine(args.server ?? fail("--server is required"))
if (serverLine.length === 0) fail("--server is empty")
const file = Path.resolve(args.file ?? fail("--file is required"))
const root = Path.resolve(args.root ?? Path.dirname(file))
const parseJson = (name: string, text: string | undefined): unknown => {
  if (text === undefined) return undefined
  try {
    return JSON.parse(text)
  } catch (error) {
    return fail(`--${name} is not JSON: ${String(error)}`)
  }
}
/** A duration from the command line, as `DurationText.parse` reads it. */
const parseDuration = (name: string, text: string): Duration.Duration =>
  Result.getOrElse(DurationText.parse(text), (message) => fail(`--${name}: ${message}`))
const wait = parseDuration("wait", args.wait)
const initOptions = parseJson("init-options", args["init-options"])
const settings = parseJson("settings", args.settings)
let text = ""
try {
  text = Fs.readFileSync(file, "utf8")
} catch (error) {
  fail(`cannot read ${file}: ${String(error)}`)
}

const languageIds: Record<string, string> = {
  ".json": "json",
  ".jsonc": "jsonc",
  ".css": "css",
  ".scss": "scss",
  ".less": "less",
  ".html": "html",
  ".md": "markdown",
  ".sh": "shellscript",
  ".bash": "shellscript",
  ".js": "javascript",
  ".ts": "typescript"
}
const languageId = languageIds[Path.extname(file).toLowerCase()] ?? "plaintext"

/** Just inside the first string of the document: a JSON key, an HTML attribute, a quoted word. */
const defaultPosition = (): { readonly line: number; readonly character: number } => {
  const lines = text.split(/\r?\n/)
  for (let line = 0; line < lines.length; line++) {
    const character = lines[line]!.indexOf("\"")
    if (character >= 0) return { line, character: character + 1 }
  }
  return { line: 0, character: 0 }
}
const position = args.line !== undefined || args.character !== undefined
  ? { line: Number(args.line ?? 0), character: Number(args.character ?? 0) }
  : defaultPosition()

/** `workspace/configuration` by section: `a.b` is `settings.a.b`, or a flat `settings["a.b"]`; no section is all. */
const section = (name: string | undefined): unknown => {
  if (name === undefined || name === "") return settings ?? null
  if (typeof settings !== "object" || settings === null) return null
  const flat = (settings as Record<string, unknown>)[name]
  if (flat !== undefined) return flat
  let value: unknown = settings
  for (const key of name.split(".")) {
    if (typeof value !== "object" || value === null || !(key in value)) return null
    value = (value as Record<string, unknown>)[key]
  }
  return value
}

/** How long the server has to exit by itself after `exit` before it is stopped. */
const exitWait = "2 seconds"

const rootUri = Url.pathToFileURL(root).href
const uri = Url.pathToFileURL(file).href
const workspaceFolders = [{ uri: rootUri, name: Path.basename(root) }]

/** Whether `candidate` names the opened document: a server may re-encode the URI it was given (`%3A` for `:`). */
const isDocument = (candidate: unknown): boolean => {
  if (typeof candidate !== "string") return false
  if (candidate === uri) return true
  try {
    return decodeURIComponent(candidate) === decodeURIComponent(uri)
  } catch {
    return false
  }
}

/**
 * What became of the wait for the document's first diagnostics: they came (after `afterMs` from didOpen, with the
 * server's `count` diagnostics), none came within the bound (the requests were sent anyway), or no wait (`--wait 0`).
 */
type FirstDiagnostics =
  | {
    readonly outcome: "received"
    readonly afterMs: number
    readonly count: number
    readonly diagnostics: ReadonlyArray<unknown>
  }
  | { readonly outcome: "none came"; readonly afterMs: number; readonly boundMs: number; readonly note: string }
  | { readonly outcome: "not awaited" }

/** What the server asks the client, and the answer: an empty or default result where LSP defines one, else -32601. */
const answer = (method: string, params: unknown): Effect.Effect<unknown, RpcError.RpcError> => {
  switch (method) {
    case "workspace/configuration": {
      const items = (params as { readonly items?: ReadonlyArray<{ readonly section?: string }> } | undefined)?.items
      return Effect.succeed((items ?? []).map((item) => section(item.section)))
    }
    case "workspace/workspaceFolders":
      return Effect.succeed(workspaceFolders)
    case "client/registerCapability":
    case "client/unregisterCapability":
    case "window/workDoneProgress/create":
    case "window/showMessageRequest":
    case "workspace/codeLens/refresh":
    case "workspace/semanticTokens/refresh":
    case "workspace/inlayHint/refresh":
    case "workspace/inlineValue/refresh":
    case "workspace/diagnostic/refresh":
    case "workspace/foldingRange/refresh":
      return Effect.succeed(null)
    case "window/showDocument":
      return Effect.succeed({ success: false })
    case "workspace/applyEdit":
      return Effect.succeed({ applied: false, failureReason: "lsp-client does not edit files" })
    default:
      return Effect.fail(RpcError.RpcError.methodNotFound(method))
  }
}

const elapsed = (start: number) => Math.round((performance.now() - start) * 10) / 10

const program = Effect.gen(function*() {
  const started = performance.now()
  // Every transcript line goes through `visible`: method names and answers are the server's.
  const log = (line: string) => {
    if (!args.json) process.stdout.write(`${String(elapsed(started)).padStart(8)} ms  ${visible(line)}\n`)
  }
  const serverRequests: Array<string> = []
  const notifications: Array<string> = []
  // Completed by the first publishDiagnostics for the document, whenever it comes: before the wait starts, too.
  const diagnosed = yield* Deferred.make<ReadonlyArray<unknown>>()
  const [program, ...programArgs] = serverLine
  // The server runs in the root; a relative program path is meant from where the client was started.
  const executable = program!.includes("/") ? Path.resolve(program!) : program!
  const { child, peer } = yield* NodeChildProcess.makePeer({
    command: ChildProcess.make(executable, programArgs, { cwd: root }),
    protocol: Protocol.make({ cancellation: Cancellation.lsp }),
    handlers: {},
    requestTimeout: "15 seconds",
    stderrLogLevel: args.verbose ? "Info" : "None",
    stop: { exitGrace: "1 second", killGrace: "1 second", verifyTimeout: "1 second" },
    onUnknownRequest: (method, params) => {
      serverRequests.push(method)
      return answer(method, params).pipe(
        Effect.tap(() => Effect.sync(() => log(`← ${method} (answered)`))),
        Effect.tapError(() => Effect.sync(() => log(`← ${method} (answered -32601)`)))
      )
    },
    onUnknownNotification: (method, params) =>
      Effect.suspend(() => {
        notifications.push(method)
        if (args.verbose) log(`← ${method}`)
        if (method !== "textDocument/publishDiagnostics") return Effect.void
        const published = params as { readonly uri?: unknown; readonly diagnostics?: unknown } | undefined
        if (!isDocument(published?.uri)) return Effect.void
        const diagnostics = Array.isArray(published?.diagnostics) ? published.diagnostics : []
        return Effect.asVoid(Deferred.succeed(diagnosed, diagnostics))
      })
  })
  log(`spawned ${serverLine.join(" ")} (pid ${child.pid})`)

  const initializeStart = performance.now()
  const initialized = yield* peer.callUntyped("initialize", {
    processId: process.pid,
    clientInfo: { name: "lifeline-lsp-client", version: "0.1.0" },
    locale: "en",
    rootPath: root,
    rootUri,
    workspaceFolders,
    ...(initOptions === undefined ? {} : { initializationOptions: initOptions }),
    capabilities: {
      workspace: {
        configuration: true,
        workspaceFolders: true,
        applyEdit: false,
        didChangeConfiguration: { dynamicRegistration: true }
      },
      window: { workDoneProgress: true, showMessage: {}, showDocument: { support: false } },
      textDocument: {
        synchronization: { dynamicRegistration: true, didSave: false },
        documentSymbol: { dynamicRegistration: true, hierarchicalDocumentSymbolSupport: true },
        formatting: { dynamicRegistration: true },
        rangeFormatting: { dynamicRegistration: true },
        hover: { dynamicRegistration: true, contentFormat: ["markdown", "plaintext"] },
        completion: {
          dynamicRegistration: true,
          completionItem: { snippetSupport: false, documentationFormat: ["markdown", "plaintext"] }
        },
        publishDiagnostics: { relatedInformation: true }
      },
      general: { positionEncodings: ["utf-16"] }
    }
  } as Message.Params)
  const initializeMs = elapsed(initializeStart)
  const serverInfo = (initialized as { readonly serverInfo?: unknown } | null)?.serverInfo ?? null
  log(`→ initialize: ${initializeMs} ms${serverInfo === null ? "" : ` (${visibleJson(serverInfo)})`}`)
  yield* peer.notifyUntyped("initialized", {})
  if (settings !== undefined) {
    yield* peer.notifyUntyped("workspace/didChangeConfiguration", { settings } as Message.Params)
  }
  const openedAt = performance.now()
  yield* peer.notifyUntyped("textDocument/didOpen", { textDocument: { uri, languageId, version: 1, text } })
  log(`→ initialized, didOpen ${Path.relative(process.cwd(), file) || file} (${languageId})`)

  // Editors ask about a document once the server has analysed it, and the first publishDiagnostics says it has: a
  // server that analyses asynchronously (bash-language-server) answers a request sent right after didOpen with
  // nothing. A server that publishes no diagnostics costs the bound, and the report says so.
  const boundMs = Duration.toMillis(wait)
  let firstDiagnostics: FirstDiagnostics = { outcome: "not awaited" }
  if (boundMs > 0) {
    const came = yield* Effect.timeoutOption(Deferred.await(diagnosed), wait)
    const afterMs = elapsed(openedAt)
    firstDiagnostics = Option.match(came, {
      onSome: (diagnostics) => ({ outcome: "received", afterMs, count: diagnostics.length, diagnostics }),
      onNone: () => ({
        outcome: "none came",
        afterMs,
        boundMs,
        note: `no textDocument/publishDiagnostics for the document within ${boundMs} ms; the request was sent anyway`
      })
    })
    log(
      firstDiagnostics.outcome === "received"
        ? `← first publishDiagnostics after ${afterMs} ms (${firstDiagnostics.count} diagnostics)`
        : `   none came: no publishDiagnostics within ${boundMs} ms, the request is sent anyway`
    )
  }

  const method = requests[requestKind]
  const requestStart = performance.now()
  const result = yield* peer.callUntyped(method, {
    textDocument: { uri },
    ...(requestKind === "documentSymbol" ? {} : { position })
  })
  const requestMs = elapsed(requestStart)
  log(`→ ${method}: ${requestMs} ms`)

  const shutdownStart = performance.now()
  yield* peer.callUntyped("shutdown")
  const shutdownAnsweredMs = elapsed(shutdownStart)
  yield* peer.notifyUntyped("exit")
  // LSP: the server exits by itself after `exit`. One that does not is stopped: end of stdin, SIGTERM, SIGKILL.
  const exitedAfterExit = Option.isSome(yield* Effect.timeoutOption(child.exit, exitWait))
  const stop = yield* child.stop
  const shutdownMs = elapsed(shutdownStart)
  log(
    `→ shutdown answered in ${shutdownAnsweredMs} ms; ${
      exitedAfterExit ? "exited after exit" : `did not exit after exit, stopped: ${stop.endedBy}`
    }, ${shutdownMs} ms`
  )
  const exit = stop.exit === undefined ? null : { code: stop.exit.exitCode, signal: stop.exit.signal }
  return {
    ok: exitedAfterExit && exit?.code === 0,
    server: serverLine,
    file,
    request: method,
    ...(requestKind === "documentSymbol" ? {} : { position }),
    initializeMs,
    requestMs,
    firstDiagnostics,
    shutdownMs,
    shutdownAnsweredMs,
    serverInfo,
    serverRequests,
    notifications,
    result,
    exitedAfterExit,
    stop: { endedBy: stop.endedBy, descendants: stop.descendants },
    exit,
    stderrTail: yield* child.stderrTail,
    elapsedMs: elapsed(started)
  }
}).pipe(Effect.scoped)

/** JSON on stdout, through `visibleJson`: the report holds the server's answers, diagnostics and stderr. */
const report = (value: unknown) => {
  if (args.json) {
    process.stdout.write(visibleJson(value, 2) + "\n")
  } else {
    process.stdout.write(visibleJson(value, 2).split("\n").map((line) => `  ${line}`).join("\n") + "\n")
  }
}

NodeSignals.runMain(
  program.pipe(
    Effect.flatMap((done) =>
      Effect.sync(() => {
        if (args.json) {
          report(done)
        } else {
          process.stdout.write(`\n${done.ok ? "✔" : "✘"} ${done.request} result:\n`)
          report(done.result)
          process.stdout.write(`server requests: ${visible(done.serverRequests.join(", ")) || "none"}\n`)
          process.stdout.write(
            `first diagnostics: ${
              done.firstDiagnostics.outcome === "received"
                ? `after ${done.firstDiagnostics.afterMs} ms (${done.firstDiagnostics.count})`
                : done.firstDiagnostics.outcome === "none came"
                ? `none came within ${done.firstDiagnostics.boundMs} ms`
                : "not awaited"
            }\n`
          )
          process.stdout.write(`exit: ${visibleJson(done.exit)} (${done.stop.endedBy})\n`)
        }
        return done.ok
      })
    ),
    Effect.catch((error) =>
      Effect.sync(() => {
        const message = typeof error === "object" && error !== null && "message" in error
          ? String(error.message)
          : String(error)
        if (args.json) report({ ok: false, error: { _tag: (error as { _tag?: string })._tag ?? "Error", message } })
        else process.stdout.write(`\n✘ ${visible(message)}\n`)
        return false
      })
    ),
    // A report that is not ok is the run's outcome, not a failure of the program: exit code 1, nothing logged.
    Effect.flatMap((ok) =>
      Effect.sync(() => {
        if (!ok) process.exitCode = 1
      })
    ),
    Effect.provideService(References.MinimumLogLevel, args.verbose ? "Debug" : "Warn")
  )
)
