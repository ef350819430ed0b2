import { assert, describe, it } from "@effect/vitest"
import { ErrorCode, RpcError } from "@lifeline/jsonrpc"
import {
  Cancellation,
  Connection,
  Method,
  Peer,
  PeerError,
  PromiseClient,
  Protocol,
  ShutdownPolicy
} from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Deferred, Duration, Effect, Exit, Ref, Schema, Scope } from "effect"
import { TestClock } from "effect/testing"
import { eventually, wire } from "./utils.js"

class Nope
  extends Schema.TaggedError<Nope>()("Nope", { code: Schema.Number, message: Schema.String, why: Schema.String })
{}

const Echo = Method.request("echo", { params: Schema.Struct({ text: Schema.String }), result: Schema.String })
const Sleep = Method.request("sleep", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })
const Fails = Method.request("fails", { params: Schema.Struct({}), result: Schema.Null, error: Nope })
const Refuses = Method.request("refuses", { params: Schema.Struct({}), result: Schema.Null })
const Log = Method.notification("log", { params: Schema.Struct({ text: Schema.String }) })

const Server = Protocol.make({ serves: [Echo, Sleep, Fails, Refuses, Log], cancellation: Cancellation.lsp })
const Client = Protocol.flip(Server)

type Outcome<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: unknown }

/**
 * A Promise's outcome as a value, with its handler attached at once: a call is tracked when it is made, so a rejection
 * that comes before the test looks at it is never an unhandled one.
 */
const track = <A>(promise: Promise<A>): Promise<Outcome<A>> =>
  promise.then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }))

const settle = <A>(promise: Promise<A>) => Effect.promise(() => track(promise))

/** The error a tracked call rejected with; a call that resolved fails the test. */
const failureOf = <A>(tracked: Promise<Outcome<A>>) =>
  Effect.flatMap(
    Effect.promise(() => tracked),
    (outcome) =>
      outcome.ok ? Effect.die(new Error(`resolved with ${String(outcome.value)}`)) : Effect.succeed(outcome.error)
  )

const rejection = <A>(promise: Promise<A>) => failureOf(track(promise))

const setup = Effect.gen(function*() {
  const pair = yield* TestTransport.makePair()
  const logged = yield* Ref.make<Array<string>>([])
  const started = yield* Deferred.make<void>()
  const interrupted = yield* Deferred.make<void>()
  const server = yield* Peer.make({
    protocol: Server,
    transport: pair.left,
    handlers: {
      echo: ({ text }) => Effect.succeed(text),
      sleep: ({ ms }) =>
        Deferred.succeed(started, void 0).pipe(
          Effect.andThen(Effect.sleep(Duration.millis(ms))),
          Effect.as(ms),
          Effect.onInterrupt(() => Deferred.succeed(interrupted, void 0))
        ),
      fails: () => Effect.fail(new Nope({ code: 7, message: "nope", why: "because" })),
      refuses: () => Effect.fail(RpcError.make(-32001, "refused", { hint: 1 })),
      log: ({ text }) => Ref.update(logged, (all) => [...all, text])
    }
  })
  const peer = yield* Peer.make({ protocol: Client, transport: pair.right, handlers: {} })
  return { pair, server, peer, client: PromiseClient.make(peer), logged, started, interrupted }
})

describe("PromiseClient", () => {
  it.effect("a call resolves with the decoded result", () =>
    Effect.gen(function*() {
      const { client } = yield* setup
      assert.deepStrictEqual(yield* settle(client.call(Echo, { text: "hi" })), { ok: true, value: "hi" })
      assert.deepStrictEqual(yield* settle(client.callUntyped("echo", { text: "raw" })), { ok: true, value: "raw" })
    }))

  it.effect("a call rejects with the typed error itself: the method's error, or an RpcError", () =>
    Effect.gen(function*() {
      const { client } = yield* setup
      const typed = yield* rejection(client.call(Fails, {}))
      assert.instanceOf(typed, Nope)
      assert.strictEqual((typed as Nope).why, "because")
      const refused = yield* rejection(client.call(Refuses, {}))
      assert.instanceOf(refused, RpcError.RpcError)
      assert.strictEqual((refused as RpcError.RpcError).code, -32001)
      const unknown = yield* rejection(client.callUntyped("nope"))
      assert.instanceOf(unknown, RpcError.RpcError)
      assert.strictEqual((unknown as RpcError.RpcError).code, ErrorCode.MethodNotFound)
    }))

  it.effect("params that fail their Schema reject with -32602 and send nothing", () =>
    Effect.gen(function*() {
      const { client, peer } = yield* setup
      const error = yield* rejection(client.call(Echo, { text: 1 } as never))
      assert.instanceOf(error, RpcError.RpcError)
      assert.strictEqual((error as RpcError.RpcError).code, ErrorCode.InvalidParams)
      assert.strictEqual((yield* peer.stats).requestsSent, 0)
    }))

  it.effect("a call that gets no answer rejects with RequestTimeout at its timeout, on the peer's Clock", () =>
    Effect.gen(function*() {
      const { client, peer } = yield* setup
      const call = track(client.call(Sleep, { ms: 60_000 }, { timeout: "2 seconds" }))
      yield* eventually(Effect.map(peer.stats, (s) => s.pendingOutbound === 1))
      yield* TestClock.adjust("2 seconds")
      const error = yield* failureOf(call)
      assert.instanceOf(error, PeerError.RequestTimeout)
      assert.strictEqual((error as PeerError.RequestTimeout).timeoutMillis, 2000)
      assert.strictEqual((yield* peer.stats).timedOut, 1)
    }))

  it.effect("aborting the signal cancels the call: rejects with the reason, and the handler is cancelled", () =>
    Effect.gen(function*() {
      const { client, interrupted, peer, server, started } = yield* setup
      const controller = new AbortController()
      const call = track(client.call(Sleep, { ms: 60_000 }, { signal: controller.signal }))
      yield* Deferred.await(started)
      const reason = new Error("the user closed the tab")
      controller.abort(reason)
      assert.strictEqual(yield* failureOf(call), reason)
      // `$/cancelRequest` reached the other side, which interrupted the handler.
      yield* Deferred.await(interrupted)
      assert.strictEqual((yield* server.stats).cancelledByPeer, 1)
      const stats = yield* peer.stats
      assert.strictEqual(stats.cancelledByUs, 1)
      assert.strictEqual(stats.pendingOutbound, 0)
    }))

  it.effect("a signal already aborted rejects at once and sends nothing", () =>
    Effect.gen(function*() {
      const { client, pair, peer } = yield* setup
      const controller = new AbortController()
      controller.abort("gone")
      assert.strictEqual(yield* rejection(client.call(Echo, { text: "x" }, { signal: controller.signal })), "gone")
      assert.strictEqual((yield* peer.stats).requestsSent, 0)
      assert.deepStrictEqual(yield* wire(pair.rightToLeft), [])
    }))

  it.effect("notifications resolve once queued and reach the handler", () =>
    Effect.gen(function*() {
      const { client, logged } = yield* setup
      yield* Effect.promise(() => client.notify(Log, { text: "one" }))
      yield* Effect.promise(() => client.notifyUntyped("log", { text: "two" }))
      yield* eventually(Effect.map(Ref.get(logged), (all) => all.length === 2))
      assert.deepStrictEqual(yield* Ref.get(logged), ["one", "two"])
    }))

  it.effect("a notification nobody awaits on a closed connection is not an unhandled rejection; awaited, it rejects", () =>
    Effect.gen(function*() {
      const unhandled: Array<unknown> = []
      const onUnhandled = (reason: unknown) => unhandled.push(reason)
      process.on("unhandledRejection", onUnhandled)
      yield* Effect.addFinalizer(() => Effect.sync(() => process.off("unhandledRejection", onUnhandled)))
      const pair = yield* TestTransport.makePair()
      const scope = yield* Scope.make()
      const peer = yield* Peer.make({ protocol: Client, transport: pair.right, handlers: {} }).pipe(
        Scope.provide(scope)
      )
      const client = PromiseClient.make(peer)
      yield* Scope.close(scope, Exit.void)
      void client.notify(Log, { text: "nobody waits" })
      void client.notifyUntyped("log", null)
      void client.notify(Log, { text: 1 } as never) // params that fail their Schema
      // Node reports an unhandled rejection after the microtasks of the turn: let a whole macrotask pass.
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      assert.deepStrictEqual(unhandled, [])
      assert.instanceOf(yield* rejection(client.notify(Log, { text: "awaited" })), PeerError.ShutdownError)
    }).pipe(Effect.scoped))

  it.effect("null params of the untyped forms are sent as no params", () =>
    Effect.gen(function*() {
      const { client } = yield* setup
      // `echo` needs params: the far end got a request without any, and says so.
      const error = yield* rejection(client.callUntyped("echo", null))
      assert.instanceOf(error, RpcError.RpcError)
      assert.strictEqual((error as RpcError.RpcError).code, ErrorCode.InvalidParams)
    }))

  it.effect("closing the peer's Scope rejects every pending call with ShutdownError, and later calls at once", () =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      yield* Peer.make({ protocol: Server, transport: pair.left, handlers: serveNothing })
      const scope = yield* Scope.make()
      const peer = yield* Peer.make({ protocol: Client, transport: pair.right, handlers: {} }).pipe(
        Scope.provide(scope)
      )
      const client = PromiseClient.make(peer)
      const calls = Array.from({ length: 3 }, (_, ms) => track(client.call(Sleep, { ms })))
      yield* eventually(Effect.map(peer.stats, (s) => s.pendingOutbound === 3))
      yield* Scope.close(scope, Exit.void)
      for (const call of calls) assert.instanceOf(yield* failureOf(call), PeerError.ShutdownError)
      assert.instanceOf(yield* rejection(client.call(Echo, { text: "late" })), PeerError.ShutdownError)
    }))

  it.effect("a fail-fast stop rejects all pending calls with one ShutdownError, whose _tag callers match on", () =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      yield* Peer.make({ protocol: Server, transport: pair.left, handlers: serveNothing })
      const connection = yield* Connection.make({
        protocol: Client,
        transport: pair.right,
        handlers: {},
        policy: ShutdownPolicy.FailFast(),
        requestTimeout: "1 hour"
      })
      const client = PromiseClient.make(connection.peer)
      const calls = Array.from({ length: 100 }, (_, ms) => track(client.call(Sleep, { ms })))
      yield* eventually(Effect.map(connection.peer.stats, (s) => s.pendingOutbound === 100))
      yield* connection.stop()
      const errors = yield* Effect.forEach(calls, failureOf)
      assert.instanceOf(errors[0], PeerError.ShutdownError)
      assert.strictEqual((errors[0] as PeerError.ShutdownError).reason, "Stop")
      // One instance for every call: matching on `_tag` (or `instanceof`) works the same for each.
      assert.isTrue(errors.every((error) => error === errors[0]))
      assert.strictEqual((yield* connection.peer.stats).failedByDisconnect, 100)
    }))

  it.effect("when the other side closes, pending calls reject with PeerClosed", () =>
    Effect.gen(function*() {
      const { client, pair, peer } = yield* setup
      const call = track(client.call(Sleep, { ms: 60_000 }))
      yield* eventually(Effect.map(peer.stats, (s) => s.pendingOutbound === 1))
      yield* pair.leftToRight.close
      const error = yield* failureOf(call)
      assert.instanceOf(error, PeerError.PeerClosed)
      assert.strictEqual((error as PeerError.PeerClosed).reason, "TransportClosed")
    }))

  it.effect("a Peer.Peer that Peer.make did not make is called through its Effects, with the same outcomes", () =>
    Effect.gen(function*() {
      const { peer } = yield* setup
      const client = PromiseClient.make({ ...peer })
      assert.deepStrictEqual(yield* settle(client.call(Echo, { text: "hi" })), { ok: true, value: "hi" })
      assert.instanceOf(yield* rejection(client.call(Fails, {})), Nope)
      const controller = new AbortController()
      const call = track(client.call(Sleep, { ms: 60_000 }, { signal: controller.signal }))
      yield* eventually(Effect.map(peer.stats, (s) => s.pendingOutbound === 1))
      controller.abort("stop")
      assert.strictEqual(yield* failureOf(call), "stop")
      yield* eventually(Effect.map(peer.stats, (s) => s.cancelledByUs === 1))
    }))
})

const serveNothing = {
  echo: () => Effect.never,
  sleep: () => Effect.never,
  fails: () => Effect.never,
  refuses: () => Effect.never,
  log: () => Effect.void
}
