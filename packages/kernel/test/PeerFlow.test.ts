import { assert, describe, it } from "@effect/vitest"
import { Cancellation, Connection, Method, Peer, PeerError, PeerMetrics, Protocol } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import type { Duration } from "effect"
import { Deferred, Effect, Exit, Fiber, Metric, Option, Schema } from "effect"
import { TestClock } from "effect/testing"
import { eventually, makeRaw, poll, yieldTimes } from "./utils.js"

const Get = Method.request("get", { params: Schema.Struct({ n: Schema.Number }), result: Schema.String })
const Slow = Method.request("slow", { params: Schema.Struct({}), result: Schema.Null })
const Ping = Method.request("ping", { params: Schema.Struct({}), result: Schema.String })

const Server = Protocol.make({ serves: [Get, Slow], calls: [Ping], cancellation: Cancellation.lsp })

const request = (id: number, method = "get", params: unknown = { n: id }) => ({ jsonrpc: "2.0", id, method, params })

/**
 * A server whose answers nobody reads: the link towards the raw client is paused and holds one chunk, the outbound
 * queue two frames, and at most four answers may wait.
 */
const setup = (
  stallTimeout: Duration.Input = "10 seconds",
  bounds: { readonly maxPendingAnswers?: number; readonly maxPendingAnswerBytes?: number; outboundCapacity?: number } =
    {}
) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair({ capacity: 1 })
    const slowStarted = yield* Deferred.make<void>()
    const server = yield* Peer.make({
      protocol: Server,
      transport: pair.right,
      handlers: {
        get: ({ n }) => Effect.succeed(`answer ${n}`),
        slow: () => Effect.andThen(Deferred.succeed(slowStarted, void 0), Effect.never)
      },
      outboundCapacity: 2,
      maxPendingAnswers: 4,
      stallTimeout,
      ...bounds
    })
    yield* pair.rightToLeft.pause
    const raw = yield* makeRaw(pair.left)
    return { pair, server, raw, slowStarted }
  })

type Raw = Effect.Success<ReturnType<typeof makeRaw>>
type Server = Effect.Success<ReturnType<typeof setup>>["server"]

/**
 * Sends requests 1, 2, … one at a time, each once the one before was admitted, until answers are at their bound.
 * Returns the next id.
 */
const fill = (raw: Raw, server: Server, full = (s: Peer.Stats) => s.pendingAnswers >= 4) =>
  Effect.gen(function*() {
    let id = 1
    while (!full(yield* server.stats)) {
      const received = (yield* server.stats).requestsReceived
      yield* raw.send(request(id++))
      yield* eventually(Effect.map(server.stats, (s) => s.requestsReceived === received + 1), `request ${id - 1}`)
      yield* yieldTimes(20)
    }
    return id
  })

/** Sends the messages in order from a fiber of their own: a send waits while the server's reader holds a frame. */
const sendAll = (raw: Raw, messages: ReadonlyArray<unknown>) => Effect.forkChild(Effect.forEach(messages, raw.send))

/** Ends both links, so the writers stuck on them fail and the peers' teardown does not wait for a flush. */
const endLinks = (pair: TestTransport.Pair) => Effect.andThen(pair.leftToRight.close, pair.rightToLeft.close)

describe("Peer flow control: answers waiting to be written", () => {
  it.effect("at the bound the reader holds the first new request and reads nothing after it until answers drain", () =>
    Effect.gen(function*() {
      const { pair, raw, server } = yield* setup()
      const first = yield* Effect.forkChild(server.call(Ping, {}, { timeout: "1 hour" }))
      const next = yield* fill(raw, server)
      const admitted = (yield* server.stats).requestsReceived
      // The held request, then the answer to our call: it stays in the stream, unread.
      yield* sendAll(raw, [request(next), { jsonrpc: "2.0", id: 1, result: "pong" }])
      yield* eventually(Effect.map(server.stats, (s) => s.readsHeld === 1), "reading held")
      yield* yieldTimes(100)
      const held = yield* server.stats
      assert.strictEqual(held.pendingAnswers, 4)
      assert.strictEqual(held.requestsReceived, admitted)
      assert.strictEqual(held.responsesReceived, 0)
      assert.isTrue(Option.isNone(yield* poll(first)))
      // The client reads: answers drain below the bound, the held request is served and what follows it is read.
      yield* pair.rightToLeft.resume
      assert.strictEqual(yield* Fiber.join(first), "pong")
      const answered = new Set<number>()
      while (answered.size < next) {
        const message = yield* raw.next
        if (typeof message.id === "number" && message.result !== undefined) answered.add(message.id)
      }
      const after = yield* server.stats
      assert.strictEqual(after.requestsReceived, admitted + 1)
      assert.strictEqual(after.readsHeld, 1)
      assert.strictEqual(after.unresponsive, 0)
      assert.strictEqual(after.pendingAnswers, 0)
      assert.strictEqual(after.pendingAnswerBytes, 0)
      assert.isFalse(yield* server.isClosed)
      yield* endLinks(pair)
    }))

  it.effect("at the bound, responses to our calls and cancellations are still read and handled", () =>
    Effect.gen(function*() {
      const { pair, raw, server, slowStarted } = yield* setup()
      const call = yield* Effect.forkChild(server.call(Ping, {}, { timeout: "1 hour" }))
      yield* raw.send(request(100, "slow", {}))
      yield* Deferred.await(slowStarted)
      const next = yield* fill(raw, server)
      yield* sendAll(raw, [
        { jsonrpc: "2.0", id: 1, result: "pong" },
        { jsonrpc: "2.0", method: "$/cancelRequest", params: { id: 100 } },
        request(next)
      ])
      assert.strictEqual(yield* Fiber.join(call), "pong")
      yield* eventually(Effect.map(server.stats, (s) => s.cancelledByPeer === 1), "the slow request cancelled")
      yield* eventually(Effect.map(server.stats, (s) => s.readsHeld === 1), "the next request held")
      const stats = yield* server.stats
      assert.strictEqual(stats.requestsReceived, next)
      assert.strictEqual(stats.responsesReceived, 1)
      yield* endLinks(pair)
    }))

  it.effect("a hold that lasts stallTimeout ends the connection as unresponsive, exactly at the bound", () =>
    Effect.gen(function*() {
      const { pair, raw, server } = yield* setup("10 seconds")
      const call = yield* Effect.forkChild(Effect.exit(server.call(Ping, {}, { timeout: "1 hour" })))
      const next = yield* fill(raw, server)
      yield* sendAll(raw, [request(next)])
      yield* eventually(Effect.map(server.stats, (s) => s.readsHeld === 1), "reading held")
      yield* TestClock.adjust("9999 millis")
      yield* yieldTimes(50)
      assert.isFalse(yield* server.isClosed)
      assert.strictEqual((yield* server.stats).unresponsive, 0)
      yield* TestClock.adjust("1 millis")
      const reason = yield* server.closed
      assert.strictEqual(reason._tag === "PeerClosed" && reason.reason, "Unresponsive")
      assert.strictEqual((yield* server.stats).unresponsive, 1)
      // Our pending call fails with the same reason.
      const exit = yield* Fiber.join(call)
      const error = Exit.isFailure(exit) ? Exit.findErrorOption(exit) : Option.none()
      assert.strictEqual(Option.isSome(error) && (error.value as any).reason, "Unresponsive")
      yield* endLinks(pair)
    }))

  it.effect("while the connection is ending already (a drain), the stall bound leaves the hold to the drain's bound", () =>
    Effect.gen(function*() {
      const { pair, raw, server } = yield* setup("10 seconds")
      const next = yield* fill(raw, server)
      yield* sendAll(raw, [request(next)])
      yield* eventually(Effect.map(server.stats, (s) => s.readsHeld === 1), "reading held")
      // What a Connection does when a drain starts.
      yield* server.refuseNew(new PeerError.ShutdownError({ reason: "Stop", phase: "Closing" }))
      yield* TestClock.adjust("1 minute")
      yield* yieldTimes(50)
      assert.strictEqual((yield* server.stats).unresponsive, 0)
      // The hold goes on: once the client reads, the held request is read (and served or refused).
      yield* pair.rightToLeft.resume
      yield* eventually(Effect.map(server.stats, (s) => s.requestsReceived === next), "the held request read")
      yield* endLinks(pair)
    }))

  it.effect("a hold that ends before stallTimeout does not count towards a later one", () =>
    Effect.gen(function*() {
      const { pair, raw, server } = yield* setup("10 seconds")
      const next = yield* fill(raw, server)
      yield* sendAll(raw, [request(next)])
      yield* eventually(Effect.map(server.stats, (s) => s.readsHeld === 1), "first hold")
      yield* TestClock.adjust("9 seconds")
      // The client reads for a moment: the held request is served.
      yield* pair.rightToLeft.resume
      yield* eventually(
        Effect.map(server.stats, (s) => s.requestsReceived === next && s.pendingAnswers === 0),
        "drained"
      )
      yield* pair.rightToLeft.pause
      let id = next + 1
      while ((yield* server.stats).readsHeld < 2) {
        yield* sendAll(raw, [request(id++)])
        yield* yieldTimes(20)
      }
      yield* TestClock.adjust("9 seconds")
      yield* yieldTimes(50)
      assert.isFalse(yield* server.isClosed)
      yield* TestClock.adjust("1 second")
      const reason = yield* server.closed
      assert.strictEqual(reason._tag === "PeerClosed" && reason.reason, "Unresponsive")
      yield* endLinks(pair)
    }))
})

describe("Peer flow control: the reader waiting to write an answer of its own", () => {
  it.effect("refusals (-32601) that find no room for stallTimeout end the connection as unresponsive", () =>
    Effect.gen(function*() {
      // A bound the refusals never reach: the reader blocks on the full queue itself, not on the bound.
      const { pair, raw, server } = yield* setup("10 seconds", { maxPendingAnswers: 1000 })
      yield* sendAll(raw, Array.from({ length: 20 }, (_, i) => request(i + 1, "nope", {})))
      yield* yieldTimes(300)
      const blocked = yield* server.stats
      assert.isBelow(blocked.requestsReceived, 20)
      assert.strictEqual(blocked.readsHeld, 0)
      yield* yieldTimes(100)
      assert.strictEqual((yield* server.stats).requestsReceived, blocked.requestsReceived)
      yield* TestClock.adjust("9999 millis")
      yield* yieldTimes(50)
      assert.isFalse(yield* server.isClosed)
      yield* TestClock.adjust("1 millis")
      const reason = yield* server.closed
      assert.strictEqual(reason._tag === "PeerClosed" && reason.reason, "Unresponsive")
      assert.strictEqual((yield* server.stats).unresponsive, 1)
      yield* endLinks(pair)
    }))
})

describe("Peer flow control: the bytes bound and a large queue", () => {
  it.effect("maxPendingAnswerBytes holds the reader before maxPendingAnswers does", () =>
    Effect.gen(function*() {
      const { pair, raw, server } = yield* setup("10 seconds", { maxPendingAnswers: 1000, maxPendingAnswerBytes: 300 })
      const next = yield* fill(raw, server, (s) => s.pendingAnswerBytes >= 300)
      yield* sendAll(raw, [request(next)])
      yield* eventually(Effect.map(server.stats, (s) => s.readsHeld === 1), "reading held")
      const held = yield* server.stats
      assert.isBelow(held.pendingAnswers, 10)
      assert.isAtLeast(held.pendingAnswerBytes, 300)
      yield* pair.rightToLeft.resume
      yield* eventually(Effect.map(server.stats, (s) => s.requestsReceived === next), "the held request served")
      yield* endLinks(pair)
    }))

  it.effect("answers are counted back to zero when a large queue of them drains (frames of every kind mixed)", () =>
    Effect.gen(function*() {
      const { pair, raw, server } = yield* setup("10 seconds", { maxPendingAnswers: 10_000, outboundCapacity: 500 })
      // Our own calls between the answers: the writer tells the two apart in its queue.
      const calls = yield* Effect.forkChild(
        Effect.all(Array.from({ length: 100 }, () => server.call(Ping, {}, { timeout: "1 hour" })), {
          concurrency: "unbounded"
        })
      )
      yield* sendAll(raw, Array.from({ length: 700 }, (_, i) => request(i + 1)))
      yield* eventually(Effect.map(server.stats, (s) => s.requestsReceived === 700), "all admitted")
      const waiting = yield* server.stats
      assert.isAbove(waiting.pendingAnswers, 500)
      yield* pair.rightToLeft.resume
      let answered = 0
      while (answered < 700) {
        const message = yield* raw.next
        if (message.result !== undefined) answered++
        else if (message.method === "ping") yield* raw.send({ jsonrpc: "2.0", id: message.id, result: "pong" })
      }
      assert.strictEqual((yield* Fiber.join(calls)).length, 100)
      yield* eventually(Effect.map(server.stats, (s) => s.pendingAnswers === 0), "all counted out")
      assert.strictEqual((yield* server.stats).pendingAnswerBytes, 0)
      assert.strictEqual((yield* server.stats).readsHeld, 0)
      yield* endLinks(pair)
    }))
})

describe("Connection: a peer that does not read", () => {
  it.effect("is reported (readsHeld, unresponsive in PeerMetrics) and the connection fails and shuts down", () =>
    Effect.provideService(
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair({ capacity: 1 })
        const connection = yield* Connection.make({
          protocol: Server,
          transport: pair.right,
          handlers: { get: ({ n }) => Effect.succeed(`answer ${n}`), slow: () => Effect.never },
          outboundCapacity: 2,
          maxPendingAnswers: 4,
          stallTimeout: "10 seconds",
          metrics: { name: "flooded" }
        })
        const server = connection.peer
        yield* pair.rightToLeft.pause
        const raw = yield* makeRaw(pair.left)
        const next = yield* fill(raw, server)
        yield* sendAll(raw, [request(next)])
        yield* eventually(Effect.map(server.stats, (s) => s.readsHeld === 1), "reading held")
        const peer = { "lifeline.peer": "flooded" }
        const counted = (id: string) =>
          Effect.map(Metric.snapshot, (all) => {
            const found = all.filter((m) =>
              m.id === id && (m.attributes as any)?.["lifeline.peer"] === peer["lifeline.peer"]
            )
            return (found[0]?.state as any)
          })
        assert.strictEqual((yield* counted(PeerMetrics.readsHeld.id)).count, 1)
        assert.strictEqual((yield* counted(PeerMetrics.pendingAnswers.id)).value, 4)
        assert.strictEqual((yield* counted(PeerMetrics.unresponsive.id)).count, 0)
        yield* TestClock.adjust("9999 millis")
        assert.strictEqual((yield* connection.lifecycle.state)._tag, "Ready")
        yield* TestClock.adjust("1 millis")
        yield* endLinks(pair)
        // The teardown writes what is queued within flushTimeout (1 second): the clock moves on until it is done.
        const shutdown = yield* Effect.forkChild(connection.awaitShutdown)
        for (let i = 0; i < 10 && Option.isNone(yield* poll(shutdown)); i++) {
          yield* TestClock.adjust("1 second")
        }
        const report = yield* Fiber.join(shutdown)
        assert.strictEqual(report.reason, "Failed")
        const state = yield* connection.lifecycle.state
        assert.strictEqual(state._tag, "Failed")
        assert.strictEqual(server.unsafeStats().unresponsive, 1)
      }),
      Metric.MetricRegistry,
      new Map()
    ))
})

describe("Peer flow control: two peers flooding each other", () => {
  const Both = Protocol.make({ serves: [Get], calls: [Get] })

  it.effect("neither reads while both hold a request: the stall bound ends both connections", () =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair({ capacity: 1 })
      const options = { outboundCapacity: 1, maxPendingAnswers: 4, stallTimeout: "5 seconds" } as const
      const handlers = { get: ({ n }: { readonly n: number }) => Effect.succeed(`answer ${n}`) }
      const a = yield* Peer.make({ protocol: Both, transport: pair.left, handlers, ...options })
      const b = yield* Peer.make({ protocol: Both, transport: pair.right, handlers, ...options })
      const floodFrom = (peer: typeof a) =>
        Effect.forkChild(
          Effect.all(
            Array.from({ length: 200 }, (_, n) => Effect.exit(peer.call(Get, { n }, { timeout: "1 hour" }))),
            { concurrency: "unbounded" }
          )
        )
      const fromA = yield* floodFrom(a)
      const fromB = yield* floodFrom(b)
      yield* eventually(
        Effect.map(Effect.all([a.stats, b.stats]), ([x, y]) => x.readsHeld > 0 && y.readsHeld > 0),
        "both readers held"
      )
      // Stuck: nothing moves any more without the clock.
      const before = yield* Effect.all([a.stats, b.stats])
      yield* yieldTimes(200)
      const stuck = yield* Effect.all([a.stats, b.stats])
      assert.deepStrictEqual(stuck, before)
      assert.isFalse(yield* a.isClosed)
      assert.isFalse(yield* b.isClosed)
      yield* TestClock.adjust("5 seconds")
      const reasons = yield* Effect.all([a.closed, b.closed])
      for (const reason of reasons) assert.strictEqual(reason._tag === "PeerClosed" && reason.reason, "Unresponsive")
      // Every call either got its answer before the deadlock or fails with the reason: none is left waiting.
      for (const results of yield* Effect.all([Fiber.join(fromA), Fiber.join(fromB)])) {
        const failed = results.filter(Exit.isFailure)
        assert.isAbove(failed.length, 0)
      }
      yield* endLinks(pair)
    }))
})
