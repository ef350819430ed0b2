/**
 * A connection's handshake, at the edges mutation testing found untested (`pnpm mutate
 * packages/kernel/src/internal/connectionHandshake.ts`): which errors of a handshake the lifecycle keeps as they are
 * and how it wraps the others, and which calls of an initiating handshake get the handshake's timeout (typed and
 * untyped calls, a method with a timeout of its own, a peer kept after `Ready`).
 */
import { assert, describe, it } from "@effect/vitest"
import { RpcError } from "@lifeline/jsonrpc"
import { Connection, Lifecycle, Method, Peer, PeerError, Protocol, Transport } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import type { Duration } from "effect"
import { Effect, Fiber, Logger, Option, References, Schema } from "effect"
import { TestClock } from "effect/testing"
import { makeRaw, poll } from "./utils.js"

const Initialize = Method.request("initialize", {
  params: Schema.Struct({}),
  result: Schema.Struct({ ok: Schema.Boolean })
})
const Work = Method.request("work", { params: Schema.Struct({}), result: Schema.Number })
const Quick = Method.request("quick", { params: Schema.Struct({}), result: Schema.Number, timeout: "2 seconds" })

/** The lifecycle transitions of everything under `effect`, as its Debug log lines annotate them. */
const transitions = () => {
  const lines: Array<Record<string, unknown>> = []
  const logger = Logger.make(({ fiber, message }) => {
    const text = Array.isArray(message) ? message.join(" ") : String(message)
    if (text.startsWith("lifecycle ")) lines.push({ ...fiber.getRef(References.CurrentLogAnnotations) })
  })
  return {
    lines,
    provide: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      effect.pipe(Effect.provide(Logger.layer([logger])), Effect.provideService(References.MinimumLogLevel, "Debug"))
  }
}

class Unsupported extends Schema.TaggedError<Unsupported>()("Unsupported", { message: Schema.String }) {}
class Silent extends Schema.TaggedError<Silent>()("Silent", { code: Schema.Number }) {}

describe("Connection handshakes: errors", () => {
  const failures: ReadonlyArray<Lifecycle.Failure> = [
    RpcError.make(-32000, "refused"),
    new Lifecycle.HandshakeTimeout({ timeoutMillis: 1 }),
    new Transport.TransportError({ reason: "Read", message: "pipe broke" }),
    new PeerError.RequestTimeout({ method: "initialize", id: 1, timeoutMillis: 1 }),
    new PeerError.PeerClosed({ reason: "TransportClosed" }),
    new PeerError.ShutdownError({ reason: "Stop", phase: "Closing" }),
    new PeerError.PeerExited({ exitCode: 1, signal: null, stderrTail: [] })
  ]
  for (const failure of failures) {
    it.effect(`an initiating handshake that fails with ${failure._tag}: make fails with it, the lifecycle keeps it`, () => {
      const log = transitions()
      return Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        yield* makeRaw(pair.right)
        const error = yield* Effect.flip(Connection.make({
          protocol: Protocol.make({ calls: [Initialize] }),
          transport: pair.left,
          handlers: {},
          handshake: Connection.initiate(() => Effect.fail(failure))
        }))
        assert.strictEqual(error, failure)
        assert.deepStrictEqual(log.lines.filter((line) => line.to === "Failed"), [
          { from: "Initializing", to: "Failed", error: failure._tag }
        ])
      }).pipe(log.provide, Effect.scoped)
    })
  }

  it.effect("an initiating handshake's own typed error: make fails with it, the lifecycle holds an RpcError", () => {
    const log = transitions()
    return Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      yield* makeRaw(pair.right)
      const error = yield* Effect.flip(Connection.make({
        protocol: Protocol.make({ calls: [Initialize] }),
        transport: pair.left,
        handlers: {},
        handshake: Connection.initiate(() => Effect.fail(new Unsupported({ message: "version 3" })))
      }))
      assert.instanceOf(error, Unsupported)
      assert.deepStrictEqual(log.lines.filter((line) => line.to === "Failed"), [
        { from: "Initializing", to: "Failed", error: "RpcError" }
      ])
    }).pipe(log.provide, Effect.scoped)
  })

  describe("an accepted handshake whose handler fails with a typed error: the lifecycle holds an RpcError", () => {
    const Hello = Method.request("hello", {
      params: Schema.Struct({ silent: Schema.Boolean }),
      result: Schema.Number,
      error: Schema.Union([Unsupported, Silent])
    })
    const accepted = (silent: boolean) =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const server = yield* Connection.make({
          protocol: Protocol.make({ serves: [Hello] }),
          transport: pair.left,
          handlers: {
            hello: ({ silent }) =>
              silent ? Effect.fail(new Silent({ code: 7 })) : Effect.fail(new Unsupported({ message: "version 3" }))
          },
          handshake: Connection.accept(Hello)
        })
        const client = yield* Peer.make({
          protocol: Protocol.make({ calls: [Hello] }),
          transport: pair.right,
          handlers: {}
        })
        yield* Effect.flip(client.call(Hello, { silent }))
        const state = yield* server.lifecycle.state
        assert.strictEqual(state._tag, "Failed")
        return state._tag === "Failed" ? state.error as RpcError.RpcError : undefined
      })

    it.effect("code -32000 and the error's message, with the error as its data", () =>
      Effect.gen(function*() {
        const error = yield* accepted(false)
        assert.instanceOf(error, RpcError.RpcError)
        assert.strictEqual(error!.code, -32000)
        assert.strictEqual(error!.message, "version 3")
        assert.instanceOf(error!.data, Unsupported)
      }))

    it.effect("an error without a message: \"The handshake failed\"", () =>
      Effect.gen(function*() {
        const error = yield* accepted(true)
        assert.strictEqual(error!.code, -32000)
        assert.strictEqual(error!.message, "The handshake failed")
        assert.instanceOf(error!.data, Silent)
      }))
  })
})

describe("Connection handshakes: the timeout of the handshake's calls", () => {
  const connect = (
    run: (peer: Peer.Peer<any, any>) => Effect.Effect<unknown, any>,
    options: { readonly requestTimeout?: Duration.Input } = {}
  ) =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      const raw = yield* makeRaw(pair.right)
      const made = yield* Effect.forkChild(Connection.make({
        protocol: Protocol.make({ calls: [Initialize, Work, Quick] }),
        transport: pair.left,
        handlers: {},
        handshake: Connection.initiate(run, { timeout: "10 seconds" }),
        ...(options.requestTimeout === undefined ? {} : { requestTimeout: options.requestTimeout })
      }))
      return { raw, made }
    })

  it.effect("an untyped call without a timeout waits for the handshake's: HandshakeTimeout at 10 s, not 5 s", () =>
    Effect.gen(function*() {
      const { made, raw } = yield* connect((peer) => peer.callUntyped("initialize", {}))
      assert.strictEqual((yield* raw.next).method, "initialize")
      yield* TestClock.adjust("9999 millis")
      assert.isTrue(Option.isNone(yield* poll(made)))
      yield* TestClock.adjust("1 millis")
      assert.strictEqual((yield* Effect.flip(Fiber.join(made)))._tag, "HandshakeTimeout")
    }))

  it.effect("an untyped call with its own timeout keeps it: RequestTimeout", () =>
    Effect.gen(function*() {
      const { made, raw } = yield* connect((peer) => peer.callUntyped("initialize", {}, { timeout: "2 seconds" }))
      yield* raw.next
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* Effect.flip(Fiber.join(made)))._tag, "RequestTimeout")
    }))

  it.effect("a method with a timeout of its own keeps it: RequestTimeout at 2 s", () =>
    Effect.gen(function*() {
      const { made, raw } = yield* connect((peer) => peer.call(Quick, {}))
      yield* raw.next
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* Effect.flip(Fiber.join(made)))._tag, "RequestTimeout")
    }))

  it.effect("a peer kept after Ready: its typed and untyped calls have the peer's own timeout again", () =>
    Effect.gen(function*() {
      let kept: Peer.Peer<any, any> | undefined
      const { made, raw } = yield* connect((peer) => {
        kept = peer
        return peer.call(Initialize, {})
      }, { requestTimeout: "3 seconds" })
      const initialize = yield* raw.next
      yield* raw.send({ jsonrpc: "2.0", id: initialize.id, result: { ok: true } })
      yield* Fiber.join(made)
      const typed = yield* Effect.forkChild(Effect.flip(kept!.call(Work, {})))
      const untyped = yield* Effect.forkChild(Effect.flip(kept!.callUntyped("work", {})))
      yield* raw.next
      yield* raw.next
      yield* TestClock.adjust("3 seconds")
      assert.strictEqual((yield* Fiber.join(typed))._tag, "RequestTimeout")
      assert.strictEqual((yield* Fiber.join(untyped))._tag, "RequestTimeout")
    }))
})
