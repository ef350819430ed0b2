import { assert, describe, it } from "@effect/vitest"
import { Connection, Method, Peer, PeerMetrics, PromiseClient, Protocol } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Exit, Fiber, Metric, Schema, Scope } from "effect"
import { TestClock } from "effect/testing"

const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
const Slow = Method.request("slow", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })
const Fail = Method.request("fail", { params: Schema.Struct({}), result: Schema.Null })
const Server = Protocol.make({ serves: [Add, Slow, Fail] })
const Client = Protocol.flip(Server)

const serveCalculator = TestTransport.serve(Server, {
  add: ([a, b]) => Effect.succeed(a + b),
  slow: ({ ms }) => Effect.as(Effect.sleep(ms), ms),
  fail: () => Effect.die("boom")
})

/** Each test reads its own registry, so series of other tests (and other files) do not mix in. */
const isolated = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.provideService(self, Metric.MetricRegistry, new Map())

type Snapshot = Metric.Metric.Snapshot
const series = (snapshots: ReadonlyArray<Snapshot>, id: string, attributes: Record<string, string>) =>
  snapshots.filter((s) =>
    s.id === id && Object.entries(attributes).every(([key, value]) => (s.attributes as any)?.[key] === value)
  )
const stateOf = (snapshots: ReadonlyArray<Snapshot>, id: string, attributes: Record<string, string>): any => {
  const found = series(snapshots, id, attributes)
  assert.strictEqual(found.length, 1, `one series ${id} ${JSON.stringify(attributes)}`)
  return found[0].state
}

describe("PeerMetrics", () => {
  it.effect("a connection's counters are in the registry for its life, read from its stats: nothing per call", () =>
    isolated(Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { transport } = yield* serveCalculator.pipe(Scope.provide(scope))
      const connection = yield* Connection.make({
        protocol: Client,
        transport,
        handlers: {},
        metrics: { name: "calculator" }
      }).pipe(Scope.provide(scope))
      assert.strictEqual(yield* connection.peer.call(Add, [1, 2]), 3)
      yield* Effect.flip(connection.peer.call(Fail, {}))
      const slow = yield* Effect.forkChild(connection.peer.call(Slow, { ms: 1000 }, { timeout: "10 seconds" }))
      while (connection.peer.unsafeStats().pendingOutbound === 0) yield* Effect.yieldNow

      const peer = { "lifeline.peer": "calculator" }
      let snapshots = yield* Metric.snapshot
      assert.strictEqual(stateOf(snapshots, "lifeline.calls", peer).count, 3)
      assert.strictEqual(stateOf(snapshots, "lifeline.pending", peer).value, 1)
      assert.strictEqual(stateOf(snapshots, "lifeline.failures", peer).count, 0, "an error response is an answer")
      assert.strictEqual(stateOf(snapshots, "lifeline.served", peer).count, 0)
      assert.strictEqual(stateOf(snapshots, "lifeline.active", peer).value, 0)
      assert.deepStrictEqual(series(snapshots, "lifeline.rpc.calls", peer), [], "no per-method series by default")

      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* Fiber.join(slow), 1000)
      snapshots = yield* Metric.snapshot
      assert.strictEqual(stateOf(snapshots, "lifeline.pending", peer).value, 0)

      yield* Scope.close(scope, Exit.void)
      snapshots = yield* Metric.snapshot
      assert.deepStrictEqual(series(snapshots, "lifeline.calls", peer), [], "removed with the connection")
    })))

  it.effect("perMethod: calls, failures and durations per method, on the Clock", () =>
    isolated(
      Effect.gen(function*() {
        const { transport } = yield* serveCalculator
        const connection = yield* Connection.make({
          protocol: Client,
          transport,
          handlers: {},
          requestTimeout: "5 seconds",
          metrics: { name: "calc", perMethod: true }
        })
        const client = Protocol.client(connection.peer)
        yield* client.add([1, 2])
        yield* client.add([3, 4])
        yield* Effect.flip(client.fail({}))
        const slow = yield* Effect.forkChild(client.slow({ ms: 250 }))
        while (connection.peer.unsafeStats().pendingOutbound === 0) yield* Effect.yieldNow
        yield* TestClock.adjust("250 millis")
        yield* Fiber.join(slow)
        const timedOut = yield* Effect.forkChild(Effect.flip(client.slow({ ms: 60_000 })))
        while (connection.peer.unsafeStats().pendingOutbound === 0) yield* Effect.yieldNow
        yield* TestClock.adjust("5 seconds")
        assert.strictEqual((yield* Fiber.join(timedOut))._tag, "RequestTimeout")

        const snapshots = yield* Metric.snapshot
        const add = { "lifeline.peer": "calc", "rpc.method": "add" }
        const slowSeries = { "lifeline.peer": "calc", "rpc.method": "slow" }
        assert.strictEqual(stateOf(snapshots, "lifeline.rpc.calls", add).count, 2)
        assert.deepStrictEqual(series(snapshots, "lifeline.rpc.failures", add).map((s) => (s.state as any).count), [0])
        assert.strictEqual(stateOf(snapshots, "lifeline.rpc.failures", { "rpc.method": "fail" }).count, 1)
        assert.strictEqual(stateOf(snapshots, "lifeline.rpc.calls", slowSeries).count, 2)
        assert.strictEqual(stateOf(snapshots, "lifeline.rpc.failures", slowSeries).count, 1)
        const durations = stateOf(snapshots, "lifeline.rpc.duration", slowSeries)
        assert.strictEqual(durations.count, 2)
        assert.strictEqual(durations.sum, 250 + 5000)
        assert.strictEqual(stateOf(snapshots, "lifeline.rpc.duration", add).max, 0, "in memory, no Clock time passes")
        assert.strictEqual(stateOf(snapshots, "lifeline.failures", { "lifeline.peer": "calc" }).count, 1)
      }).pipe(Effect.scoped)
    ))

  it.effect("an instrumented peer is the same peer for PromiseClient (whose calls are not counted)", () =>
    isolated(
      Effect.gen(function*() {
        const { transport } = yield* serveCalculator
        const connection = yield* Connection.make({
          protocol: Client,
          transport,
          handlers: {},
          metrics: { name: "promised", perMethod: true }
        })
        const sum = yield* Effect.promise(() => PromiseClient.make(connection.peer).call(Add, [20, 22]))
        assert.strictEqual(sum, 42)
        const snapshots = yield* Metric.snapshot
        assert.strictEqual(stateOf(snapshots, "lifeline.calls", { "lifeline.peer": "promised" }).count, 1)
        assert.deepStrictEqual(series(snapshots, "lifeline.rpc.calls", { "lifeline.peer": "promised" }), [])
      }).pipe(Effect.scoped)
    ))

  it.effect("metrics: false registers nothing; an unnamed connection gets a name of its own", () =>
    isolated(
      Effect.gen(function*() {
        const off = yield* serveCalculator
        yield* Connection.make({ protocol: Client, transport: off.transport, handlers: {}, metrics: false })
        assert.deepStrictEqual(yield* Metric.snapshot, [])
        const on = yield* serveCalculator
        yield* Connection.make({ protocol: Client, transport: on.transport, handlers: {} })
        const names = (yield* Metric.snapshot).map((s) => (s.attributes as any)?.["lifeline.peer"])
        assert.isTrue(names.length === 9 && names.every((name) => /^connection-\d+$/.test(name)))
      }).pipe(Effect.scoped)
    ))

  it.effect("register and instrument work on a Peer.make peer too", () =>
    isolated(
      Effect.gen(function*() {
        const { transport } = yield* serveCalculator
        const raw = yield* Peer.make({ protocol: Client, transport, handlers: {} })
        yield* PeerMetrics.register(raw, "plain")
        const peer = yield* PeerMetrics.instrument(raw, "plain")
        yield* peer.call(Add, [1, 1])
        const snapshots = yield* Metric.snapshot
        assert.strictEqual(stateOf(snapshots, "lifeline.calls", { "lifeline.peer": "plain" }).count, 1)
        assert.strictEqual(stateOf(snapshots, "lifeline.rpc.calls", { "rpc.method": "add" }).count, 1)
      }).pipe(Effect.scoped)
    ))
})
