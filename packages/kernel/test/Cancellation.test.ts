import { assert, describe, it } from "@effect/vitest"
import { ErrorCode } from "@lifeline/jsonrpc"
import { Cancellation, Method, Peer, PeerError, Protocol } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Deferred, Duration, Effect, Fiber, Option, Ref, Schema } from "effect"
import { TestClock } from "effect/testing"
import { eventually, makeRaw, poll, wire, yieldTimes } from "./utils.js"

const Echo = Method.request("echo", { params: Schema.Struct({ text: Schema.String }), result: Schema.String })
const Sleep = Method.request("sleep", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })

const sleepHandler = ({ ms }: { readonly ms: number }) => Effect.as(Effect.sleep(Duration.millis(ms)), ms)

describe("Cancellation", () => {
  describe("spellings", () => {
    it("LSP: $/cancelRequest with { id }, answered -32800", () => {
      assert.strictEqual(Cancellation.lsp.method, "$/cancelRequest")
      assert.deepStrictEqual(Cancellation.lsp.encode(7, "timed out after 5000 ms"), { id: 7 })
      assert.strictEqual(Cancellation.lsp.decode({ id: "a" }), "a")
      assert.strictEqual(Cancellation.lsp.decode({ id: 3 }), 3)
      for (const params of [undefined, null, {}, { id: 1.5 }, { id: null }, { requestId: 1 }, [1]]) {
        assert.isUndefined(Cancellation.lsp.decode(params), JSON.stringify(params))
      }
      assert.notStrictEqual(Cancellation.lsp.answerCancelled, false)
    })

    it("MCP: notifications/cancelled with { requestId, reason? }, not answered", () => {
      assert.strictEqual(Cancellation.mcp.method, "notifications/cancelled")
      assert.deepStrictEqual(Cancellation.mcp.encode("r-1", "cancelled by the caller"), {
        requestId: "r-1",
        reason: "cancelled by the caller"
      })
      assert.strictEqual(Cancellation.mcp.decode({ requestId: 4, reason: "user" }), 4)
      assert.strictEqual(Cancellation.mcp.decode({ requestId: "x" }), "x")
      for (const params of [undefined, null, {}, { id: 1 }, { requestId: {} }]) {
        assert.isUndefined(Cancellation.mcp.decode(params), JSON.stringify(params))
      }
      assert.strictEqual(Cancellation.mcp.answerCancelled, false)
    })

    it("a protocol has none unless it opts in, and keeps its own when flipped", () => {
      assert.isTrue(Cancellation.isNone(Protocol.make({ calls: [Echo] }).cancellation))
      assert.isUndefined(Cancellation.spelling(Cancellation.none))
      assert.isFalse(Cancellation.isNone(Cancellation.lsp))
      assert.strictEqual(Cancellation.spelling(Cancellation.mcp), Cancellation.mcp)
      const lsp = Protocol.make({ serves: [Echo], cancellation: Cancellation.lsp })
      assert.strictEqual(lsp.cancellation, Cancellation.lsp)
      assert.strictEqual(Protocol.flip(lsp).cancellation, Cancellation.lsp)
      assert.strictEqual(Protocol.flip(Protocol.make({ serves: [Echo] })).cancellation, Cancellation.none)
    })
  })

  describe("none (plain JSON-RPC 2.0, the default)", () => {
    it.effect("a timed-out call sends nothing after its request; its late answer is dropped and counted", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const client = yield* Peer.make({
          protocol: Protocol.make({ calls: [Echo] }),
          transport: pair.right,
          handlers: {}
        })
        const raw = yield* makeRaw(pair.left)
        const call = yield* Effect.forkChild(client.call(Echo, { text: "hello?" }))
        const request = yield* raw.next
        yield* TestClock.adjust(Duration.millis(4999))
        assert.isTrue(Option.isNone(yield* poll(call)))
        yield* TestClock.adjust(Duration.millis(1))
        assert.instanceOf(yield* Effect.flip(Fiber.join(call)), PeerError.RequestTimeout)
        // A marker after the timeout: frames leave in order, so anything sent for the timed-out call comes before it.
        yield* client.notifyUntyped("marker")
        assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", method: "marker" })
        yield* yieldTimes(20)
        assert.deepStrictEqual(yield* wire(pair.rightToLeft), [
          { jsonrpc: "2.0", id: request.id, method: "echo", params: { text: "hello?" } },
          { jsonrpc: "2.0", method: "marker" }
        ])
        yield* raw.send({ jsonrpc: "2.0", id: request.id, result: "too late" })
        yield* eventually(Effect.map(client.stats, (s) => s.lateResponses === 1), "late answer counted")
        const stats = yield* client.stats
        assert.strictEqual(stats.timedOut, 1)
        assert.strictEqual(stats.pendingOutbound, 0)
        assert.strictEqual(stats.unknownResponses, 0)
        assert.strictEqual(stats.tombstones, 1)
      }))

    it.effect("an interrupted call sends nothing either; its late answer is dropped and counted", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const client = yield* Peer.make({
          protocol: Protocol.make({ calls: [Echo] }),
          transport: pair.right,
          handlers: {}
        })
        const raw = yield* makeRaw(pair.left)
        const call = yield* Effect.forkChild(client.call(Echo, { text: "wait" }))
        const request = yield* raw.next
        yield* Fiber.interrupt(call)
        yield* client.notifyUntyped("marker")
        assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", method: "marker" })
        assert.deepStrictEqual((yield* wire(pair.rightToLeft)).map((m) => m.method), ["echo", "marker"])
        yield* raw.send({ jsonrpc: "2.0", id: request.id, result: "wait" })
        yield* eventually(Effect.map(client.stats, (s) => s.lateResponses === 1), "late answer counted")
        assert.strictEqual((yield* client.stats).cancelledByUs, 1)
      }))

    it.effect("an inbound $/cancelRequest is just an unknown notification: the handler runs on and answers", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const unknown = yield* Ref.make<Array<string>>([])
        const server = yield* Peer.make({
          protocol: Protocol.make({ serves: [Sleep] }),
          transport: pair.left,
          handlers: { sleep: sleepHandler },
          onUnknownNotification: (method) => Ref.update(unknown, (all) => [...all, method])
        })
        const raw = yield* makeRaw(pair.right)
        yield* raw.send({ jsonrpc: "2.0", id: 1, method: "sleep", params: { ms: 1000 } })
        yield* eventually(Effect.map(server.stats, (s) => s.activeInbound === 1))
        yield* raw.send({ jsonrpc: "2.0", method: "$/cancelRequest", params: { id: 1 } })
        yield* eventually(Effect.map(Ref.get(unknown), (all) => all.length === 1), "the notification reached us")
        assert.deepStrictEqual(yield* Ref.get(unknown), ["$/cancelRequest"])
        assert.strictEqual((yield* server.stats).activeInbound, 1)
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", id: 1, result: 1000 })
        assert.strictEqual((yield* server.stats).cancelledByPeer, 0)
      }))
  })

  describe("MCP", () => {
    it.effect("an abandoned call sends notifications/cancelled with its requestId and a reason", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const client = yield* Peer.make({
          protocol: Protocol.make({ calls: [Echo], cancellation: Cancellation.mcp }),
          transport: pair.right,
          handlers: {}
        })
        const raw = yield* makeRaw(pair.left)
        const timedOut = yield* Effect.forkChild(client.call(Echo, { text: "a" }, { timeout: "100 millis" }))
        yield* raw.next
        yield* TestClock.adjust("100 millis")
        assert.strictEqual((yield* Effect.flip(Fiber.join(timedOut)))._tag, "RequestTimeout")
        assert.strictEqual((yield* raw.next).method, "notifications/cancelled")
        const interrupted = yield* Effect.forkChild(client.call(Echo, { text: "b" }))
        assert.strictEqual((yield* raw.next).id, 2)
        yield* Fiber.interrupt(interrupted)
        assert.strictEqual((yield* raw.next).method, "notifications/cancelled")
        yield* client.notifyUntyped("marker")
        assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", method: "marker" })
        assert.deepStrictEqual(yield* wire(pair.rightToLeft), [
          { jsonrpc: "2.0", id: 1, method: "echo", params: { text: "a" } },
          {
            jsonrpc: "2.0",
            method: "notifications/cancelled",
            params: { requestId: 1, reason: "timed out after 100 ms" }
          },
          { jsonrpc: "2.0", id: 2, method: "echo", params: { text: "b" } },
          {
            jsonrpc: "2.0",
            method: "notifications/cancelled",
            params: { requestId: 2, reason: "cancelled by the caller" }
          },
          { jsonrpc: "2.0", method: "marker" }
        ])
      }))

    it.effect("round-trips between two peers: the handler is interrupted and the cancelled request gets no answer", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const interrupted = yield* Deferred.make<void>()
        const protocol = Protocol.make({ serves: [Sleep], cancellation: Cancellation.mcp })
        const server = yield* Peer.make({
          protocol,
          transport: pair.left,
          handlers: {
            sleep: (params) =>
              params.ms === 0
                ? Effect.succeed(0)
                : Effect.onInterrupt(sleepHandler(params), () => Deferred.succeed(interrupted, void 0))
          }
        })
        const client = yield* Peer.make({ protocol: Protocol.flip(protocol), transport: pair.right, handlers: {} })
        const call = yield* Effect.forkChild(client.call(Sleep, { ms: 10_000 }))
        yield* eventually(Effect.map(server.stats, (s) => s.activeInbound === 1), "the handler runs")
        yield* Fiber.interrupt(call)
        yield* Deferred.await(interrupted)
        yield* eventually(Effect.map(server.stats, (s) => s.activeInbound === 0), "the handler is done")
        // The next call's answer is the only frame the server ever sent: none for the cancelled request.
        assert.strictEqual(yield* client.call(Sleep, { ms: 0 }), 0)
        yield* yieldTimes(20)
        assert.deepStrictEqual(yield* wire(pair.leftToRight), [{ jsonrpc: "2.0", id: 2, result: 0 }])
        assert.deepStrictEqual(yield* wire(pair.rightToLeft), [
          { jsonrpc: "2.0", id: 1, method: "sleep", params: { ms: 10_000 } },
          {
            jsonrpc: "2.0",
            method: "notifications/cancelled",
            params: { requestId: 1, reason: "cancelled by the caller" }
          },
          { jsonrpc: "2.0", id: 2, method: "sleep", params: { ms: 0 } }
        ])
        const serverStats = yield* server.stats
        assert.strictEqual(serverStats.cancelledByPeer, 1)
        const clientStats = yield* client.stats
        assert.strictEqual(clientStats.cancelledByUs, 1)
        assert.strictEqual(clientStats.lateResponses, 0)
      }))
  })

  describe("the Peer option overrides the protocol's", () => {
    it.effect("Cancellation.none silences a protocol that has one", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const client = yield* Peer.make({
          protocol: Protocol.make({ calls: [Echo], cancellation: Cancellation.lsp }),
          transport: pair.right,
          handlers: {},
          cancellation: Cancellation.none
        })
        const raw = yield* makeRaw(pair.left)
        const call = yield* Effect.forkChild(client.call(Echo, { text: "x" }, { timeout: "1 second" }))
        yield* raw.next
        yield* TestClock.adjust("1 second")
        assert.strictEqual((yield* Effect.flip(Fiber.join(call)))._tag, "RequestTimeout")
        yield* client.notifyUntyped("marker")
        assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", method: "marker" })
        assert.deepStrictEqual((yield* wire(pair.rightToLeft)).map((m) => m.method), ["echo", "marker"])
      }))

    it.effect("a spelling gives a protocol without one cancellation both ways", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const protocol = Protocol.make({ serves: [Sleep] })
        const server = yield* Peer.make({
          protocol,
          transport: pair.left,
          handlers: { sleep: sleepHandler },
          cancellation: Cancellation.lsp
        })
        const client = yield* Peer.make({
          protocol: Protocol.flip(protocol),
          transport: pair.right,
          handlers: {},
          cancellation: Cancellation.lsp
        })
        const call = yield* Effect.forkChild(client.call(Sleep, { ms: 10_000 }, { timeout: "2 seconds" }))
        yield* eventually(Effect.map(server.stats, (s) => s.activeInbound === 1), "the handler runs")
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual((yield* Effect.flip(Fiber.join(call)))._tag, "RequestTimeout")
        yield* eventually(Effect.map(server.stats, (s) => s.cancelledByPeer === 1), "the handler is cancelled")
        // LSP answers the cancelled request -32800; the answer meets the tombstone on our side.
        yield* eventually(Effect.map(client.stats, (s) => s.lateResponses === 1), "the -32800 answer is dropped")
        assert.deepStrictEqual(yield* wire(pair.rightToLeft), [
          { jsonrpc: "2.0", id: 1, method: "sleep", params: { ms: 10_000 } },
          { jsonrpc: "2.0", method: "$/cancelRequest", params: { id: 1 } }
        ])
        assert.deepStrictEqual(yield* wire(pair.leftToRight), [
          { jsonrpc: "2.0", id: 1, error: { code: ErrorCode.RequestCancelled, message: "Request cancelled" } }
        ])
      }))
  })
})
