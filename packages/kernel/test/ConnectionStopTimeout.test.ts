import { assert, describe, it } from "@effect/vitest"
import { Connection, Method, Peer, PeerError, Protocol, ShutdownPolicy } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Duration, Effect, Fiber, Option, Schema, Scope } from "effect"
import { TestClock } from "effect/testing"
import { eventually } from "./utils.js"

const Work = Method.request("work", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })
const Server = Protocol.make({ serves: [Work] })

/** A connection whose `work` handler sleeps on the Clock, and a plain peer that calls it. */
const setup = (policy: ShutdownPolicy.Policy) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    const scope = yield* Scope.make()
    const server = yield* Connection.make({
      protocol: Server,
      transport: pair.left,
      handlers: { work: ({ ms }) => Effect.as(Effect.sleep(Duration.millis(ms)), ms) },
      policy
    }).pipe(Scope.provide(scope))
    const client = yield* Peer.make({
      protocol: Protocol.flip(Server),
      transport: pair.right,
      handlers: {},
      requestTimeout: "1 hour"
    })
    return { client, server }
  })

const poll = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.sync(() => Option.fromNullishOr(fiber.pollUnsafe()))

describe("Connection.stop with a caller timeout", () => {
  it.effect("on expiry the caller gets StopTimeout, exactly at the timeout, and the stop goes on to its end", () =>
    Effect.gen(function*() {
      const { client, server } = yield* setup(ShutdownPolicy.drain("5 seconds"))
      const inbound = yield* Effect.forkChild(client.call(Work, { ms: 60_000 }))
      yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1))
      const stopping = yield* Effect.forkChild(server.stop(undefined, { timeout: "1 second" }))
      yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
      yield* TestClock.adjust(Duration.millis(999))
      assert.isTrue(Option.isNone(yield* poll(stopping)))
      yield* TestClock.adjust(Duration.millis(1))
      const error = yield* Effect.flip(Fiber.join(stopping))
      assert.instanceOf(error, PeerError.StopTimeout)
      assert.strictEqual(error.timeoutMillis, 1000)
      // Only the caller stopped waiting: the drain still runs, and a later caller learns it is under way.
      assert.strictEqual((yield* server.lifecycle.state)._tag, "Closing")
      assert.strictEqual(yield* server.stop(undefined, { timeout: "1 second" }), "AlreadyClosing")
      yield* TestClock.adjust(Duration.millis(3999))
      assert.strictEqual((yield* server.lifecycle.state)._tag, "Closing")
      yield* TestClock.adjust(Duration.millis(1))
      const report = yield* server.awaitShutdown
      assert.strictEqual(report.finishedAt - report.startedAt, 5000)
      assert.isFalse(report.drained)
      assert.deepStrictEqual(report.cutOff.map((c) => `${c.direction} ${c.method}`), ["inbound work"])
      assert.strictEqual((yield* server.lifecycle.state)._tag, "Closed")
      yield* Fiber.interrupt(inbound)
    }))

  it.effect("a stop over before the timeout answers Stopped, as a stop without one does", () =>
    Effect.gen(function*() {
      const { client, server } = yield* setup(ShutdownPolicy.drain("5 seconds"))
      const inbound = yield* Effect.forkChild(client.call(Work, { ms: 2000 }))
      yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1))
      const stopping = yield* Effect.forkChild(server.stop("Stop", { timeout: "5 seconds" }))
      yield* eventually(Effect.map(server.lifecycle.state, (s) => s._tag === "Closing"))
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual(yield* Fiber.join(stopping), "Stopped")
      assert.strictEqual(yield* Fiber.join(inbound), 2000)
      assert.isTrue((yield* server.awaitShutdown).drained)
    }))

  it.effect("fail-fast with a timeout: Stopped with no clock moving; a negative timeout is a zero one", () =>
    Effect.gen(function*() {
      const { client, server } = yield* setup(ShutdownPolicy.FailFast())
      const inbound = yield* Effect.forkChild(client.call(Work, { ms: 60_000 }))
      yield* eventually(Effect.map(server.peer.stats, (s) => s.activeInbound === 1))
      assert.strictEqual(yield* server.stop(undefined, { timeout: "5 seconds" }), "Stopped")
      assert.strictEqual((yield* Effect.flip(Fiber.join(inbound)))._tag, "PeerClosed")
      const late = yield* server.stop(undefined, { timeout: Duration.millis(-1) })
      assert.strictEqual(late, "AlreadyClosing")
    }))
})
