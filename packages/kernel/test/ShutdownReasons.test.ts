/**
 * What a caller is told about a shutdown, on the TestClock: a drain cut short by a forced stop is `Forced` (not
 * `DrainTimeout`: no deadline passed), a drain whose deadline passed is `DrainTimeout`, and a call refused after the
 * stop keeps the reason that started it, in `Closing` and in `Closed`, as one error per state.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  Cancellation,
  Connection,
  Lifecycle,
  Method,
  PeerError,
  PromiseClient,
  Protocol,
  ShutdownPolicy
} from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Exit, Fiber, Schema, Scope } from "effect"
import { TestClock } from "effect/testing"
import { eventually, makeRaw } from "./utils.js"

const Work = Method.request("work", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })
const Server = Protocol.make({ serves: [Work], cancellation: Cancellation.lsp })
const Client = Protocol.flip(Server)

/** A connection that calls `work` on a raw other end, which never answers. */
const connect = (policy: ShutdownPolicy.Policy) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    const raw = yield* makeRaw(pair.right)
    const scope = yield* Scope.make()
    const connection = yield* Connection.make({
      protocol: Client,
      transport: pair.left,
      handlers: {},
      policy,
      requestTimeout: "1 hour"
    }).pipe(Scope.provide(scope))
    return { connection, raw, scope }
  })

const shutdownError = (error: unknown): PeerError.ShutdownError => {
  assert.instanceOf(error, PeerError.ShutdownError)
  return error as PeerError.ShutdownError
}

describe("ShutdownError reasons", () => {
  describe("a drain that ends before a pending call", () => {
    it.effect("cut short by a forced stop 300 ms in: Forced, at 300 ms, and the wire says the stop was forced", () =>
      Effect.gen(function*() {
        const { connection, raw } = yield* connect(ShutdownPolicy.drain("5 seconds"))
        const call = yield* Effect.forkChild(Effect.flip(connection.peer.call(Work, { ms: 60_000 })))
        const request = yield* raw.next
        const stopping = yield* Effect.forkChild(connection.stop("Interrupted"))
        yield* eventually(Effect.map(connection.lifecycle.state, (s) => s._tag === "Closing"))
        yield* TestClock.adjust("300 millis")
        assert.strictEqual(yield* connection.stopNow("Interrupted"), "AlreadyClosing")
        assert.strictEqual(yield* Fiber.join(stopping), "Stopped")
        const error = shutdownError(yield* Fiber.join(call))
        assert.deepStrictEqual([error.reason, error.phase], ["Forced", "Closing"])
        assert.deepStrictEqual(yield* raw.next, {
          jsonrpc: "2.0",
          method: "$/cancelRequest",
          params: { id: request.id }
        })
        const report = yield* connection.awaitShutdown
        assert.strictEqual(report.reason, "Interrupted")
        assert.isFalse(report.drained)
        assert.strictEqual(report.finishedAt - report.startedAt, 300)
      }))

    it.effect("cut short by a forced stop, an MCP cancellation says why: the stop was forced", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const raw = yield* makeRaw(pair.right)
        const connection = yield* Connection.make({
          protocol: Protocol.make({ calls: [Work], cancellation: Cancellation.mcp }),
          transport: pair.left,
          handlers: {},
          policy: ShutdownPolicy.drain("5 seconds"),
          requestTimeout: "1 hour"
        })
        const call = yield* Effect.forkChild(Effect.flip(connection.peer.call(Work, { ms: 60_000 })))
        const request = yield* raw.next
        const stopping = yield* Effect.forkChild(connection.stop())
        yield* eventually(Effect.map(connection.lifecycle.state, (s) => s._tag === "Closing"))
        yield* TestClock.adjust("300 millis")
        assert.strictEqual(yield* connection.stopNow(), "AlreadyClosing")
        yield* Fiber.join(stopping)
        assert.strictEqual(shutdownError(yield* Fiber.join(call)).reason, "Forced")
        assert.deepStrictEqual(yield* raw.next, {
          jsonrpc: "2.0",
          method: "notifications/cancelled",
          params: { requestId: request.id, reason: "the stop was forced before the drain finished" }
        })
      }))

    it.effect("its deadline passed: DrainTimeout, at the deadline", () =>
      Effect.gen(function*() {
        const { connection, raw } = yield* connect(ShutdownPolicy.drain("5 seconds"))
        const call = yield* Effect.forkChild(Effect.flip(connection.peer.call(Work, { ms: 60_000 })))
        yield* raw.next
        const stopping = yield* Effect.forkChild(connection.stop("Interrupted"))
        yield* eventually(Effect.map(connection.lifecycle.state, (s) => s._tag === "Closing"))
        yield* TestClock.adjust("5 seconds")
        yield* Fiber.join(stopping)
        assert.strictEqual(shutdownError(yield* Fiber.join(call)).reason, "DrainTimeout")
        const report = yield* connection.awaitShutdown
        assert.strictEqual(report.finishedAt - report.startedAt, 5000)
      }))

    it.effect("its deadline passed with only a batch in flight: the report says it did not drain", () =>
      Effect.gen(function*() {
        // A batch runs as one fiber of inbound work, which the drain waits for and the teardown interrupts.
        const pair = yield* TestTransport.makePair()
        const raw = yield* makeRaw(pair.right)
        const connection = yield* Connection.make({
          protocol: Server,
          transport: pair.left,
          handlers: { work: ({ ms }) => Effect.as(Effect.sleep(ms), ms) },
          policy: ShutdownPolicy.drain("5 seconds")
        })
        yield* raw.send([{ jsonrpc: "2.0", id: 1, method: "work", params: { ms: 60_000 } }])
        yield* eventually(Effect.map(connection.peer.stats, (s) => s.activeInbound === 1), "the batch runs")
        const stopping = yield* Effect.forkChild(connection.stop())
        yield* eventually(Effect.map(connection.lifecycle.state, (s) => s._tag === "Closing"))
        yield* TestClock.adjust("5 seconds")
        assert.strictEqual(yield* Fiber.join(stopping), "Stopped")
        const report = yield* connection.awaitShutdown
        assert.isFalse(report.drained)
        assert.strictEqual(report.finishedAt - report.startedAt, 5000)
      }))

    it.effect("a stopNow with no drain under way is a fail-fast stop, not a forced one: the stop's reason", () =>
      Effect.gen(function*() {
        const { connection, raw } = yield* connect(ShutdownPolicy.drain("5 seconds"))
        const call = yield* Effect.forkChild(Effect.flip(connection.peer.call(Work, { ms: 60_000 })))
        yield* raw.next
        assert.strictEqual(yield* connection.stopNow("Interrupted"), "Stopped")
        assert.strictEqual(shutdownError(yield* Fiber.join(call)).reason, "Interrupted")
      }))
  })

  describe("a call refused after the stop keeps the reason that started it", () => {
    const cases = [
      { how: "stop(Interrupted)", reason: "Interrupted", detail: undefined },
      { how: "stop()", reason: "Stop", detail: undefined },
      { how: "stop(RemoteShutdown)", reason: "Stop", detail: "RemoteShutdown" },
      { how: "the Scope closes with an interruption", reason: "Interrupted", detail: undefined }
    ] as const
    for (const { detail, how, reason } of cases) {
      it.effect(`${how}: ${reason} in Closing and in Closed`, () =>
        Effect.gen(function*() {
          const { connection, scope } = yield* connect(ShutdownPolicy.drain("5 seconds"))
          const stopping = yield* Effect.forkChild(
            how === "stop(Interrupted)"
              ? connection.stop("Interrupted")
              : how === "stop()"
              ? connection.stop()
              : how === "stop(RemoteShutdown)"
              ? connection.stop("RemoteShutdown")
              : Scope.close(scope, Exit.interrupt())
          )
          yield* eventually(Effect.map(connection.lifecycle.state, (s) => s._tag === "Closing"))
          const closing = shutdownError(yield* Effect.flip(connection.peer.call(Work, { ms: 1 })))
          assert.deepStrictEqual([closing.reason, closing.phase, closing.detail], [reason, "Closing", detail])
          // Nothing in flight: the drain ends at once.
          yield* Fiber.join(stopping)
          assert.strictEqual((yield* connection.lifecycle.state)._tag, "Closed")
          const closed = shutdownError(yield* Effect.flip(connection.peer.call(Work, { ms: 1 })))
          assert.deepStrictEqual([closed.reason, closed.phase, closed.detail], [reason, "Closed", detail])
        }))
    }

    it.effect("one error per state: every refusal in Closing is the same instance, and in Closed another one", () =>
      Effect.gen(function*() {
        const { connection } = yield* connect(ShutdownPolicy.drain("5 seconds"))
        const client = PromiseClient.make(connection.peer)
        const slow = yield* Effect.forkChild(Effect.ignore(connection.peer.call(Work, { ms: 1 })))
        const stopping = yield* Effect.forkChild(connection.stop("Interrupted"))
        yield* eventually(Effect.map(connection.lifecycle.state, (s) => s._tag === "Closing"))
        const inClosing = yield* Effect.all(
          Array.from({ length: 3 }, () => Effect.flip(connection.peer.call(Work, { ms: 1 })))
        )
        const promised = yield* Effect.promise(() => client.call(Work, { ms: 1 }).catch((error: unknown) => error))
        assert.strictEqual(inClosing[0], inClosing[1])
        assert.strictEqual(inClosing[1], inClosing[2])
        assert.strictEqual(promised, inClosing[0])
        yield* TestClock.adjust("5 seconds")
        yield* Fiber.join(stopping)
        yield* Fiber.join(slow)
        const inClosed = yield* Effect.all(
          Array.from({ length: 2 }, () => Effect.flip(connection.peer.call(Work, { ms: 1 })))
        )
        assert.strictEqual(inClosed[0], inClosed[1])
        assert.notStrictEqual(inClosed[0], inClosing[0])
        assert.strictEqual(shutdownError(inClosed[0]).phase, "Closed")
      }))
  })

  describe("Lifecycle.outboundGate", () => {
    it("a Closed state refuses with the reason it is given, Stop when none is", () => {
      assert.strictEqual(Lifecycle.outboundGate(Lifecycle.Closed(), "Interrupted")?.reason, "Interrupted")
      const unsaid = Lifecycle.outboundGate(Lifecycle.Closed())
      assert.deepStrictEqual([unsaid?.reason, unsaid?.phase, unsaid?.detail], ["Stop", "Closed", undefined])
      const remote = Lifecycle.outboundGate(Lifecycle.Closed(), "TransportClosed")
      assert.deepStrictEqual([remote?.reason, remote?.phase, remote?.detail], ["Stop", "Closed", "TransportClosed"])
      assert.isUndefined(Lifecycle.outboundGate(Lifecycle.Ready(), "Interrupted"))
    })

    it.effect("a lifecycle's gate remembers why it closed, and answers one error per state", () =>
      Effect.gen(function*() {
        const lifecycle = yield* Lifecycle.make
        yield* lifecycle.transition(Lifecycle.Ready())
        assert.isUndefined(lifecycle.outboundGate())
        yield* lifecycle.beginStop("Interrupted")
        const closing = lifecycle.outboundGate()
        assert.strictEqual(lifecycle.outboundGate(), closing)
        yield* lifecycle.transition(Lifecycle.Closed())
        const closed = lifecycle.outboundGate()
        assert.deepStrictEqual([closed?.reason, closed?.phase], ["Interrupted", "Closed"])
        assert.strictEqual(lifecycle.outboundGate(), closed)
      }).pipe(Effect.scoped))
  })
})
