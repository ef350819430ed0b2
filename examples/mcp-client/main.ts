/**
 * A generic MCP client for the command line, over stdio with newline-delimited JSON: it spawns a server with the
 * kernel's child-process transport, runs `initialize` and `notifications/initialized`, lists the tools, calls one,
 * starts a slow call and cancels it with `notifications/cancelled`, then closes the server as the MCP stdio transport
 * says (end of stdin, then SIGTERM, then SIGKILL, each bounded), and reports timings, whether the client's own steps
 * succeeded (`ok`), and, apart from that, what the server needed to exit (`serverExit`). Whatever the server chose
 * (tool names, results, notifications, error messages) is printed through `visible` / `visibleJson`: a control
 * character is shown, never obeyed by the terminal.
 *
 *   examples/mcp-client/bin/mcp-client --server "node server.js" --tool echo --arguments '{"text":"hi"}' --json
 */
// Deep imports keep start-up short: the barrels would load every module of every package.
import { splitCommandLine } from "@lifeline/hermes-node/NodeSpawner"
import { visible, visibleJson } from "@lifeline/hermes-node/TerminalText"
import * as Framing from "@lifeline/jsonrpc/Framing"
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
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as ChildProcess from "effect/process/ChildProcess"
import * as References from "effect/References"
import * as Result from "effect/Result"
import * as Path from "node:path"
import * as Url from "node:url"
import * as Util from "node:util"

const usage = `mcp-client: drive an MCP server over stdio through its whole lifecycle

  mcp-client --server "<command line>" [--tool NAME] [--arguments JSON] [--slow-tool NAME] [--slow-arguments JSON]
             [--cancel-after DURATION] [--root DIR]... [--roots-wait DURATION] [--close-timeout DURATION]
             [--json] [--verbose]

  --server          the server's command line
  --tool            the tool to call (default: the first one listed); --arguments its arguments (default {})
  --slow-tool       a tool to call and cancel with notifications/cancelled (default: none)
  --slow-arguments  its arguments (default {})
  --cancel-after    how long the slow call runs before it is cancelled (default 200ms)
  --root            a root to offer the server (repeatable): the client then declares the roots capability and
                    answers roots/list with them; without --root it declares no roots
  --roots-wait      with --root: how long to wait, before closing, for the server's first roots/list if it has not
                    asked yet, so that the close does not strand the server's request (default 1s; 0: no wait)
  --close-timeout   how long each step of the close may take: end of stdin, SIGTERM, SIGKILL (default 1s)
  --json            print one JSON report instead of the transcript

  A DURATION is ${DurationText.forms}.
  Exit code 0 when the client's own steps succeeded (ok), whatever the server needed to exit (see serverExit).`

const { values: args } = Util.parseArgs({
  options: {
    server: { type: "string" },
    tool: { type: "string" },
    arguments: { type: "string", default: "{}" },
    "slow-tool": { type: "string" },
    "slow-arguments": { type: "string", default: "{}" },
    "cancel-after": { type: "string", default: "200ms" },
    root: { type: "string", multiple: true },
    "roots-wait": { type: "string", default: "1s" },
    "close-timeout": { type: "string", default: "1s" },
    json: { type: "boolean", default: false },
    verbose: { type: "boolean", default: false },
    help: { type: "boolean", default: false }
  }
})

/** One line on stderr (then the usage) and exit code 2: a mistake on the command line is no crash. */
const fail = (message: string): never => {
  process.stderr.write(`mcp-client: ${visible(message.replace(/\s*\n\s*/g, " "))}\n\n${usage}\n`)
  process.exit(2)
}

if (args.help) {
  process.stdout.write(usage + "\n")
  process.exit(0)
}
const serverLine = splitCommandLine(args.server ?? fail("--server is required"))
if (serverLine.length === 0) fail("--server is empty")
const parseJson = (name: string, text: string): Record<string, unknown> => {
  try {
    const value: unknown = JSON.parse(text)
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>
  } catch {
    // reported below
  }
  return fail(`--${name} is not a JSON object`)
}
const toolArguments = parseJson("arguments", args.arguments)
const slowArguments = parseJson("slow-arguments", args["slow-arguments"])
/** A duration from the command line, as `DurationText.parse` reads it. */
const duration = (name: string, text: string): Duration.Duration =>
  Result.getOrElse(DurationText.parse(text), (message) => fail(`--${name}: ${message}`))
const cancelAfter = duration("cancel-after", args["cancel-after"])
const closeTimeout = duration("close-timeout", args["close-timeout"])
const rootsWait = duration("roots-wait", args["roots-wait"])
const roots = (args.root ?? []).map((dir) => {
  const path = Path.resolve(dir)
  return { uri: Url.pathToFileURL(path).href, name: Path.basename(path) }
})

/**
 * What a server may ask a client: `ping` and `roots/list` have answers; sampling and elicitation are not offered.
 * `roots/list` is answered with the `--root`s even when none were given (then no roots capability was declared, and
 * a server should not have asked).
 */
const answer = (method: string): Effect.Effect<unknown, RpcError.RpcError> => {
  switch (method) {
    case "ping":
      return Effect.succeed({})
    case "roots/list":
      return Effect.succeed({ roots })
    default:
      return Effect.fail(RpcError.RpcError.methodNotFound(method))
  }
}

/**
 * What the server needed to exit once the client had closed it: the end of its input (`eof`, as the MCP stdio transport
 * asks), SIGTERM or SIGKILL; `none` when it had already exited before the close, `unkillable` when even SIGKILL was
 * not followed by an exit.
 */
type Needed = "eof" | "SIGTERM" | "SIGKILL" | "none" | "unkillable"

const neededOf = (endedBy: NodeChildProcess.StopStep): Needed => {
  switch (endedBy) {
    case "Exited":
      return "none"
    case "Shutdown":
    case "EndOfInput":
      return "eof"
    case "Terminate":
      return "SIGTERM"
    case "Kill":
      return "SIGKILL"
    case "Unkillable":
      return "unkillable"
  }
}

const elapsed = (start: number) => Math.round((performance.now() - start) * 10) / 10

const program = Effect.gen(function*() {
  const started = performance.now()
  // Every transcript line goes through `visible`: method names, tool names and results are the server's.
  const log = (line: string) => {
    if (!args.json) process.stdout.write(`${String(elapsed(started)).padStart(8)} ms  ${visible(line)}\n`)
  }
  const serverRequests: Array<string> = []
  const notifications: Array<{ readonly method: string; readonly params: unknown }> = []
  const notified = yield* Deferred.make<void>()
  const rootsAsked = yield* Deferred.make<void>()
  let rootsAskedMs: number | null = null
  const [program, ...programArgs] = serverLine
  const executable = program!.includes("/") ? Path.resolve(program!) : program!
  const { child, peer } = yield* NodeChildProcess.makePeer({
    command: ChildProcess.make(executable, programArgs),
    // MCP's `notifications/cancelled`; a request the server cancels gets no answer.
    protocol: Protocol.make({ cancellation: Cancellation.mcp }),
    handlers: {},
    framing: Framing.ndjson,
    requestTimeout: "15 seconds",
    stderrLogLevel: args.verbose ? "Info" : "None",
    stop: { exitGrace: closeTimeout, killGrace: closeTimeout, verifyTimeout: closeTimeout },
    onUnknownRequest: (method) => {
      serverRequests.push(method)
      log(`← ${method}`)
      const answered = answer(method)
      if (method === "roots/list" && rootsAskedMs === null) rootsAskedMs = elapsed(started)
      return Effect.tap(answered, () => method === "roots/list" ? Deferred.succeed(rootsAsked, void 0) : Effect.void)
    },
    onUnknownNotification: (method, params) =>
      Effect.sync(() => {
        notifications.push({ method, params })
        log(`← ${method}${params === undefined ? "" : ` ${visibleJson(params)}`}`)
      }).pipe(Effect.andThen(Deferred.succeed(notified, void 0)), Effect.asVoid)
  })
  log(`spawned ${serverLine.join(" ")} (pid ${child.pid})`)

  const initializeStart = performance.now()
  const initialized = (yield* peer.callUntyped("initialize", {
    protocolVersion: "2025-06-18",
    // Only what the client offers: a server told that the client has roots asks for them, maybe later (the reference
    // server, 350 ms after `notifications/initialized`), and a session closed before it asks leaves the request
    // pending in the server, which then does not exit at the end of its input.
    capabilities: roots.length > 0 ? { roots: { listChanged: false } } : {},
    clientInfo: { name: "lifeline-mcp-client", version: "0.1.0" }
  })) as { readonly protocolVersion?: string; readonly serverInfo?: unknown } | null
  const initializeMs = elapsed(initializeStart)
  log(`→ initialize: ${initializeMs} ms, protocol ${initialized?.protocolVersion}`)
  yield* peer.notifyUntyped("notifications/initialized")

  const listed = (yield* peer.callUntyped("tools/list", {})) as {
    readonly tools?: ReadonlyArray<{ readonly name: string }>
  }
  const tools = (listed.tools ?? []).map((tool) => tool.name)
  log(`→ tools/list: ${tools.join(", ")}`)

  const tool = args.tool ?? tools[0]
  let call: { readonly name: string; readonly ms: number; readonly result: unknown } | null = null
  if (tool !== undefined) {
    const callStart = performance.now()
    const result = yield* peer.callUntyped("tools/call", { name: tool, arguments: toolArguments } as Message.Params)
    call = { name: tool, ms: elapsed(callStart), result }
    log(`→ tools/call ${tool}: ${call.ms} ms ${visibleJson(result)}`)
  }

  let cancelled: {
    readonly name: string
    readonly afterMs: number
    readonly outcome: "Cancelled" | "Completed" | "Failed"
    readonly serverNotifiedMs: number | null
  } | null = null
  const slowTool = args["slow-tool"]
  if (slowTool !== undefined) {
    const slowStart = performance.now()
    const seen = notifications.length
    const fiber = yield* Effect.forkChild(
      peer.callUntyped("tools/call", { name: slowTool, arguments: slowArguments } as Message.Params)
    )
    yield* Effect.sleep(cancelAfter)
    // Interrupting the caller abandons the call: the kernel sends notifications/cancelled with its id.
    yield* Fiber.interrupt(fiber)
    const exit = yield* Fiber.await(fiber)
    const afterMs = elapsed(slowStart)
    const outcome = Exit.hasInterrupts(exit) ? "Cancelled" : Exit.isSuccess(exit) ? "Completed" : "Failed"
    // A server may log the cancellation; wait a little for any notification it sends about it.
    const cancelledAt = performance.now()
    yield* Effect.timeoutOption(
      Effect.repeat(Deferred.await(notified), { until: () => notifications.length > seen }),
      "500 millis"
    )
    const serverNotifiedMs = notifications.length > seen ? elapsed(cancelledAt) : null
    cancelled = { name: slowTool, afterMs, outcome, serverNotifiedMs }
    log(`→ tools/call ${slowTool}: ${outcome} after ${afterMs} ms`)
  }

  // A server told that the client has roots may ask for them at any time after `notifications/initialized` (the
  // reference server: 350 ms later). A close that comes first strands the request, which can no longer be answered,
  // and a server on the MCP SDK keeps it pending, with its 60 s timer alive, so it does not exit at the end of its
  // input. A session as short as this one's waits, bounded, for the request an editor's longer session would answer.
  if (roots.length > 0 && rootsAskedMs === null && Duration.toMillis(rootsWait) > 0) {
    const asked = yield* Effect.timeoutOption(Deferred.await(rootsAsked), rootsWait)
    log(Option.isNone(asked) ? `   no roots/list within ${Duration.format(rootsWait)}` : `   roots/list answered`)
  }

  const closeStart = performance.now()
  // When the exit is seen, measured from the start of the close (the peer is closed and stdin ends within ms).
  const exitSeen = yield* Effect.forkChild(Effect.map(child.exit, () => elapsed(closeStart)))
  const stop = yield* child.stop
  const closeMs = elapsed(closeStart)
  const exit = stop.exit === undefined ? null : { code: stop.exit.exitCode, signal: stop.exit.signal }
  // The exit has happened unless even SIGKILL failed (`Unkillable`): then there is nothing to wait for.
  const exitAfter = stop.exit === undefined ? null : yield* Fiber.join(exitSeen)
  const serverExit = {
    code: exit?.code ?? null,
    signal: exit?.signal ?? null,
    after: stop.endedBy === "Exited" ? null : exitAfter,
    needed: neededOf(stop.endedBy)
  }
  log(`→ closed: the server needed ${serverExit.needed}, exit ${visibleJson(exit)} ${serverExit.after} ms after`)
  const stats = yield* peer.stats
  return {
    // The client's own steps: initialize and tools/list answered (else the program failed before this), the call
    // succeeded, the slow call (if any) was cancelled, and the server was closed by the end of its input. What the
    // server then needed to exit is `serverExit`, apart.
    ok: call !== null && (cancelled === null || cancelled.outcome === "Cancelled"),
    serverExit,
    server: serverLine,
    protocolVersion: initialized?.protocolVersion ?? null,
    serverInfo: initialized?.serverInfo ?? null,
    initializeMs,
    tools,
    call,
    cancelled,
    roots: { declared: roots.length > 0, askedAtMs: rootsAskedMs },
    serverRequests,
    notifications,
    lateResponses: stats.lateResponses,
    closeMs,
    stop: { endedBy: stop.endedBy, descendants: stop.descendants },
    exit,
    elapsedMs: elapsed(started)
  }
}).pipe(Effect.scoped)

NodeSignals.runMain(
  program.pipe(
    Effect.flatMap((done) =>
      Effect.sync(() => {
        if (args.json) process.stdout.write(visibleJson(done, 2) + "\n")
        else {
          process.stdout.write(
            `\n${done.ok ? "✔ ok" : "✘ not ok"}; the server exited on ${
              done.serverExit.needed === "eof" ? "the end of its input" : done.serverExit.needed
            } (${visibleJson(done.exit)}, ${done.serverExit.after} ms after the close)\n`
          )
        }
        return done.ok
      })
    ),
    Effect.catch((error) =>
      Effect.sync(() => {
        const message = typeof error === "object" && error !== null && "message" in error
          ? String(error.message)
          : String(error)
        if (args.json) {
          process.stdout.write(
            visibleJson({ ok: false, error: { _tag: (error as { _tag?: string })._tag ?? "Error", message } }) + "\n"
          )
        } else {
          process.stdout.write(`\n✘ ${visible(message)}\n`)
        }
        return false
      })
    ),
    // runMain exits 1 on a failure (and logs it on stderr), whatever `process.exitCode` says.
    Effect.flatMap((ok) => ok ? Effect.void : Effect.fail("the report is not ok")),
    Effect.provideService(References.MinimumLogLevel, args.verbose ? "Debug" : "Warn")
  )
)
