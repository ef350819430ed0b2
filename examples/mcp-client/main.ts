/**
 * A generic MCP client for the command line, over stdio with newline-delimited JSON: it spawns a server under the
 * supervision `@lifeline/mcp` runs on (`NodeSupervisedSpawner`: its own process group, a journal, the servers of dead
 * hosts swept at start), opens the conversation as MCP 2026-07-28 says (`server/discover`, every request naming its
 * version in `_meta`) and falls back to `initialize` and `notifications/initialized` for a server that speaks up to
 * 2025-11-25 (`@lifeline/mcp`'s `Negotiation`), lists the tools, calls one, starts a slow call and cancels it with
 * `notifications/cancelled`, then closes the server as the MCP stdio transport says (end of stdin, then SIGTERM, then
 * SIGKILL, each bounded), and reports the negotiated version, timings, whether the client's own steps succeeded
 * (`ok`), and, apart from that, what the server needed to exit (`serverExit`). Whatever the server chose (tool names,
 * results, notifications, error messages, its stderr) is validated and bounded (results.ts), and printed through
 * `visible` / `visibleJson`: a control character is shown, never obeyed by the terminal.
 *
 *   examples/mcp-client/bin/mcp-client --server "node server.js" --tool echo --arguments '{"text":"hi"}' --json
 */
// Deep imports keep start-up short: the barrels would load every module of every package.
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import { visible, visibleJson } from "@lifeline/hermes-node/TerminalText"
import * as Framing from "@lifeline/jsonrpc/Framing"
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Cancellation from "@lifeline/kernel/Cancellation"
import * as Peer from "@lifeline/kernel/Peer"
import * as PeerError from "@lifeline/kernel/PeerError"
import * as Protocol from "@lifeline/kernel/Protocol"
import * as Negotiation from "@lifeline/mcp/Negotiation"
import * as NodeSignals from "@lifeline/node/NodeSignals"
import * as NodeSupervisedSpawner from "@lifeline/node/NodeSupervisedSpawner"
import type * as StopSequence from "@lifeline/process/StopSequence"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Path from "node:path"
import * as Options from "./options.js"
import * as Results from "./results.js"
import * as Server from "./server.js"

const {
  args,
  cancelAfter,
  closeTimeout,
  discoverTimeout,
  mode,
  roots,
  rootsWait,
  serverLine,
  slowArguments,
  toolArguments
} = Options

/**
 * What a server may ask a client, up to 2025-11-25: `ping` and `roots/list` have answers; sampling and elicitation
 * are not offered. `roots/list` is answered with the `--root`s even when none were given (then no roots capability
 * was declared, and a server should not have asked). Under 2026-07-28 a server asks nothing on stdio (it puts what it
 * needs in a result, `input_required`): every request is refused.
 */
const answer = (method: string, era: "modern" | "legacy" | undefined): Effect.Effect<unknown, RpcError.RpcError> => {
  if (era === "modern") {
    return Effect.fail(
      new RpcError.RpcError({ code: -32601, message: `${method}: no server-to-client requests under 2026-07-28` })
    )
  }
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

const neededOf = (endedBy: StopSequence.Step): Needed => {
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

/** How many of the server's notifications and requests the report keeps (the rest are counted). */
const maxKept = 100

const keep = <A>(list: Array<A>, item: A) => {
  if (list.length < maxKept) list.push(item)
}

const program = Effect.gen(function*() {
  const started = performance.now()
  // Every transcript line goes through `visible`: method names, tool names and results are the server's.
  const log = (line: string) => {
    if (!args.json) process.stdout.write(`${String(elapsed(started)).padStart(8)} ms  ${visible(line)}\n`)
  }
  const serverRequests: Array<string> = []
  const notifications: Array<{ readonly method: string; readonly params: unknown }> = []
  let notificationCount = 0
  let serverRequestCount = 0
  const notified = yield* Deferred.make<void>()
  const rootsAsked = yield* Deferred.make<void>()
  let rootsAskedMs: number | null = null
  // Set once the conversation is open: what the server may ask depends on the version.
  const opened: { era?: "modern" | "legacy" } = {}
  const [program, ...programArgs] = serverLine
  const executable = program!.includes("/") ? Path.resolve(program!) : program!
  const negotiateStart = performance.now()
  /** Spawns the server, starts the peer on its stdio and negotiates; a server that fails it is closed at once. */
  const connect = (mode: Negotiation.Options["mode"]) =>
    Effect.gen(function*() {
      const server = yield* Server.spawn(executable, programArgs, {
        exitGrace: closeTimeout,
        killGrace: closeTimeout,
        onStderrLine: args.verbose ? (line) => process.stderr.write(`server: ${visible(line)}\n`) : undefined
      })
      const peer = yield* Peer.make({
        // MCP's `notifications/cancelled`; a request the server cancels gets no answer.
        protocol: Protocol.make({ cancellation: Cancellation.mcp }),
        transport: server.transport,
        handlers: {},
        framing: Framing.ndjson,
        limits: { maxBodyBytes: Results.maxMessageBytes },
        requestTimeout: "15 seconds",
        onUnknownRequest: (method) => {
          serverRequestCount++
          keep(serverRequests, method)
          log(`← ${method}`)
          const answered = answer(method, opened.era)
          if (method === "roots/list" && rootsAskedMs === null) rootsAskedMs = elapsed(started)
          return Effect.tap(
            answered,
            () => method === "roots/list" ? Deferred.succeed(rootsAsked, void 0) : Effect.void
          )
        },
        onUnknownNotification: (method, params) =>
          Effect.sync(() => {
            notificationCount++
            keep(notifications, { method, params })
            log(`← ${method}${params === undefined ? "" : ` ${visibleJson(params)}`}`)
          }).pipe(Effect.andThen(Deferred.succeed(notified, void 0)), Effect.asVoid)
      })
      log(`spawned ${serverLine.join(" ")} (pid ${server.pid})`)
      const session = yield* Negotiation.negotiate(peer, {
        clientInfo: { name: "lifeline-mcp-client", version: "0.2.0" },
        // Only what the client offers: a server told that the client has roots asks for them, maybe later (the
        // reference server, 350 ms after `notifications/initialized`), and a session closed before it asks leaves the
        // request pending in the server, which then does not exit at the end of its input.
        capabilities: roots.length > 0 ? { roots: { listChanged: false } } : {},
        mode,
        discoverTimeout
      }).pipe(Effect.tapError(() => server.close))
      return { server, peer, session }
    })
  // Some older servers exit on a first request they do not know: such a server is started again and spoken to with
  // `initialize` alone.
  let restartedAfterProbe = false
  const { peer, server, session } = yield* connect(mode).pipe(
    Effect.catchIf(
      (error) => mode === "auto" && error instanceof Negotiation.NegotiationError && error.reason === "ClosedOnProbe",
      () => {
        restartedAfterProbe = true
        log("   the server ended on server/discover: starting it again for initialize")
        return connect("legacy")
      }
    )
  )
  opened.era = session.era
  const negotiationMs = elapsed(negotiateStart)
  const how = session.probe._tag === "Answered"
    ? "server/discover"
    : session.probe._tag === "AnsweredOnRetry"
    ? `server/discover, asked again after initialize was refused (-32022)`
    : session.probe._tag === "Skipped"
    ? "initialize"
    : `initialize, after server/discover ${
      session.probe._tag === "Refused"
        ? `was refused (${session.probe.code} ${session.probe.message})`
        : `got no answer in ${session.probe.timeoutMillis} ms`
    }`
  log(`→ ${how}: ${negotiationMs} ms, protocol ${session.protocolVersion}`)

  const listed = yield* Effect.flatMap(peer.callUntyped("tools/list", session.params({})), Results.decodeListTools)
  const tools = listed.tools.map((tool) => tool.name)
  log(`→ tools/list: ${tools.join(", ")}${listed.nextCursor === undefined ? "" : " (first page)"}`)

  const tool = args.tool ?? tools[0]
  let call: { readonly name: string; readonly ms: number; readonly result: Results.CallToolResult } | null = null
  if (tool !== undefined) {
    const callStart = performance.now()
    const result = yield* Effect.flatMap(
      peer.callUntyped("tools/call", session.params({ name: tool, arguments: toolArguments })),
      Results.decodeCallTool
    )
    const { resultType, ...shown } = result
    call = { name: tool, ms: elapsed(callStart), result: shown }
    log(`→ tools/call ${tool}: ${call.ms} ms ${visibleJson(shown)}`)
    // Multi round-trip requests (the server asking for input): not offered by this client.
    if (resultType === "input_required") call = null
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
    const seen = notificationCount
    const fiber = yield* Effect.forkChild(
      peer.callUntyped("tools/call", session.params({ name: slowTool, arguments: slowArguments }))
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
      Effect.repeat(Deferred.await(notified), { until: () => notificationCount > seen }),
      "500 millis"
    )
    const serverNotifiedMs = notificationCount > seen ? elapsed(cancelledAt) : null
    cancelled = { name: slowTool, afterMs, outcome, serverNotifiedMs }
    log(`→ tools/call ${slowTool}: ${outcome} after ${afterMs} ms`)
  }

  // A server told that the client has roots may ask for them at any time after `notifications/initialized` (the
  // reference server: 350 ms later). A close that comes first strands the request, which can no longer be answered,
  // and a server on the MCP SDK keeps it pending, with its 60 s timer alive, so it does not exit at the end of its
  // input. A session as short as this one's waits, bounded, for the request an editor's longer session would answer.
  if (session.era === "legacy" && roots.length > 0 && rootsAskedMs === null && Duration.toMillis(rootsWait) > 0) {
    const asked = yield* Effect.timeoutOption(Deferred.await(rootsAsked), rootsWait)
    log(Option.isNone(asked) ? `   no roots/list within ${Duration.format(rootsWait)}` : `   roots/list answered`)
  }

  const closeStart = performance.now()
  // The conversation first, then the process (the MCP stdio close). A drain bounded by the close timeout: the
  // answers to the server's requests are written (an unanswered roots/list keeps an SDK server from exiting at the
  // end of its input), then stdin ends.
  yield* Effect.timeoutOption(Effect.andThen(peer.awaitIdle, peer.flush), closeTimeout)
  yield* peer.close(new PeerError.PeerClosed({ reason: "TransportClosed", detail: "the client closed the session" }))
  const closed = yield* server.close
  const closeMs = elapsed(closeStart)
  const exit = closed.exit === undefined ? null : { code: closed.exit.exitCode, signal: closed.exit.signal }
  const serverExit = {
    code: exit?.code ?? null,
    signal: exit?.signal ?? null,
    after: closed.exitAfterMs,
    needed: neededOf(closed.endedBy)
  }
  log(`→ closed: the server needed ${serverExit.needed}, exit ${visibleJson(exit)} ${serverExit.after} ms after`)
  const stats = yield* peer.stats
  return {
    // The client's own steps: the negotiation and tools/list answered (else the program failed before this), the
    // call succeeded, the slow call (if any) was cancelled, and the server was closed by the end of its input. What
    // the server then needed to exit is `serverExit`, apart.
    ok: call !== null && (cancelled === null || cancelled.outcome === "Cancelled"),
    serverExit,
    server: serverLine,
    protocolVersion: session.protocolVersion,
    era: session.era,
    probe: session.probe,
    restartedAfterProbe,
    supportedVersions: session.supportedVersions,
    serverInfo: session.serverInfo,
    negotiationMs,
    tools,
    call,
    cancelled,
    roots: { declared: roots.length > 0, askedAtMs: rootsAskedMs },
    serverRequests,
    serverRequestCount,
    notifications,
    notificationCount,
    lateResponses: stats.lateResponses,
    closeMs,
    stop: { endedBy: closed.endedBy, descendants: closed.descendants },
    exit,
    stderrTail: server.stderrTail(),
    elapsedMs: elapsed(started)
  }
}).pipe(
  Effect.scoped,
  // The supervision `@lifeline/mcp` runs on; its bounds are the close's.
  Effect.provide(
    NodeSupervisedSpawner.layerOptions({
      killGrace: closeTimeout,
      verifyTimeout: closeTimeout,
      directory: args["journal-directory"]
    }).pipe(Layer.provide([NodeFileSystem.layer, NodePath.layer]))
  )
)

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
    // A report that is not ok is the run's outcome, not a failure of the program: exit code 1, nothing logged.
    Effect.flatMap((ok) =>
      Effect.sync(() => {
        if (!ok) process.exitCode = 1
      })
    ),
    Effect.provideService(References.MinimumLogLevel, args.verbose ? "Debug" : "Warn")
  )
)
