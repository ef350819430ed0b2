/**
 * The peer's pending table, at the edges mutation testing found untested (`pnpm mutate
 * packages/kernel/src/internal/peer/outbound.ts`): what a call that ends without its answer tells the other side, and
 * what an answer nobody waits for is logged as. Public entry points only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cancellation, Connection, Method, Peer, Protocol, ShutdownPolicy } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Cause, Effect, Exit, Fiber, Logger, Schema } from "effect"
import { TestClock } from "effect/testing"
import { eventually, makeRaw, wire } from "./utils.js"

const Sleep = Method.request("sleep", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })

const connect = (cancellation: Cancellation.Cancellation) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    const raw = yield* makeRaw(pair.right)
    const peer = yield* Peer.make({
      protocol: Protocol.make({ calls: [Sleep], cancellation }),
      transport: pair.left,
      handlers: {},
      requestTimeout: "2 seconds"
    })
    return { peer, raw }
  })

describe("Peer pending table", () => {
  it.effect("MCP: a call that times out is cancelled with its timeout, one given up by its caller says so", () =>
    Effect.gen(function*() {
      const { peer, raw } = yield* connect(Cancellation.mcp)
      const timedOut = yield* Effect.forkChild(Effect.flip(peer.call(Sleep, { ms: 60_000 })))
      const first = yield* raw.next
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* Fiber.join(timedOut))._tag, "RequestTimeout")
      assert.deepStrictEqual(yield* raw.next, {
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: first.id, reason: "timed out after 2000 ms" }
      })

      const abandoned = yield* Effect.forkChild(peer.call(Sleep, { ms: 60_000 }))
      const second = yield* raw.next
      yield* Fiber.interrupt(abandoned)
      assert.deepStrictEqual(yield* raw.next, {
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: second.id, reason: "cancelled by the caller" }
      })
      const stats = yield* peer.stats
      assert.strictEqual(stats.timedOut, 1)
      assert.strictEqual(stats.cancelledByUs, 1)
      assert.strictEqual(stats.pendingOutbound, 0)
    }))

  it.effect("an answer nobody waits for: counted, and logged as a warning that says which", () =>
    Effect.gen(function*() {
      const warnings: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (logLevel === "Warn") warnings.push(Array.isArray(message) ? String(message[0]) : String(message))
      })
      yield* Effect.gen(function*() {
        const { peer, raw } = yield* connect(Cancellation.none)
        yield* raw.send({ jsonrpc: "2.0", id: 99, result: 1 })
        yield* eventually(Effect.map(peer.stats, (s) => s.unknownResponses === 1), "one unknown answer")
        // Such WARNs are rate-limited (one per `invalidMessageLogInterval`, 1 second): the next one is a second later.
        yield* TestClock.adjust("1 second")
        yield* raw.send({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } })
        yield* eventually(Effect.map(peer.stats, (s) => s.unknownResponses === 2), "two unknown answers")
        // A string id is shown escaped and cut, whatever its length.
        yield* TestClock.adjust("1 second")
        yield* raw.send({ jsonrpc: "2.0", id: `\u001b[2J${"x".repeat(10_000)}`, result: 1 })
        yield* eventually(Effect.map(peer.stats, (s) => s.unknownResponses === 3), "three unknown answers")
        assert.strictEqual((yield* peer.stats).lateResponses, 0)
      }).pipe(Effect.provide(Logger.layer([logger])))
      assert.deepStrictEqual(warnings, [
        "response to an id never sent: 99",
        "the peer reported an error it could not tie to a request",
        `response to an id never sent: "\\u001b[2J${"x".repeat(116)}…(10004 characters)"`
      ])
    }))

  it.effect("a drain ends when the last pending call ends without its answer (timed out or given up)", () =>
    Effect.gen(function*() {
      for (const how of ["timed out", "given up"] as const) {
        const pair = yield* TestTransport.makePair()
        yield* makeRaw(pair.right)
        const connection = yield* Connection.make({
          protocol: Protocol.make({ calls: [Sleep] }),
          transport: pair.left,
          handlers: {},
          policy: ShutdownPolicy.drain("10 seconds")
        })
        const call = yield* Effect.forkChild(
          Effect.exit(connection.peer.call(Sleep, { ms: 60_000 }, { timeout: "2 seconds" }))
        )
        yield* eventually(Effect.map(connection.peer.stats, (s) => s.pendingOutbound === 1))
        const stopping = yield* Effect.forkChild(connection.stop())
        yield* eventually(Effect.map(connection.lifecycle.state, (s) => s._tag === "Closing"))
        if (how === "timed out") yield* TestClock.adjust("2 seconds")
        else yield* Fiber.interrupt(call)
        assert.strictEqual(yield* Fiber.join(stopping), "Stopped", how)
        const report = yield* connection.awaitShutdown
        assert.isTrue(report.drained, how)
        assert.strictEqual(report.finishedAt - report.startedAt, how === "timed out" ? 2000 : 0, how)
      }
    }))

  it.effect("deadlines are counted from the peer's own start, whatever the Clock said then", () =>
    Effect.gen(function*() {
      yield* TestClock.adjust("1 hour")
      const { peer, raw } = yield* connect(Cancellation.none)
      const call = yield* Effect.forkChild(Effect.flip(peer.call(Sleep, { ms: 1 })))
      yield* raw.next
      yield* TestClock.adjust("1999 millis")
      assert.strictEqual((yield* peer.stats).pendingOutbound, 1)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual((yield* Fiber.join(call))._tag, "RequestTimeout")
    }))

  it.effect("a call that cannot be written fails at once, with nothing sent and nothing pending", () =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      yield* makeRaw(pair.right)
      const peer = yield* Peer.make({ protocol: Protocol.make({ calls: [Sleep] }), transport: pair.left, handlers: {} })
      // Params JSON cannot carry (a bigint), and params the method's Schema refuses.
      const unwritable = yield* Effect.exit(peer.callUntyped("sleep", { ms: 1n } as any))
      assert.isTrue(Exit.isFailure(unwritable) && !Cause.hasDies(unwritable.cause))
      const invalid = yield* Effect.flip(peer.call(Sleep, { ms: "soon" } as any))
      assert.strictEqual((invalid as any).code, -32602)
      const stats = yield* peer.stats
      assert.strictEqual(stats.pendingOutbound, 0)
      assert.strictEqual(stats.requestsSent, 0)
      assert.deepStrictEqual(yield* wire(pair.leftToRight), [])
    }))

  it.effect("notifications: counted when sent, refused once the connection is lost, a defect when the params are wrong", () =>
    Effect.gen(function*() {
      const Ping = Method.notification("ping", { params: Schema.Struct({ n: Schema.Number }) })
      const pair = yield* TestTransport.makePair()
      yield* makeRaw(pair.right)
      const peer = yield* Peer.make({ protocol: Protocol.make({ calls: [Ping] }), transport: pair.left, handlers: {} })
      yield* peer.notify(Ping, { n: 1 })
      assert.strictEqual((yield* peer.stats).notificationsSent, 1)
      const wrong = yield* Effect.exit(peer.notify(Ping, { n: "one" } as any))
      assert.isTrue(Exit.isFailure(wrong) && Cause.hasDies(wrong.cause))
      assert.include(
        String(Exit.isFailure(wrong) ? Cause.squash(wrong.cause) : ""),
        "ping: params do not match their Schema"
      )
      yield* pair.rightToLeft.close
      yield* eventually(peer.isClosed, "closed")
      const refused = yield* Effect.flip(peer.notify(Ping, { n: 2 }))
      assert.strictEqual(refused._tag, "PeerClosed")
      assert.strictEqual((yield* peer.stats).notificationsSent, 1)
    }))

  it.effect("a connection lost under a Connection: later calls say how it was lost, not that it is shutting down", () =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      yield* makeRaw(pair.right)
      const connection = yield* Connection.make({
        protocol: Protocol.make({ calls: [Sleep] }),
        transport: pair.left,
        handlers: {}
      })
      yield* pair.rightToLeft.close
      yield* connection.awaitShutdown
      const error = yield* Effect.flip(connection.peer.call(Sleep, { ms: 1 }))
      assert.strictEqual(error._tag, "PeerClosed")
    }))

  it.effect("a stop that cuts off several calls reports each one, in the order they were made", () =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      const raw = yield* makeRaw(pair.right)
      const connection = yield* Connection.make({
        protocol: Protocol.make({ calls: [Sleep] }),
        transport: pair.left,
        handlers: {}
      })
      for (let i = 0; i < 3; i++) yield* Effect.forkChild(Effect.ignore(connection.peer.call(Sleep, { ms: i })))
      const ids = [(yield* raw.next).id, (yield* raw.next).id, (yield* raw.next).id]
      yield* connection.stop()
      assert.deepStrictEqual(
        (yield* connection.awaitShutdown).cutOff,
        ids.map((id) => ({ direction: "outbound", id, method: "sleep" }))
      )
    }))
})
