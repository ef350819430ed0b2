/**
 * What each guard of a connection's shutdown and handshake guarantees, seen from outside (found by mutation testing:
 * `pnpm mutate packages/kernel/src/internal/connection.ts`). One teardown however many ways of stopping race; a
 * forced stop does not drain; the accepting side drops notifications before `Ready` except the handshake's; each
 * shutdown reason reaches the report and the calls it cut off; work cut off is logged as a warning; a handshake that
 * ends after a stop does not move the lifecycle.
 */
import { assert, describe, it } from "@effect/vitest"
import { ErrorCode, RpcError } from "@lifeline/jsonrpc"
import {
  Cancellation,
  Connection,
  GracefulShutdown,
  Method,
  Peer,
  PeerError,
  Protocol,
  ShutdownPolicy
} from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Deferred, Duration, Effect, Exit, Fiber, Logger, Option, References, Schema, Scope, Stream } from "effect"
import { TestClock } from "effect/testing"
import { eventually, makeRaw, poll, wire, yieldTimes } from "./utils.js"

const Work = Method.request("work", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })
const Initialize = Method.request("initialize", {
  params: Schema.Struct({}),
  result: Schema.Struct({ ok: Schema.Boolean })
})
const Initialized = Method.notification("initialized", { params: Schema.Struct({}) })
const Ping = Method.notification("ping", { params: Schema.Struct({ n: Schema.Number }) })

const Server = Protocol.make({ serves: [Work, Initialize, Initialized, Ping], calls: [Work] })
const Client = Protocol.flip(Server)

interface Setup {
  readonly policy?: ShutdownPolicy.Policy
  readonly handshake?: Connection.Handshake<any, any>
  /** The server's `initialize` handler; default: answers `{ ok: true }` at once. */
  readonly initialize?: Effect.Effect<{ readonly ok: boolean }, RpcError.RpcError>
  readonly gate?: Connection.Options<any, any, never>["gate"]
}

/**
 * A connection (`server`, in a Scope the test owns) and a plain peer on the other end (`client`). The server records
 * the notifications it handles in `seen` and every shutdown report in `reports`.
 */
const setup = (options: Setup = {}) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    const scope = yield* Scope.make()
    const seen: Array<string> = []
    const reports: Array<Connection.ShutdownReport> = []
    const server = yield* Connection.make({
      protocol: Server,
      transport: pair.left,
      handlers: {
        work: ({ ms }) => Effect.as(Effect.sleep(Duration.millis(ms)), ms),
        initialize: () => options.initialize ?? Effect.succeed({ ok: true }),
        initialized: () => Effect.sync(() => void seen.push("initialized")),
        ping: ({ n }) => Effect.sync(() => void seen.push(`ping ${n}`))
      },
      onShutdown: (report) => Effect.sync(() => void reports.push(report)),
      ...(options.policy === undefined ? {} : { policy: options.policy }),
      ...(options.handshake === undefined ? {} : { handshake: options.handshake }),
      ...(options.gate === undefined ? {} : { gate: options.gate })
    }).pipe(Scope.provide(scope))
    const client = yield* Peer.make({
      protocol: Client,
      transport: pair.right,
      handlers: { work: ({ ms }) => Effect.as(Effect.sleep(Duration.millis(ms)), ms) },
      requestTimeout: "1 hour"
    })
    return { pair, scope, server, client, seen, reports }
  })

const tags = (events: Iterable<{ readonly to: { readonly _tag: string } }>) => Array.from(events, (e) => e.to._tag)

describe("Connection guards", () => {
  describe("one teardown, however many ways of stopping race", () => {
    it.effect("the scope closing during a drained stop waits for that drain; onShutdown runs once", () =>
      Effect.gen(function*() {
        const { client, reports, scope, server } = yield* setup({ policy: ShutdownPolicy.drain("5 seconds") })
        const inbound = yield* Effect.forkChild(client.call(Work, { ms: 3000 }))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1))
        const stopping = yield* Effect.forkChild(server.stop())
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        // The finalizer finds the teardown running: it waits for its report rather than running one of its own.
        const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
        yield* yieldTimes(20)
        assert.isTrue(Option.isNone(yield* poll(closing)))
        yield* TestClock.adjust("2999 millis")
        assert.isTrue(Option.isNone(yield* poll(closing)))
        assert.isTrue(Option.isNone(yield* poll(stopping)))
        yield* TestClock.adjust("1 millis")
        assert.strictEqual(yield* Fiber.join(stopping), "Stopped")
        yield* Fiber.join(closing)
        assert.strictEqual(yield* Fiber.join(inbound), 3000)
        assert.strictEqual(reports.length, 1)
        assert.strictEqual(reports[0].reason, "Stop")
        assert.isTrue(reports[0].drained)
        assert.strictEqual(reports[0].finishedAt - reports[0].startedAt, 3000)
      }))

    it.effect("a second stop during the teardown answers AlreadyClosing at once; awaitShutdown waits for the first", () =>
      Effect.gen(function*() {
        const { client, reports, server } = yield* setup({ policy: ShutdownPolicy.drain("5 seconds") })
        yield* Effect.forkChild(Effect.ignore(client.call(Work, { ms: 2000 })))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1))
        const first = yield* Effect.forkChild(server.stop())
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        assert.strictEqual(yield* server.stop("RemoteShutdown"), "AlreadyClosing")
        const waiting = yield* Effect.forkChild(server.awaitShutdown)
        yield* yieldTimes(20)
        assert.isTrue(Option.isNone(yield* poll(waiting)))
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual(yield* Fiber.join(first), "Stopped")
        // The report is the first stop's: the second changed nothing.
        assert.strictEqual((yield* Fiber.join(waiting)).reason, "Stop")
        assert.strictEqual(reports.length, 1)
      }))

    it.effect("a fail-fast stop, then the scope closing: the finalizer finds the report, no second teardown", () =>
      Effect.gen(function*() {
        const { reports, scope, server } = yield* setup({ policy: ShutdownPolicy.FailFast() })
        assert.strictEqual(yield* server.stop(), "Stopped")
        yield* Scope.close(scope, Exit.interrupt())
        assert.strictEqual(reports.length, 1)
        assert.strictEqual(reports[0].reason, "Stop")
      }))
  })

  describe("stopNow", () => {
    it.effect("from Ready under a drain policy: no drain at all, work in flight is cut off at once", () =>
      Effect.gen(function*() {
        const { client, server } = yield* setup({ policy: ShutdownPolicy.drain("1 minute") })
        const inbound = yield* Effect.forkChild(Effect.flip(client.call(Work, { ms: 60_000 })))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1))
        // No clock moves.
        assert.strictEqual(yield* server.stopNow(), "Stopped")
        const report = yield* server.awaitShutdown
        assert.isTrue(ShutdownPolicy.isFailFast(report.policy))
        assert.isFalse(report.drained)
        assert.deepStrictEqual(report.cutOff.map((c) => `${c.direction} ${c.method}`), ["inbound work"])
        assert.strictEqual(report.finishedAt - report.startedAt, 0)
        yield* Fiber.join(inbound)
      }))

    it.effect("during a drain: the drain ends at once, the stop is reported as not drained", () =>
      Effect.gen(function*() {
        const { client, server } = yield* setup({ policy: ShutdownPolicy.drain("1 minute") })
        yield* Effect.forkChild(Effect.ignore(client.call(Work, { ms: 60_000 })))
        const outbound = yield* Effect.forkChild(
          Effect.flip(server.peer.call(Work, { ms: 60_000 }, { timeout: "1 hour" }))
        )
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1 && s.pendingOutbound === 1))
        const stopping = yield* Effect.forkChild(server.stop())
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        yield* TestClock.adjust("10 seconds")
        assert.isTrue(Option.isNone(yield* poll(stopping)))
        assert.strictEqual(yield* server.stopNow(), "AlreadyClosing")
        assert.strictEqual(yield* Fiber.join(stopping), "Stopped")
        const report = yield* server.awaitShutdown
        assert.isFalse(report.drained)
        // The drain's own policy is reported, cut short 10 s in, not at its 60 s deadline.
        assert.isTrue(ShutdownPolicy.isDrain(report.policy))
        assert.strictEqual(report.finishedAt - report.startedAt, 10_000)
        // What the drain did not finish is cut off as at its deadline, told that the stop was forced.
        assert.strictEqual(((yield* Fiber.join(outbound)) as PeerError.ShutdownError).reason, "Forced")
      }))
  })

  describe("inbound notifications", () => {
    it.effect("accepting side: before Ready only the handshake's are handled; the rest are dropped, not queued", () =>
      Effect.gen(function*() {
        const { client, seen, server } = yield* setup({
          handshake: Connection.accept("initialize", { notifications: ["initialized"] })
        })
        yield* client.notify(Ping, { n: 1 })
        yield* client.notify(Initialized, {})
        yield* eventually(Effect.sync(() => seen.length === 1), "initialized handled")
        assert.strictEqual((yield* server.lifecycle.state)._tag, "Starting")
        assert.deepStrictEqual(yield* client.call(Initialize, {}), { ok: true })
        assert.strictEqual((yield* server.lifecycle.state)._tag, "Ready")
        yield* client.notify(Ping, { n: 2 })
        yield* eventually(Effect.sync(() => seen.length === 2), "ping 2 handled")
        assert.deepStrictEqual(seen, ["initialized", "ping 2"])
      }))

    it.effect("initiating side: the other side's requests and notifications are served while the handshake runs", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const raw = yield* makeRaw(pair.right)
        const seen: Array<string> = []
        const made = yield* Effect.forkChild(Connection.make({
          protocol: Protocol.make({ serves: [Work, Ping], calls: [Initialize] }),
          transport: pair.left,
          handlers: {
            work: ({ ms }) => Effect.succeed(ms),
            ping: ({ n }) => Effect.sync(() => void seen.push(`ping ${n}`))
          },
          handshake: Connection.initiate(Initialize, {})
        }))
        const request = yield* raw.next
        assert.strictEqual(request.method, "initialize")
        yield* raw.send({ jsonrpc: "2.0", method: "ping", params: { n: 1 } })
        yield* raw.send({ jsonrpc: "2.0", id: "w", method: "work", params: { ms: 7 } })
        assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", id: "w", result: 7 })
        assert.deepStrictEqual(seen, ["ping 1"])
        yield* raw.send({ jsonrpc: "2.0", id: request.id, result: { ok: true } })
        const connection = yield* Fiber.join(made)
        assert.strictEqual((yield* connection.lifecycle.state)._tag, "Ready")
      }))

    it.effect("once shutting down, notifications are dropped on either side", () =>
      Effect.gen(function*() {
        const { client, seen, server } = yield* setup({ policy: ShutdownPolicy.drain("5 seconds") })
        yield* Effect.forkChild(Effect.ignore(client.call(Work, { ms: 1000 })))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1))
        const stopping = yield* Effect.forkChild(server.stop())
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        yield* client.notify(Ping, { n: 1 })
        // A request sent after the notification is answered (refused) only once the notification has been read.
        const refused = yield* Effect.flip(client.call(Work, { ms: 1 }))
        assert.strictEqual((refused as RpcError.RpcError).code, ErrorCode.ShuttingDown)
        assert.strictEqual((yield* server.peer.stats).activeInbound, 1)
        yield* TestClock.adjust("1 second")
        yield* Fiber.join(stopping)
        assert.deepStrictEqual(seen, [])
      }))
  })

  describe("each shutdown reason reaches the report and the calls it cut off", () => {
    // `closing`: the reason the lifecycle's Closing state records (undefined: it went straight to Failed).
    const cases = [
      { how: "stop()", reason: "Stop", callReason: "Stop", closing: "Stop" },
      { how: "stop(RemoteShutdown)", reason: "RemoteShutdown", callReason: "Stop", closing: "RemoteShutdown" },
      { how: "stopNow()", reason: "Stop", callReason: "Stop", closing: "Stop" },
      { how: "the scope closes", reason: "Stop", callReason: "Stop", closing: "Stop" },
      {
        how: "the owning fiber is interrupted",
        reason: "Interrupted",
        callReason: "Interrupted",
        closing: "Interrupted"
      },
      { how: "the other side closes", reason: "TransportClosed", callReason: undefined, closing: "TransportClosed" },
      { how: "the transport fails", reason: "Failed", callReason: undefined, closing: undefined }
    ] as const
    for (const { callReason, closing, how, reason } of cases) {
      it.effect(`${how}: ${reason}`, () =>
        Effect.gen(function*() {
          const { pair, reports, scope, server } = yield* setup({ policy: ShutdownPolicy.FailFast() })
          const call = yield* Effect.forkChild(Effect.flip(server.peer.call(Work, { ms: 60_000 })))
          yield* eventually(Effect.map(server.peer.stats, (s) => s.pendingOutbound === 1))
          switch (how) {
            case "stop()":
              yield* server.stop()
              break
            case "stop(RemoteShutdown)":
              yield* server.stop("RemoteShutdown")
              break
            case "stopNow()":
              yield* server.stopNow()
              break
            case "the scope closes":
              yield* Scope.close(scope, Exit.void)
              break
            case "the owning fiber is interrupted":
              yield* Scope.close(scope, Exit.interrupt())
              break
            case "the other side closes":
              yield* pair.rightToLeft.close
              break
            case "the transport fails":
              yield* pair.rightToLeft.fail("pipe broke")
              break
          }
          const report = yield* server.awaitShutdown
          assert.strictEqual(report.reason, reason)
          assert.deepStrictEqual(reports.map((r) => r.reason), [reason])
          const events = yield* Stream.runCollect(server.lifecycle.events)
          assert.deepStrictEqual(
            Array.from(events, (e) => e.to._tag === "Closing" ? e.to.reason : undefined).filter((r) => r !== undefined),
            closing === undefined ? [] : [closing]
          )
          const error = yield* Fiber.join(call)
          if (callReason !== undefined) {
            assert.instanceOf(error, PeerError.ShutdownError)
            assert.strictEqual((error as PeerError.ShutdownError).reason, callReason)
            assert.strictEqual((error as PeerError.ShutdownError).phase, "Closing")
          }
        }))
    }

    it.effect("a failed handshake: the report says Failed, and so does every call it cut off", () =>
      Effect.gen(function*() {
        const { reports, server } = yield* setup({
          handshake: Connection.accept("initialize", { timeout: "10 seconds" })
        })
        const call = yield* Effect.forkChild(Effect.flip(server.peer.call(Work, { ms: 60_000 }, { timeout: "1 hour" })))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.pendingOutbound === 1))
        yield* TestClock.adjust("10 seconds")
        const error = (yield* Fiber.join(call)) as PeerError.ShutdownError
        assert.strictEqual(error._tag, "ShutdownError")
        assert.strictEqual(error.reason, "Failed")
        assert.strictEqual(error.phase, "Failed")
        assert.deepStrictEqual(reports.map((r) => [r.reason, r.cutOff.length]), [["Failed", 1]])
      }))
  })

  describe("work cut off is a warning", () => {
    const capture = () => {
      const lines: Array<{ level: string; message: string; annotations: Record<string, unknown> }> = []
      const logger = Logger.make(({ fiber, logLevel, message }) => {
        lines.push({
          level: logLevel,
          message: Array.isArray(message) ? message.join(" ") : String(message),
          annotations: { ...fiber.getRef(References.CurrentLogAnnotations) }
        })
      })
      return { lines, layer: Logger.layer([logger]) }
    }

    it.effect("a stop that cuts work off says how much, under which policy and why", () => {
      const { layer, lines } = capture()
      return Effect.gen(function*() {
        const { client, server } = yield* setup({ policy: ShutdownPolicy.FailFast() })
        yield* Effect.forkChild(Effect.ignore(client.call(Work, { ms: 60_000 })))
        yield* Effect.forkChild(Effect.ignore(server.peer.call(Work, { ms: 60_000 })))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1 && s.pendingOutbound === 1))
        yield* server.stop("RemoteShutdown")
        const warnings = lines.filter((line) => line.level === "Warn")
        assert.deepStrictEqual(warnings.map((line) => line.message), ["shutdown cut off 2 operation(s)"])
        assert.deepStrictEqual(warnings[0].annotations, { policy: "FailFast", reason: "RemoteShutdown" })
      }).pipe(Effect.provide(layer))
    })

    it.effect("a stop that cuts nothing off does not warn", () => {
      const { layer, lines } = capture()
      return Effect.gen(function*() {
        const { server } = yield* setup({ policy: ShutdownPolicy.FailFast() })
        yield* server.stop()
        assert.isTrue((yield* server.awaitShutdown).drained)
        assert.deepStrictEqual(lines.filter((line) => line.level === "Warn"), [])
      }).pipe(Effect.provide(layer))
    })
  })

  describe("a gate given to Connection.make", () => {
    it.effect("is asked before the lifecycle's and can only refuse more: requests, batches, notifications, calls", () =>
      Effect.gen(function*() {
        let draining = false
        const { client, seen, server } = yield* setup({
          policy: ShutdownPolicy.drain("10 seconds"),
          gate: {
            inbound: (method) => draining ? RpcError.RpcError.shuttingDown(method) : undefined,
            inboundNotification: () => !draining,
            outbound: () => undefined
          }
        })
        assert.strictEqual(yield* client.call(Work, { ms: 0 }), 0)
        draining = true
        // Ready, so the lifecycle alone would serve `work` and answer -32601 to an unknown method.
        const refused = yield* Effect.forEach(
          ["work", "no/such"],
          (method) => Effect.flip(client.callUntyped(method, { ms: 0 }))
        )
        assert.deepStrictEqual(refused.map((e) => (e as RpcError.RpcError).code), [
          ErrorCode.ShuttingDown,
          ErrorCode.ShuttingDown
        ])
        yield* client.notify(Ping, { n: 1 })
        // Its outbound gate lets calls through (the lifecycle's would too, while Ready).
        assert.strictEqual(yield* server.peer.call(Work, { ms: 0 }), 0)
        draining = false
        yield* client.notify(Ping, { n: 2 })
        yield* eventually(Effect.sync(() => seen.includes("ping 2")))
        assert.deepStrictEqual(seen, ["ping 2"])
        // Once the lifecycle refuses (Closing, draining a call), a gate that admits does not override it.
        const long = yield* Effect.forkChild(client.call(Work, { ms: 5000 }))
        yield* eventually(Effect.map(server.peer.stats, (stats) => stats.activeInbound === 1))
        const stopping = yield* Effect.forkChild(server.stop())
        yield* eventually(Effect.map(server.lifecycle.state, (state) => state._tag === "Closing"))
        const late = (yield* Effect.flip(client.call(Work, { ms: 0 }))) as RpcError.RpcError
        assert.strictEqual(late.code, ErrorCode.ShuttingDown)
        yield* TestClock.adjust("5 seconds")
        assert.strictEqual(yield* Fiber.join(long), 5000)
        yield* Fiber.join(stopping)
      }))
  })

  describe("the accepting handshake", () => {
    it.effect("a second handshake request while the first runs is refused -32600 and does not restart it", () =>
      Effect.gen(function*() {
        const gate = yield* Deferred.make<void>()
        const { client, server } = yield* setup({
          handshake: Connection.accept("initialize"),
          initialize: Effect.as(Deferred.await(gate), { ok: true })
        })
        const first = yield* Effect.forkChild(client.call(Initialize, {}))
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Initializing"))
        const second = (yield* Effect.flip(client.call(Initialize, {}))) as RpcError.RpcError
        assert.strictEqual(second.code, ErrorCode.InvalidRequest)
        assert.strictEqual(second.data, "initialize: the handshake is already running")
        yield* Deferred.succeed(gate, void 0)
        assert.deepStrictEqual(yield* Fiber.join(first), { ok: true })
        assert.deepStrictEqual(tags(yield* Stream.runCollect(Stream.take(server.lifecycle.events, 2))), [
          "Initializing",
          "Ready"
        ])
      }))

    it.effect("a handshake handler that fails after a stop leaves the lifecycle Closing → Closed, not Failed", () =>
      Effect.gen(function*() {
        const gate = yield* Deferred.make<void>()
        const { client, reports, server } = yield* setup({
          policy: ShutdownPolicy.drain("5 seconds"),
          handshake: Connection.accept("initialize"),
          initialize: Effect.andThen(Deferred.await(gate), Effect.fail(RpcError.make(-32000, "unsupported version")))
        })
        const call = yield* Effect.forkChild(Effect.flip(client.call(Initialize, {})))
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Initializing"))
        // The drain waits for the handshake handler, which then fails.
        const stopping = yield* Effect.forkChild(server.stop())
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        yield* Deferred.succeed(gate, void 0)
        assert.strictEqual((yield* Fiber.join(call)).message, "unsupported version")
        assert.strictEqual(yield* Fiber.join(stopping), "Stopped")
        assert.deepStrictEqual(tags(yield* Stream.runCollect(server.lifecycle.events)), [
          "Initializing",
          "Closing",
          "Closed"
        ])
        assert.deepStrictEqual(reports.map((r) => [r.reason, r.drained]), [["Stop", true]])
      }))

    it.effect("a handshake handler that succeeds after a stop does not make the lifecycle Ready", () =>
      Effect.gen(function*() {
        const gate = yield* Deferred.make<void>()
        const { client, server } = yield* setup({
          policy: ShutdownPolicy.drain("5 seconds"),
          handshake: Connection.accept("initialize"),
          initialize: Effect.as(Deferred.await(gate), { ok: true })
        })
        const call = yield* Effect.forkChild(client.call(Initialize, {}))
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Initializing"))
        const stopping = yield* Effect.forkChild(server.stop())
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        yield* Deferred.succeed(gate, void 0)
        assert.deepStrictEqual(yield* Fiber.join(call), { ok: true })
        yield* Fiber.join(stopping)
        assert.deepStrictEqual(tags(yield* Stream.runCollect(server.lifecycle.events)), [
          "Initializing",
          "Closing",
          "Closed"
        ])
      }))

    it.effect("its timeout fails a handshake still running at the deadline, and leaves a Ready one alone", () =>
      Effect.gen(function*() {
        // Still running: the handler takes 20 s, the handshake may take 10.
        const slow = yield* setup({
          handshake: Connection.accept("initialize", { timeout: "10 seconds" }),
          initialize: Effect.as(Effect.sleep("20 seconds"), { ok: true })
        })
        yield* Effect.forkChild(Effect.ignore(slow.client.call(Initialize, {})))
        yield* eventually(Effect.map(slow.server.lifecycle.state, (s) => s._tag === "Initializing"))
        yield* TestClock.adjust("10 seconds")
        const state = yield* slow.server.lifecycle.state
        assert.strictEqual(state._tag === "Failed" ? state.error._tag : state._tag, "HandshakeTimeout")
        assert.strictEqual((yield* slow.server.awaitShutdown).reason, "Failed")

        // Ready before the deadline: the timeout passes without effect.
        const quick = yield* setup({ handshake: Connection.accept("initialize", { timeout: "10 seconds" }) })
        yield* quick.client.call(Initialize, {})
        yield* TestClock.adjust("10 seconds")
        assert.strictEqual((yield* quick.server.lifecycle.state)._tag, "Ready")
      }))
  })

  describe("the cancellations a teardown sends", () => {
    const LspServer = Protocol.make({ serves: [Work], calls: [Work], cancellation: Cancellation.lsp })
    const McpServer = Protocol.make({ serves: [Work], calls: [Work], cancellation: Cancellation.mcp })

    const connect = (protocol: typeof LspServer, policy: ShutdownPolicy.Policy) =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const raw = yield* makeRaw(pair.right)
        const connection = yield* Connection.make({
          protocol,
          transport: pair.left,
          handlers: { work: ({ ms }) => Effect.as(Effect.sleep(Duration.millis(ms)), ms) },
          policy,
          requestTimeout: "1 hour"
        })
        return { pair, raw, connection }
      })

    it.effect("only the calls we made are cancelled, not the requests we were serving", () =>
      Effect.gen(function*() {
        const { connection, pair, raw } = yield* connect(LspServer, ShutdownPolicy.FailFast())
        yield* raw.send({ jsonrpc: "2.0", id: "theirs", method: "work", params: { ms: 60_000 } })
        yield* Effect.forkChild(Effect.ignore(connection.peer.call(Work, { ms: 60_000 })))
        const ours = yield* raw.next
        yield* eventually(Effect.map(connection.peer.stats, (s) => s.activeInbound === 1))
        yield* connection.stop()
        const cancels = (yield* wire(pair.leftToRight)).filter((m) => m.method === "$/cancelRequest")
        assert.deepStrictEqual(cancels, [{ jsonrpc: "2.0", method: "$/cancelRequest", params: { id: ours.id } }])
        assert.strictEqual((yield* connection.awaitShutdown).cutOff.length, 2)
      }))

    it.effect("MCP says why: the drain deadline with its length, or a shutdown", () =>
      Effect.gen(function*() {
        const drained = yield* connect(McpServer, ShutdownPolicy.drain("3 seconds"))
        yield* Effect.forkChild(Effect.ignore(drained.connection.peer.call(Work, { ms: 60_000 })))
        const first = yield* drained.raw.next
        const stopping = yield* Effect.forkChild(drained.connection.stop())
        yield* eventually(Effect.map(drained.connection.lifecycle.state, (s) => s._tag === "Closing"))
        yield* TestClock.adjust("3 seconds")
        yield* Fiber.join(stopping)
        assert.deepStrictEqual((yield* drained.raw.next).params, {
          requestId: first.id,
          reason: "the drain deadline (3s) passed"
        })

        const failFast = yield* connect(McpServer, ShutdownPolicy.FailFast())
        yield* Effect.forkChild(Effect.ignore(failFast.connection.peer.call(Work, { ms: 60_000 })))
        const second = yield* failFast.raw.next
        yield* failFast.connection.stop()
        assert.deepStrictEqual((yield* failFast.raw.next).params, {
          requestId: second.id,
          reason: "the connection is shutting down"
        })
      }))

    it.effect("the gate opened for the cancellations closes again: a later call fails at the gate, as Closed", () =>
      Effect.gen(function*() {
        const { connection, raw } = yield* connect(LspServer, ShutdownPolicy.FailFast())
        yield* Effect.forkChild(Effect.ignore(connection.peer.call(Work, { ms: 60_000 })))
        yield* raw.next
        yield* connection.stop()
        const after = (yield* Effect.flip(connection.peer.call(Work, { ms: 1 }))) as PeerError.ShutdownError
        assert.strictEqual(after._tag, "ShutdownError")
        assert.strictEqual(after.phase, "Closed")
      }))
  })

  describe("what the lifecycle records of an initiated handshake", () => {
    /** The lifecycle's transitions, as its Debug log lines tell them (`make` fails, so there is no lifecycle to ask). */
    const transitions = () => {
      const lines: Array<Record<string, unknown>> = []
      const logger = Logger.make(({ fiber, message }) => {
        const text = Array.isArray(message) ? message.join(" ") : String(message)
        if (text.startsWith("lifecycle ")) lines.push({ ...fiber.getRef(References.CurrentLogAnnotations) })
      })
      return {
        lines,
        provide: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
          effect.pipe(
            Effect.provide(Logger.layer([logger])),
            Effect.provideService(References.MinimumLogLevel, "Debug")
          )
      }
    }

    class Refused extends Schema.TaggedError<Refused>()("Refused", { why: Schema.String }) {}

    it.effect("a typed error of the handshake is kept as an RpcError; a Lifecycle.Failure as itself", () => {
      const typed = transitions()
      const failure = transitions()
      return Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        yield* makeRaw(pair.right)
        const error = yield* Effect.flip(typed.provide(Connection.make({
          protocol: Protocol.make({ calls: [Initialize] }),
          transport: pair.left,
          handlers: {},
          handshake: Connection.initiate(() => Effect.fail(new Refused({ why: "no" })))
        })))
        assert.instanceOf(error, Refused)
        assert.deepStrictEqual(typed.lines.filter((line) => line.to === "Failed"), [
          { from: "Initializing", to: "Failed", error: "RpcError" }
        ])

        const other = yield* TestTransport.makePair()
        yield* makeRaw(other.right)
        const made = yield* Effect.forkChild(Effect.flip(failure.provide(Connection.make({
          protocol: Protocol.make({ calls: [Initialize] }),
          transport: other.left,
          handlers: {},
          handshake: Connection.initiate((peer) => peer.call(Initialize, {}, { timeout: "1 second" }))
        }))))
        yield* TestClock.adjust("1 second")
        assert.strictEqual((yield* Fiber.join(made))._tag, "RequestTimeout")
        assert.deepStrictEqual(failure.lines.filter((line) => line.to === "Failed"), [
          { from: "Initializing", to: "Failed", error: "RequestTimeout" }
        ])
      }).pipe(Effect.scoped)
    })

    it.effect("a handshake answered after the program's stop began: make fails, the lifecycle ends Closed", () => {
      const log = transitions()
      return Effect.gen(function*() {
        const registry = yield* GracefulShutdown.GracefulShutdown
        const pair = yield* TestTransport.makePair()
        const raw = yield* makeRaw(pair.right)
        const made = yield* Effect.forkChild(Effect.flip(Connection.make({
          protocol: Protocol.make({ calls: [Initialize] }),
          transport: pair.left,
          handlers: {},
          policy: ShutdownPolicy.drain("5 seconds"),
          handshake: Connection.initiate(Initialize, {})
        })))
        const request = yield* raw.next
        // The program stops while the handshake waits for its answer; the drain waits for that answer too.
        const stopping = yield* Effect.forkChild(registry.stop)
        yield* eventually(Effect.sync(() => log.lines.some((line) => line.to === "Closing")), "Closing")
        yield* raw.send({ jsonrpc: "2.0", id: request.id, result: { ok: true } })
        assert.strictEqual((yield* Fiber.join(made))._tag, "IllegalTransition")
        yield* Fiber.join(stopping)
        assert.deepStrictEqual(log.lines.map((line) => line.to), ["Initializing", "Closing", "Closed"])
      }).pipe(log.provide, Effect.provide(GracefulShutdown.layer))
    })
  })

  it.effect("an accepted handshake with no handler of its own: -32601, and the lifecycle does not move", () =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      const server = yield* Connection.make({
        protocol: Protocol.make({ serves: [Initialize, Work] }),
        transport: pair.left,
        // The handshake request has no handler: the types require one, so they are told otherwise.
        handlers: { work: ({ ms }: { readonly ms: number }) => Effect.succeed(ms) } as any,
        handshake: Connection.accept("initialize")
      })
      const raw = yield* makeRaw(pair.right)
      yield* raw.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} })
      assert.strictEqual((yield* raw.next).error.code, ErrorCode.MethodNotFound)
      assert.strictEqual((yield* server.lifecycle.state)._tag, "Starting")
    }))
})
