import { assert, describe, it } from "@effect/vitest"
import { ErrorCode, RpcError } from "@lifeline/jsonrpc"
import type { Lifecycle } from "@lifeline/kernel"
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
import {
  ConfigProvider,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Option,
  Ref,
  Schema,
  Scope,
  Stream
} from "effect"
import { TestClock } from "effect/testing"
import { eventually, makeRaw, wire } from "./utils.js"

const Work = Method.request("work", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })
const Initialize = Method.request("initialize", {
  params: Schema.Struct({}),
  result: Schema.Struct({ ok: Schema.Boolean })
})
const Initialized = Method.notification("initialized", { params: Schema.Struct({}) })
const Ping = Method.notification("ping", { params: Schema.Struct({ ms: Schema.Number }) })

const Server = Protocol.make({ serves: [Work, Initialize, Initialized, Ping], calls: [Work] })
const Client = Protocol.flip(Server)

/** Counts what handlers acquire and release, to prove every path runs the finalizers. */
const makeCounter = Effect.map(Ref.make({ acquired: 0, released: 0 }), (ref) => ({
  ref,
  resource: Effect.acquireRelease(
    Ref.update(ref, (c) => ({ ...c, acquired: c.acquired + 1 })),
    () => Ref.update(ref, (c) => ({ ...c, released: c.released + 1 }))
  )
}))

interface Setup {
  readonly policy?: ShutdownPolicy.Policy
  readonly handshake?: Connection.Handshake<any, any>
}

/**
 * A connection under test (`server`, in a Scope the test owns) and a plain peer on the other end (`client`, in the
 * test's scope). The server's `work` handler sleeps on the Clock while holding a counted resource.
 */
const setup = (options: Setup = {}) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    const counter = yield* makeCounter
    const scope = yield* Scope.make()
    const server = yield* Connection.make({
      protocol: Server,
      transport: pair.left,
      handlers: {
        work: ({ ms }) =>
          Effect.scoped(Effect.andThen(counter.resource, Effect.as(Effect.sleep(Duration.millis(ms)), ms))),
        initialize: () => Effect.succeed({ ok: true }),
        initialized: () => Effect.void,
        ping: ({ ms }) => Effect.scoped(Effect.andThen(counter.resource, Effect.sleep(Duration.millis(ms))))
      },
      ...(options.policy === undefined ? {} : { policy: options.policy }),
      ...(options.handshake === undefined ? {} : { handshake: options.handshake })
    }).pipe(Scope.provide(scope))
    const client = yield* Peer.make({
      protocol: Client,
      transport: pair.right,
      handlers: { work: ({ ms }) => Effect.as(Effect.sleep(Duration.millis(ms)), ms) },
      requestTimeout: "1 hour"
    })
    return { pair, counter, scope, server, client }
  })

const tags = (events: Iterable<Lifecycle.Event>) => Array.from(events, (e) => e.to._tag)

// Effect 4 has no `Fiber.poll`: the fiber's exit if it has one, as an Option.
const poll = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.sync(() => Option.fromNullishOr(fiber.pollUnsafe()))

describe("Connection", () => {
  describe("fail-fast", () => {
    it.effect("stop fails every pending call at once, interrupts handlers and closes the transport", () =>
      Effect.gen(function*() {
        const { client, counter, server } = yield* setup({ policy: ShutdownPolicy.FailFast() })
        const outbound = yield* Effect.forkChild(server.peer.call(Work, { ms: 1000 }))
        const inbound = yield* Effect.forkChild(client.call(Work, { ms: 1000 }))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1 && s.pendingOutbound === 1))
        // No clock moves: fail-fast waits for nothing.
        assert.strictEqual(yield* server.stop(), "Stopped")
        const error = yield* Effect.flip(Fiber.join(outbound))
        assert.instanceOf(error, PeerError.ShutdownError)
        assert.strictEqual((error as PeerError.ShutdownError).reason, "Stop")
        assert.deepStrictEqual(yield* Ref.get(counter.ref), { acquired: 1, released: 1 })
        // The transport was ended: the client sees the connection close and its call fail.
        assert.strictEqual((yield* Effect.flip(Fiber.join(inbound)))._tag, "PeerClosed")
        const report = yield* server.awaitShutdown
        assert.deepStrictEqual(report.cutOff.map((c) => c.direction).sort(), ["inbound", "outbound"])
        assert.isFalse(report.drained)
        assert.strictEqual(report.finishedAt - report.startedAt, 0)
        assert.deepStrictEqual(tags(yield* Stream.runCollect(server.lifecycle.events)), ["Ready", "Closing", "Closed"])
      }))

    it.effect("calls after stop fail at once with ShutdownError; late answers are dropped and counted", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const connection = yield* Connection.make({
          protocol: Protocol.make({ calls: [Work] }),
          transport: pair.left,
          handlers: {}
        })
        const raw = yield* makeRaw(pair.right)
        const call = yield* Effect.forkChild(connection.peer.call(Work, { ms: 1 }))
        const request = yield* raw.next
        yield* connection.stop()
        assert.strictEqual((yield* Effect.flip(Fiber.join(call)))._tag, "ShutdownError")
        const after = yield* Effect.flip(connection.peer.call(Work, { ms: 1 }))
        assert.strictEqual(after._tag, "ShutdownError")
        assert.strictEqual((after as PeerError.ShutdownError).phase, "Closed")
        yield* raw.send({ jsonrpc: "2.0", id: request.id, result: 1 })
        yield* eventually(Effect.map(connection.peer.stats, (s) => s.lateResponses === 1), "late answer counted")
      }))
  })

  describe("drain", () => {
    it.effect("finishes early when the work ends early", () =>
      Effect.gen(function*() {
        const { client, counter, server } = yield* setup({ policy: ShutdownPolicy.drain("5 seconds") })
        const inbound = yield* Effect.forkChild(client.call(Work, { ms: 1000 }))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1))
        const stopping = yield* Effect.forkChild(server.stop())
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        yield* TestClock.adjust("1 second")
        assert.strictEqual(yield* Fiber.join(stopping), "Stopped")
        assert.strictEqual(yield* Fiber.join(inbound), 1000)
        const report = yield* server.awaitShutdown
        assert.isTrue(report.drained)
        assert.strictEqual(report.finishedAt - report.startedAt, 1000)
        assert.deepStrictEqual(yield* Ref.get(counter.ref), { acquired: 1, released: 1 })
      }))

    it.effect("cuts off exactly at the deadline, not a millisecond before", () =>
      Effect.gen(function*() {
        const { client, counter, server } = yield* setup({ policy: ShutdownPolicy.drain("5 seconds") })
        const inbound = yield* Effect.forkChild(client.call(Work, { ms: 60_000 }))
        const outbound = yield* Effect.forkChild(server.peer.call(Work, { ms: 60_000 }, { timeout: "1 hour" }))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1 && s.pendingOutbound === 1))
        const stopping = yield* Effect.forkChild(server.stop())
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        yield* TestClock.adjust(Duration.millis(4999))
        assert.isTrue(Option.isNone(yield* poll(stopping)))
        assert.isTrue(Option.isNone(yield* poll(outbound)))
        yield* TestClock.adjust(Duration.millis(1))
        assert.strictEqual(yield* Fiber.join(stopping), "Stopped")
        const error = (yield* Effect.flip(Fiber.join(outbound))) as PeerError.ShutdownError
        assert.strictEqual(error.reason, "DrainTimeout")
        assert.strictEqual(error.phase, "Closing")
        const report = yield* server.awaitShutdown
        assert.isFalse(report.drained)
        assert.deepStrictEqual(report.cutOff.map((c) => `${c.direction} ${c.method}`).sort(), [
          "inbound work",
          "outbound work"
        ])
        assert.deepStrictEqual(yield* Ref.get(counter.ref), { acquired: 1, released: 1 })
        yield* Fiber.interrupt(inbound)
      }))

    it.effect("a notification handler still running is work in flight: drained, or cut off and reported", () =>
      Effect.gen(function*() {
        const { client, counter, server } = yield* setup({ policy: ShutdownPolicy.drain("5 seconds") })
        yield* client.notify(Ping, { ms: 2000 })
        yield* client.notify(Ping, { ms: 60_000 })
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 2))
        const stopping = yield* Effect.forkChild(server.stop())
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual((yield* server.peer.stats).activeInbound, 1)
        assert.isTrue(Option.isNone(yield* poll(stopping)))
        yield* TestClock.adjust("3 seconds")
        yield* Fiber.join(stopping)
        assert.deepStrictEqual((yield* server.awaitShutdown).cutOff, [{
          direction: "inbound",
          id: null,
          method: "ping"
        }])
        assert.deepStrictEqual(yield* Ref.get(counter.ref), { acquired: 2, released: 2 })
      }))

    it.effect("new work is refused while draining: -32003 inbound, ShutdownError outbound", () =>
      Effect.gen(function*() {
        const { client, server } = yield* setup({ policy: ShutdownPolicy.drain("5 seconds") })
        yield* Effect.forkChild(client.call(Work, { ms: 1000 }))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1))
        yield* Effect.forkChild(server.stop())
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        const refused = yield* Effect.flip(client.call(Work, { ms: 1 }))
        assert.strictEqual(refused._tag, "RpcError")
        assert.strictEqual((refused as any).code, ErrorCode.ShuttingDown)
        const outbound = (yield* Effect.flip(server.peer.call(Work, { ms: 1 }))) as PeerError.ShutdownError
        assert.strictEqual(outbound._tag, "ShutdownError")
        assert.strictEqual(outbound.phase, "Closing")
        yield* TestClock.adjust("1 second")
        yield* server.awaitShutdown
      }))

    it.effect("interrupting the owning fiber (SIGTERM through runMain) still drains until the deadline", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const made = yield* Deferred.make<Connection.Connection<any, any>>()
        // The connection lives in the scope of a fiber that is then interrupted, as runMain does on SIGTERM.
        const owner = yield* Effect.forkChild(Effect.scoped(Effect.gen(function*() {
          const connection = yield* Connection.make({
            protocol: Server,
            transport: pair.left,
            policy: ShutdownPolicy.drain("5 seconds"),
            handlers: {
              work: ({ ms }) => Effect.as(Effect.sleep(Duration.millis(ms)), ms),
              initialize: () => Effect.succeed({ ok: true }),
              initialized: () => Effect.void,
              ping: () => Effect.void
            }
          })
          yield* Deferred.succeed(made, connection)
          return yield* Effect.never
        })))
        const server = yield* Deferred.await(made)
        const client = yield* Peer.make({
          protocol: Client,
          transport: pair.right,
          handlers: { work: () => Effect.succeed(0) }
        })
        const inbound = yield* Effect.forkChild(client.call(Work, { ms: 1000 }))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1))
        const interrupting = yield* Effect.forkChild(Fiber.interrupt(owner))
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        yield* TestClock.adjust("999 millis")
        assert.isTrue(Option.isNone(yield* poll(interrupting)))
        yield* TestClock.adjust("1 millis")
        yield* Fiber.join(interrupting)
        assert.strictEqual(yield* Fiber.join(inbound), 1000)
        const report = yield* server.awaitShutdown
        assert.isTrue(report.drained)
        assert.strictEqual(report.reason, "Interrupted")
      }))

    it.effect("stopNow cuts a drain short at once", () =>
      Effect.gen(function*() {
        const { client, server } = yield* setup({ policy: ShutdownPolicy.drain("1 minute") })
        yield* Effect.forkChild(Effect.ignore(client.call(Work, { ms: 60_000 })))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1))
        const stopping = yield* Effect.forkChild(server.stop())
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        assert.strictEqual(yield* server.stopNow(), "AlreadyClosing")
        assert.strictEqual(yield* Fiber.join(stopping), "Stopped")
        assert.strictEqual((yield* server.awaitShutdown).cutOff.length, 1)
      }))
  })

  describe("stop is idempotent", () => {
    it.effect("from Ready: first Stopped, then AlreadyClosing, concurrently too", () =>
      Effect.gen(function*() {
        const { server } = yield* setup()
        const results = yield* Effect.all(Array.from({ length: 8 }, () => server.stop()), { concurrency: "unbounded" })
        assert.strictEqual(results.filter((r) => r === "Stopped").length, 1)
        assert.strictEqual(results.filter((r) => r === "AlreadyClosing").length, 7)
        assert.strictEqual(yield* server.stop(), "AlreadyClosing")
        assert.strictEqual((yield* server.lifecycle.state)._tag, "Closed")
      }))

    it.effect("from Starting and Initializing (handshake pending), from Closing (drain running) and from Closed", () =>
      Effect.gen(function*() {
        // Starting: no handshake has arrived yet.
        const starting = yield* setup({ handshake: Connection.accept("initialize") })
        assert.strictEqual((yield* starting.server.lifecycle.state)._tag, "Starting")
        assert.strictEqual(yield* starting.server.stop(), "Stopped")
        assert.strictEqual(yield* starting.server.stop(), "AlreadyClosing")

        // Initializing: an initiating handshake that never gets its answer.
        const pair = yield* TestTransport.makePair()
        yield* makeRaw(pair.right)
        const scope = yield* Scope.make()
        const made = yield* Effect.forkChild(
          Connection.make({
            protocol: Protocol.make({ calls: [Initialize] }),
            transport: pair.left,
            handlers: {},
            handshake: Connection.initiate((peer) => peer.call(Initialize, {}), { timeout: "10 seconds" })
          }).pipe(Scope.provide(scope))
        )
        yield* Effect.yieldNow
        yield* Scope.close(scope, Exit.void)
        assert.isTrue(Exit.isFailure(yield* Fiber.await(made)))

        // Closing and Closed.
        const draining = yield* setup({ policy: ShutdownPolicy.drain("5 seconds") })
        yield* Effect.forkChild(Effect.ignore(draining.client.call(Work, { ms: 10_000 })))
        yield* eventually(Effect.map(draining.server.peer.stats, (s) => s.activeInbound === 1))
        const first = yield* Effect.forkChild(draining.server.stop())
        yield* eventually(Effect.map(draining.server.lifecycle.state, (s) => s._tag === "Closing"))
        assert.strictEqual(yield* draining.server.stop(), "AlreadyClosing") // at once, while the drain runs
        yield* TestClock.adjust("5 seconds")
        assert.strictEqual(yield* Fiber.join(first), "Stopped")
        assert.strictEqual(yield* draining.server.stop(), "AlreadyClosing")
      }))
  })

  describe("handshake", () => {
    it.effect("before Ready other requests get -32002; a second handshake gets -32600", () =>
      Effect.gen(function*() {
        const { client, server } = yield* setup({
          handshake: Connection.accept("initialize", { notifications: ["initialized"] })
        })
        const early = yield* Effect.flip(client.call(Work, { ms: 1 }))
        assert.strictEqual((early as any).code, ErrorCode.ServerNotInitialized)
        assert.deepStrictEqual(yield* client.call(Initialize, {}), { ok: true })
        assert.strictEqual((yield* server.lifecycle.state)._tag, "Ready")
        const again = yield* Effect.flip(client.call(Initialize, {}))
        assert.strictEqual((again as any).code, ErrorCode.InvalidRequest)
        assert.strictEqual(yield* client.call(Work, { ms: 0 }), 0)
        assert.deepStrictEqual(
          tags(yield* Stream.runCollect(Stream.take(server.lifecycle.events, 2))),
          ["Initializing", "Ready"]
        )
      }))

    it.effect("an accepted handshake that does not come in time moves to Failed exactly at the timeout", () =>
      Effect.gen(function*() {
        const { server } = yield* setup({ handshake: Connection.accept("initialize", { timeout: "10 seconds" }) })
        yield* TestClock.adjust(Duration.millis(9999))
        assert.strictEqual((yield* server.lifecycle.state)._tag, "Starting")
        yield* TestClock.adjust(Duration.millis(1))
        const state = yield* server.lifecycle.state
        assert.strictEqual(state._tag, "Failed")
        assert.strictEqual(state._tag === "Failed" ? state.error._tag : "", "HandshakeTimeout")
        assert.strictEqual((yield* server.awaitShutdown).reason, "Failed")
      }))

    it.effect("a refused handshake leaves the lifecycle Failed; when the other side closes, the teardown runs", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const server = yield* Connection.make({
          protocol: Protocol.make({ serves: [Initialize] }),
          transport: pair.left,
          handlers: { initialize: () => Effect.fail(RpcError.make(-32000, "unsupported version")) },
          handshake: Connection.accept("initialize")
        })
        const raw = yield* makeRaw(pair.right)
        yield* raw.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} })
        assert.strictEqual((yield* raw.next).error.message, "unsupported version")
        assert.strictEqual((yield* server.lifecycle.state)._tag, "Failed")
        yield* pair.rightToLeft.close
        const report = yield* server.awaitShutdown
        assert.strictEqual(report.reason, "Failed")
      }))

    it.effect("an initiated handshake that times out fails make with HandshakeTimeout", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        yield* makeRaw(pair.right)
        const lifecycle = yield* Deferred.make<Lifecycle.Lifecycle>()
        const made = yield* Effect.forkChild(
          Connection.make({
            protocol: Protocol.make({ calls: [Initialize] }),
            transport: pair.left,
            handlers: {},
            handshake: Connection.initiate((peer) => peer.call(Initialize, {}, { timeout: "1 hour" }), {
              timeout: "10 seconds"
            }),
            onShutdown: () => Effect.void
          }).pipe(Effect.tap((c) => Deferred.succeed(lifecycle, c.lifecycle)))
        )
        yield* TestClock.adjust("10 seconds")
        const error = yield* Effect.flip(Fiber.join(made))
        assert.strictEqual(error._tag, "HandshakeTimeout")
        // What a log or an uncaught rejection prints: the error's name (its Schema identifier) and its message.
        assert.strictEqual(
          String(error),
          "@lifeline/kernel/HandshakeTimeout: the handshake did not finish within 10000 ms"
        )
      }))
  })

  describe("policy from Config", () => {
    it.effect("LIFELINE_SHUTDOWN_POLICY=drain picks a drain through the ShutdownPolicy layer", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const connection = yield* Connection.make({ protocol: Protocol.make({}), transport: pair.left, handlers: {} })
        assert.deepStrictEqual(connection.policy, ShutdownPolicy.drain("3 seconds"))
      }).pipe(
        Effect.provide(ShutdownPolicy.layerConfig.pipe(
          Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({
            env: { [ShutdownPolicy.POLICY_VARIABLE]: "drain", [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "3 seconds" }
          })))
        ))
      ))
  })

  describe("finalizers run on every path", () => {
    const paths = [
      "stop (fail-fast)",
      "stop (drain, clean)",
      "drain timeout",
      "interruption",
      "transport failure"
    ] as const
    for (const path of paths) {
      it.effect(path, () =>
        Effect.gen(function*() {
          const policy = path === "stop (drain, clean)" || path === "drain timeout"
            ? ShutdownPolicy.drain("5 seconds")
            : ShutdownPolicy.FailFast()
          const { client, counter, pair, scope, server } = yield* setup({ policy })
          const ms = path === "stop (drain, clean)" ? 100 : 60_000
          yield* Effect.forkChild(Effect.ignore(client.call(Work, { ms })))
          yield* Effect.forkChild(Effect.ignore(client.call(Work, { ms })))
          yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 2))
          switch (path) {
            case "stop (fail-fast)":
              yield* server.stop()
              break
            case "stop (drain, clean)":
            case "drain timeout": {
              const stopping = yield* Effect.forkChild(server.stop())
              yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
              yield* TestClock.adjust("5 seconds")
              yield* Fiber.join(stopping)
              break
            }
            case "interruption":
              yield* Scope.close(scope, Exit.interrupt())
              break
            case "transport failure":
              yield* pair.rightToLeft.fail("pipe broke")
              break
          }
          const report = yield* server.awaitShutdown
          yield* Scope.close(scope, Exit.void)
          assert.deepStrictEqual(yield* Ref.get(counter.ref), { acquired: 2, released: 2 })
          assert.strictEqual(report.drained, path === "stop (drain, clean)")
          const final = (yield* server.lifecycle.state)._tag
          assert.strictEqual(final, path === "transport failure" ? "Failed" : "Closed")
          // Our side of the transport is ended on every path.
          assert.isTrue(yield* server.peer.isClosed)
        }))
    }
  })

  describe("a handshake's timeout is its calls' timeout", () => {
    it.effect("a silent peer gets the full 10 s of Connection.initiate and HandshakeTimeout, not the call's 5 s", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const raw = yield* makeRaw(pair.right)
        const made = yield* Effect.forkChild(
          Connection.make({
            protocol: Protocol.make({ calls: [Initialize] }),
            transport: pair.left,
            handlers: {},
            // No timeout anywhere but the handshake's default: the peer's own default is 5 s.
            handshake: Connection.initiate((peer) => peer.call(Initialize, {}))
          })
        )
        assert.strictEqual((yield* raw.next).method, "initialize")
        yield* TestClock.adjust("5 seconds")
        yield* TestClock.adjust(Duration.millis(4999))
        assert.isTrue(Option.isNone(yield* poll(made)), "still waiting after the call's default 5 s")
        yield* TestClock.adjust(Duration.millis(1))
        const error = yield* Effect.flip(Fiber.join(made))
        assert.strictEqual(error._tag, "HandshakeTimeout")
        assert.strictEqual((error as Lifecycle.HandshakeTimeout).timeoutMillis, 10_000)
      }))

    it.effect("a call that sets its own, shorter timeout keeps it (RequestTimeout)", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        yield* makeRaw(pair.right)
        const made = yield* Effect.forkChild(
          Connection.make({
            protocol: Protocol.make({ calls: [Initialize] }),
            transport: pair.left,
            handlers: {},
            handshake: Connection.initiate((peer) => peer.call(Initialize, {}, { timeout: "2 seconds" }))
          })
        )
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual((yield* Effect.flip(Fiber.join(made)))._tag, "RequestTimeout")
      }))

    it.effect("once Ready, calls through the same peer have the peer's own timeout again", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const raw = yield* makeRaw(pair.right)
        let kept: Peer.Peer<any, any> | undefined
        const made = yield* Effect.forkChild(
          Connection.make({
            protocol: Protocol.make({ calls: [Initialize, Work] }),
            transport: pair.left,
            handlers: {},
            handshake: Connection.initiate((peer) => {
              kept = peer
              return peer.call(Initialize, {})
            })
          })
        )
        const initialize = yield* raw.next
        yield* raw.send({ jsonrpc: "2.0", id: initialize.id, result: { ok: true } })
        yield* Fiber.join(made)
        const call = yield* Effect.forkChild(Effect.flip(kept!.call(Work, { ms: 1 })))
        yield* raw.next
        yield* TestClock.adjust("5 seconds")
        assert.strictEqual((yield* Fiber.join(call))._tag, "RequestTimeout")
      }))
  })

  describe("work cut off is cancelled on the wire when the protocol can", () => {
    const LspServer = Protocol.make({ serves: [Work], cancellation: Cancellation.lsp })

    it.effect("at the drain deadline: $/cancelRequest for each call cut off, before the transport ends", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const raw = yield* makeRaw(pair.right)
        const connection = yield* Connection.make({
          protocol: Protocol.flip(LspServer),
          transport: pair.left,
          handlers: {},
          policy: ShutdownPolicy.drain("3 seconds"),
          requestTimeout: "1 hour"
        })
        const call = yield* Effect.forkChild(Effect.flip(connection.peer.call(Work, { ms: 60_000 })))
        const request = yield* raw.next
        const stopping = yield* Effect.forkChild(connection.stop())
        yield* eventually(Effect.map(connection.lifecycle.state, (s) => s._tag === "Closing"))
        yield* TestClock.adjust("3 seconds")
        yield* Fiber.join(stopping)
        assert.strictEqual(((yield* Fiber.join(call)) as PeerError.ShutdownError).reason, "DrainTimeout")
        assert.deepStrictEqual(yield* raw.next, {
          jsonrpc: "2.0",
          method: "$/cancelRequest",
          params: { id: request.id }
        })
        assert.deepStrictEqual((yield* connection.awaitShutdown).cutOff, [
          { direction: "outbound", id: request.id, method: "work" }
        ])
      }))

    it.effect("the other side's handler is interrupted, so both sides stop: LSP answers it -32800", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const interrupted = yield* Deferred.make<void>()
        const server = yield* Connection.make({
          protocol: LspServer,
          transport: pair.right,
          handlers: {
            work: ({ ms }) =>
              Effect.as(Effect.sleep(Duration.millis(ms)), ms).pipe(
                Effect.onInterrupt(() => Deferred.succeed(interrupted, void 0))
              )
          },
          policy: ShutdownPolicy.FailFast()
        })
        const client = yield* Connection.make({
          protocol: Protocol.flip(LspServer),
          transport: pair.left,
          handlers: {},
          policy: ShutdownPolicy.drain("1 second"),
          requestTimeout: "1 hour"
        })
        yield* Effect.forkChild(Effect.ignore(client.peer.call(Work, { ms: 60_000 })))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1))
        const stopping = yield* Effect.forkChild(client.stop())
        yield* eventually(Effect.map(client.lifecycle.state, (s) => s._tag === "Closing"))
        yield* TestClock.adjust("1 second")
        yield* Fiber.join(stopping)
        yield* Deferred.await(interrupted)
        assert.strictEqual((yield* server.peer.stats).cancelledByPeer, 1)
      }))

    it.effect("a fail-fast stop cancels too", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const raw = yield* makeRaw(pair.right)
        const connection = yield* Connection.make({
          protocol: Protocol.flip(LspServer),
          transport: pair.left,
          handlers: {},
          policy: ShutdownPolicy.FailFast()
        })
        yield* Effect.forkChild(Effect.ignore(connection.peer.call(Work, { ms: 1 })))
        const request = yield* raw.next
        yield* connection.stop()
        assert.deepStrictEqual(yield* raw.next, {
          jsonrpc: "2.0",
          method: "$/cancelRequest",
          params: { id: request.id }
        })
      }))

    it.effect("plain JSON-RPC (Cancellation.none): nothing but the request is ever sent", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        yield* makeRaw(pair.right)
        const connection = yield* Connection.make({
          protocol: Protocol.make({ calls: [Work] }),
          transport: pair.left,
          handlers: {},
          policy: ShutdownPolicy.drain("1 second")
        })
        yield* Effect.forkChild(Effect.ignore(connection.peer.call(Work, { ms: 1 })))
        yield* eventually(Effect.map(connection.peer.stats, (s) => s.pendingOutbound === 1))
        const stopping = yield* Effect.forkChild(connection.stop())
        yield* eventually(Effect.map(connection.lifecycle.state, (s) => s._tag === "Closing"))
        yield* TestClock.adjust("1 second")
        yield* Fiber.join(stopping)
        assert.deepStrictEqual((yield* wire(pair.leftToRight)).map((m) => m.method), ["work"])
      }))
  })

  describe("where the policy comes from: ShutdownPolicy.resolve", () => {
    const env = (vars: Record<string, string>) =>
      Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env: vars }))
    const makeOn = (options: { readonly policy?: ShutdownPolicy.Policy } = {}) =>
      Effect.flatMap(
        TestTransport.makePair(),
        (pair) => Connection.make({ protocol: Protocol.make({}), transport: pair.left, handlers: {}, ...options })
      )
    const drainEnv = {
      [ShutdownPolicy.POLICY_VARIABLE]: "drain",
      [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "10 seconds"
    }

    it.effect("the environment, when neither the option nor the service gives one", () =>
      Effect.gen(function*() {
        const connection = yield* makeOn()
        assert.deepStrictEqual(connection.policy, ShutdownPolicy.drain("10 seconds"))
      }).pipe(env(drainEnv)))

    it.effect("fail-fast when nothing says otherwise", () =>
      Effect.gen(function*() {
        assert.deepStrictEqual((yield* makeOn()).policy, ShutdownPolicy.FailFast())
      }).pipe(env({})))

    it.effect("the service beats the environment; the option beats both", () =>
      Effect.gen(function*() {
        assert.deepStrictEqual((yield* makeOn()).policy, ShutdownPolicy.drain("2 seconds"))
        assert.deepStrictEqual((yield* makeOn({ policy: ShutdownPolicy.FailFast() })).policy, ShutdownPolicy.FailFast())
      }).pipe(Effect.provide(ShutdownPolicy.layerDrain("2 seconds")), env(drainEnv)))

    it.effect("an invalid environment fails make with the ConfigError naming the variable", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(makeOn())
        assert.strictEqual(error._tag, "ConfigError")
        assert.include(String(error), ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE)
      }).pipe(
        env({ [ShutdownPolicy.POLICY_VARIABLE]: "drain", [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "ten seconds" })
      ))
  })

  describe("GracefulShutdown: a request to stop the program", () => {
    it.effect("stops every registered connection under its policy: a call the program waits for finishes in the drain", () =>
      Effect.gen(function*() {
        const registry = yield* GracefulShutdown.GracefulShutdown
        const { client, server } = yield* setup({ policy: ShutdownPolicy.drain("3 seconds") })
        assert.strictEqual(yield* registry.size, 1)
        // The call "the main fiber" waits for: served by the other side in 2 s.
        const call = yield* Effect.forkChild(server.peer.call(Work, { ms: 2000 }, { timeout: "1 hour" }))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.pendingOutbound === 1))
        const stopping = yield* Effect.forkChild(registry.stop)
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        assert.strictEqual((yield* Effect.flip(server.peer.call(Work, { ms: 1 })))._tag, "ShutdownError")
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual(yield* Fiber.join(call), 2000)
        yield* Fiber.join(stopping)
        const report = yield* server.awaitShutdown
        assert.isTrue(report.drained)
        assert.strictEqual(report.reason, "Interrupted")
        assert.strictEqual(yield* registry.phase, "Stopping")
        yield* client.close(new PeerError.PeerClosed({ reason: "TransportClosed" }))
      }).pipe(Effect.provide(GracefulShutdown.layer)))

    it.effect("force cuts a drain short; a connection made with gracefulShutdown: false is not registered", () =>
      Effect.gen(function*() {
        const registry = yield* GracefulShutdown.GracefulShutdown
        const { client, server } = yield* setup({ policy: ShutdownPolicy.drain("1 minute") })
        const pair = yield* TestTransport.makePair()
        yield* Connection.make({
          protocol: Protocol.make({}),
          transport: pair.left,
          handlers: {},
          gracefulShutdown: false
        })
        assert.strictEqual(yield* registry.size, 1)
        yield* Effect.forkChild(Effect.ignore(client.call(Work, { ms: 60_000 })))
        yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1))
        const stopping = yield* Effect.forkChild(registry.stop)
        yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
        yield* registry.force
        yield* Fiber.join(stopping)
        const report = yield* server.awaitShutdown
        assert.isFalse(report.drained)
        assert.strictEqual(report.cutOff.length, 1)
        assert.strictEqual(report.finishedAt - report.startedAt, 0)
      }).pipe(Effect.provide(GracefulShutdown.layer)))
    it.effect("a connection Failed by a refused handshake is torn down by the program's stop, not left waiting", () =>
      Effect.gen(function*() {
        const registry = yield* GracefulShutdown.GracefulShutdown
        const pair = yield* TestTransport.makePair()
        const server = yield* Connection.make({
          protocol: Protocol.make({ serves: [Initialize] }),
          transport: pair.left,
          handlers: { initialize: () => Effect.fail(RpcError.make(-32000, "unsupported version")) },
          handshake: Connection.accept("initialize")
        })
        const raw = yield* makeRaw(pair.right)
        yield* raw.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} })
        yield* raw.next
        assert.strictEqual((yield* server.lifecycle.state)._tag, "Failed")
        yield* registry.stop
        assert.strictEqual((yield* server.awaitShutdown).reason, "Failed")
      }).pipe(Effect.provide(GracefulShutdown.layer)))
  })
})
