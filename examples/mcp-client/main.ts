/**
 * A generic MCP client for the command line, over stdio with newline-delimited JSON: it spawns a server with the
 * kernel's child-process transport, runs `initialize` and `notifications/initialized`, lists the tools, calls one,
 * starts a slow call and cancels it with `notifications/cancelled`, then closes the server as the MCP stdio transport
 * says (end of stdin, then SIGTERM, then SIGKILL, each bounded), and reports timings and how the process ended.
 *
 *   examples/mcp-client/bin/mcp-client --server "node server.js" --tool echo --arguments '{"text":"hi"}' --json
 */
// Deep imports keep start-up short: the barrels would load every module of every package.
import * as Framing from "@lifeline/jsonrpc/Framing"
import type * as Message from "@lifeline/jsonrpc/Message"
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import type * as Cancellation from "@lifeline/kernel/Cancellation"
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
import * as Path from "node:path"
import * as Util from "node:util"
import { splitCommandLine } from "../hermes-node.js"

const usage = `mcp-client: drive an MCP server over stdio through its whole lifecycle

  mcp-client --server "<command line>" [--tool NAME] [--arguments JSON] [--slow-tool NAME] [--slow-arguments JSON]
             [--cancel-after DURATION] [--close-timeout DURATION] [--json] [--verbose]

  --server          the server's command line
  --tool            the tool to call (default: the first one listed); --arguments its arguments (default {})
  --slow-tool       a tool to call and cancel with notifications/cancelled (default: none)
  --slow-arguments  its arguments (default {})
  --cancel-after    how long the slow call runs before it is cancelled (default 200 millis)
  --close-timeout   how long each step of the close may take: end of stdin, SIGTERM, SIGKILL (default 1 second)
  --json            print one JSON report instead of the transcript`

const { values: args } = Util.parseArgs({
  options: {
    server: { type: "string" },
    tool: { type: "string" },
    arguments: { type: "string", default: "{}" },
    "slow-tool": { type: "string" },
    "slow-arguments": { type: "string", default: "{}" },
    "cancel-after": { type: "string", default: "200 millis" },
    "close-timeout": { type: "string", default: "1 second" },
    json: { type: "boolean", default: false },
    verbose: { type: "boolean", default: false },
    help: { type: "boolean", default: false }
  }
})

const fail = (message: string): never => {
  process.stderr.write(`mcp-client: ${message}\n\n${usage}\n`)
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
const duration = (name: string, text: string): Duration.Duration =>
  Option.getOrElse(Duration.fromInput(text as Duration.Input), () => fail(`--${name} is not a duration: ${text}`))
const cancelAfter = duration("cancel-after", args["cancel-after"])
const closeTimeout = duration("close-timeout", args["close-timeout"])

/** MCP spells cancellation `notifications/cancelled` with `{ requestId, reason? }`; a cancelled request gets no answer. */
const cancellation: Cancellation.Spelling = {
  method: "notifications/cancelled",
  encode: (id) => ({ requestId: id, reason: "cancelled by mcp-client" }),
  answerCancelled: false,
  decode: (params) => {
    const id = (params as { readonly requestId?: unknown } | undefined)?.requestId
    return typeof id === "string" || typeof id === "number" ? id : undefined
  }
}

/** What a server may ask a client: `ping` and `roots/list` have answers; sampling and elicitation are not offered. */
const answer = (method: string): Effect.Effect<unknown, RpcError.RpcError> => {
  switch (method) {
    case "ping":
      return Effect.succeed({})
    case "roots/list":
      return Effect.succeed({ roots: [] })
    default:
      return Effect.fail(RpcError.RpcError.methodNotFound(method))
  }
}

const elapsed = (start: number) => Math.round((performance.now() - start) * 10) / 10

const program = Effect.gen(function*() {
  const started = performance.now()
  const log = (line: string) => {
    if (!args.json) process.stdout.write(`${String(elapsed(started)).padStart(8)} ms  ${line}\n`)
  }
  const serverRequests: Array<string> = []
  const notifications: Array<{ readonly method: string; readonly params: unknown }> = []
  const notified = yield* Deferred.make<void>()
  const [program, ...programArgs] = serverLine
  const executable = program!.includes("/") ? Path.resolve(program!) : program!
  const { child, peer } = yield* NodeChildProcess.makePeer({
    command: ChildProcess.make(executable, programArgs),
    protocol: Protocol.make({}),
    handlers: {},
    framing: Framing.ndjson,
    cancellation,
    requestTimeout: "15 seconds",
    stderrLogLevel: args.verbose ? "Info" : "None",
    stop: { exitTimeout: closeTimeout, terminateTimeout: closeTimeout, killTimeout: closeTimeout },
    onUnknownRequest: (method) => {
      serverRequests.push(method)
      log(`← ${method}`)
      return answer(method)
    },
    onUnknownNotification: (method, params) =>
      Effect.sync(() => {
        notifications.push({ method, params })
        log(`← ${method} ${JSON.stringify(params)}`)
      }).pipe(Effect.andThen(Deferred.succeed(notified, void 0)), Effect.asVoid)
  })
  log(`spawned ${serverLine.join(" ")} (pid ${child.pid})`)

  const initializeStart = performance.now()
  const initialized = (yield* peer.callUntyped("initialize", {
    protocolVersion: "2025-06-18",
    capabilities: { roots: { listChanged: false } },
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
    log(`→ tools/call ${tool}: ${call.ms} ms ${JSON.stringify(result)}`)
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

  const closeStart = performance.now()
  const stop = yield* child.stop
  const closeMs = elapsed(closeStart)
  const exit = stop.exit === undefined ? null : { code: stop.exit.exitCode, signal: stop.exit.signal }
  log(`→ closed: ${stop.endedBy} after ${closeMs} ms, exit ${JSON.stringify(exit)}`)
  const stats = yield* peer.stats
  return {
    ok: call !== null && (cancelled === null || cancelled.outcome === "Cancelled") && stop.endedBy === "EndOfInput",
    server: serverLine,
    protocolVersion: initialized?.protocolVersion ?? null,
    serverInfo: initialized?.serverInfo ?? null,
    initializeMs,
    tools,
    call,
    cancelled,
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
        if (args.json) process.stdout.write(JSON.stringify(done, null, 2) + "\n")
        else process.stdout.write(`\n${done.ok ? "✔" : "✘"} ${done.ok ? "ok" : "not ok"}\n`)
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
            JSON.stringify({ ok: false, error: { _tag: (error as { _tag?: string })._tag ?? "Error", message } }) + "\n"
          )
        } else {
          process.stdout.write(`\n✘ ${message}\n`)
        }
        return false
      })
    ),
    // runMain exits 1 on a failure (and logs it on stderr), whatever `process.exitCode` says.
    Effect.flatMap((ok) => ok ? Effect.void : Effect.fail("the report is not ok")),
    Effect.provideService(References.MinimumLogLevel, args.verbose ? "Debug" : "Warn")
  )
)
