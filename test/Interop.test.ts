/**
 * Our peer against vscode-jsonrpc's `MessageConnection`, over a pair of in-memory Node streams (ours reads and writes
 * them through `NodeStdio`, the transport it uses on a real stdio): what each side sends, the other must understand,
 * in both directions. vscode-jsonrpc schedules with real timers (`setImmediate`), so these tests run on the live
 * clock; none of them sleeps.
 */
import { assert, describe, it } from "@effect/vitest"
import { ErrorCode, Framing, RpcError } from "@lifeline/jsonrpc"
import { Cancellation, Method, Peer, Protocol } from "@lifeline/kernel"
import { NodeStdio } from "@lifeline/node"
import { Deferred, Effect, Exit, Fiber, References, Schema } from "effect"
import { PassThrough } from "node:stream"
import type { Readable } from "node:stream"
import {
  CancellationTokenSource,
  createMessageConnection,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter
} from "vscode-jsonrpc/node.js"
import type { CancellationToken, MessageConnection } from "vscode-jsonrpc/node.js"

// -- the protocol: what our side serves (vscode calls it) and what it calls (vscode serves it) ------------------------

class Nope
  extends Schema.TaggedError<Nope>()("Nope", { code: Schema.Number, message: Schema.String, why: Schema.String })
{}
const VsRefusal = Schema.Struct({ reason: Schema.String, retryIn: Schema.Number })

const Echo = Method.request("ours/echo", { params: Schema.Struct({ text: Schema.String }), result: Schema.String })
const Fails = Method.request("ours/fails", { params: Schema.Struct({}), result: Schema.Null, error: Nope })
const Refuses = Method.request("ours/refuses", { params: Schema.Struct({}), result: Schema.Null })
const Boom = Method.request("ours/boom", { params: Schema.Struct({}), result: Schema.Null })
const Slow = Method.request("ours/slow", { params: Schema.Struct({}), result: Schema.Null })
const Log = Method.notification("ours/log", { params: Schema.Struct({ text: Schema.String }) })

const Add = Method.request("vs/add", {
  params: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  result: Schema.Number
})
const VsFails = Method.request("vs/fails", { params: Schema.Struct({}), result: Schema.Null, error: VsRefusal })
const VsSlow = Method.request("vs/slow", { params: Schema.Struct({}), result: Schema.Null })
const VsMissing = Method.request("vs/missing", { params: Schema.Struct({}), result: Schema.Null })
const Event = Method.notification("vs/event", { params: Schema.Struct({ n: Schema.Number }) })

// vscode-jsonrpc cancels with LSP's `$/cancelRequest`.
const Ours = Protocol.make({
  serves: [Echo, Fails, Refuses, Boom, Slow, Log],
  calls: [Add, VsFails, VsSlow, VsMissing, Event],
  cancellation: Cancellation.lsp
})

/** A JS-side signal an Effect can wait for. */
const signal = <A = void>() => Deferred.makeUnsafe<A>()
const fire = <A>(deferred: Deferred.Deferred<A>, value: A) => Deferred.doneUnsafe(deferred, Exit.succeed(value))

const promise = <A>(evaluate: () => Promise<A>) => Effect.promise(evaluate)
const rejection = (evaluate: () => Promise<unknown>) =>
  Effect.promise(() => evaluate().then(() => assert.fail("expected a rejection"), (error: unknown) => error))

/** Frames arriving on a stream, decoded and parsed, without taking them from the peer that reads it. */
const tap = (stream: Readable) => {
  const decoder = Framing.contentLength.unsafeMakeDecoder()
  const seen: Array<any> = []
  stream.on("data", (chunk: Uint8Array) => {
    for (const body of decoder.push(chunk).frames) seen.push(JSON.parse(new TextDecoder().decode(body)))
  })
  return seen
}

const frame = (message: unknown) => Framing.contentLength.encodeString(JSON.stringify(message))

/** Waits, on the live clock, until `condition` holds; fails the test instead of hanging. */
const eventually = (condition: () => boolean, what: string) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 5_000
    while (!condition()) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`never reached: ${what}`))
      yield* promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
    }
  })

const setup = Effect.gen(function*() {
  const toVscode = new PassThrough()
  const toOurs = new PassThrough()
  const wireToOurs = tap(toOurs)
  const wireToVscode = tap(toVscode)

  const logged: Array<string> = []
  const ourSlow = { started: signal(), interrupted: signal() }
  const events: Array<number> = []
  const vsSlow = { started: signal(), cancelled: signal() }

  const connection: MessageConnection = createMessageConnection(
    new StreamMessageReader(toVscode),
    new StreamMessageWriter(toOurs)
  )
  connection.onRequest("vs/add", ({ a, b }: { a: number; b: number }) => a + b)
  connection.onRequest("vs/fails", () => {
    throw new ResponseError(-32042, "vs refused", { reason: "quota", retryIn: 5 })
  })
  connection.onRequest("vs/slow", (_params: unknown, token: CancellationToken) =>
    new Promise((_resolve, reject) => {
      fire(vsSlow.started, void 0)
      token.onCancellationRequested(() => {
        fire(vsSlow.cancelled, void 0)
        reject(new ResponseError(ErrorCode.RequestCancelled, "cancelled"))
      })
    }))
  connection.onNotification("vs/event", ({ n }: { n: number }) => {
    events.push(n)
  })
  connection.listen()
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      connection.dispose()
      toVscode.destroy()
      toOurs.destroy()
    })
  )

  const transport = yield* NodeStdio.make({
    stdin: toOurs,
    stdout: toVscode,
    stderr: new PassThrough(),
    guardStdout: false
  })
  const peer = yield* Peer.make({
    protocol: Ours,
    transport,
    handlers: {
      "ours/echo": ({ text }) => Effect.succeed(text),
      "ours/fails": () => Effect.fail(new Nope({ code: 7, message: "nope", why: "because" })),
      "ours/refuses": () => Effect.fail(RpcError.make(-32001, "refused", { hint: 1 })),
      "ours/boom": () => Effect.die(new Error("secret stack")),
      "ours/slow": () =>
        Effect.sync(() => fire(ourSlow.started, void 0)).pipe(
          Effect.andThen(Effect.never),
          Effect.onInterrupt(() => Effect.sync(() => fire(ourSlow.interrupted, void 0)))
        ),
      "ours/log": ({ text }) => Effect.sync(() => logged.push(text))
    }
  })
  return { peer, connection, toVscode, toOurs, wireToOurs, wireToVscode, logged, ourSlow, events, vsSlow }
}).pipe(
  // Answers nobody waits for (string ids) and handler defects (ours/boom) are logged by design; keep the output quiet.
  Effect.provideService(References.MinimumLogLevel, "None")
)

describe("Interop with vscode-jsonrpc", () => {
  describe("vscode calls us", () => {
    it.live("requests and their results", () =>
      Effect.gen(function*() {
        const { connection } = yield* setup
        assert.strictEqual(yield* promise(() => connection.sendRequest("ours/echo", { text: "héllo 🌍" })), "héllo 🌍")
      }).pipe(Effect.scoped))

    it.live("notifications, in order", () =>
      Effect.gen(function*() {
        const { connection, logged } = yield* setup
        for (const text of ["one", "two", "three"]) {
          yield* promise(() => connection.sendNotification("ours/log", { text }))
        }
        // A request behind them proves they have all been read.
        yield* promise(() => connection.sendRequest("ours/echo", { text: "fence" }))
        yield* eventually(() => logged.length === 3, "three notifications")
        assert.deepStrictEqual(logged, ["one", "two", "three"])
      }).pipe(Effect.scoped))

    it.live("a typed failure arrives as ResponseError with its code, message and encoded data", () =>
      Effect.gen(function*() {
        const { connection } = yield* setup
        const error = yield* rejection(() => connection.sendRequest("ours/fails", {}))
        assert.instanceOf(error, ResponseError)
        const response = error as ResponseError<unknown>
        assert.strictEqual(response.code, 7)
        assert.strictEqual(response.message, "nope")
        assert.deepStrictEqual(response.data, { _tag: "Nope", code: 7, message: "nope", why: "because" })
      }).pipe(Effect.scoped))

    it.live("an RpcError arrives as is; a defect as -32603 without the stack", () =>
      Effect.gen(function*() {
        const { connection } = yield* setup
        const refused = (yield* rejection(() => connection.sendRequest("ours/refuses", {}))) as ResponseError<unknown>
        assert.deepStrictEqual(refused.toJson(), { code: -32001, message: "refused", data: { hint: 1 } })
        const boom = (yield* rejection(() => connection.sendRequest("ours/boom", {}))) as ResponseError<unknown>
        assert.strictEqual(boom.code, ErrorCode.InternalError)
        assert.notInclude(JSON.stringify(boom.toJson()), "secret stack")
      }).pipe(Effect.scoped))

    it.live("invalid params are -32602, an unknown method -32601", () =>
      Effect.gen(function*() {
        const { connection } = yield* setup
        const invalid = (yield* rejection(() => connection.sendRequest("ours/echo", { text: 42 }))) as ResponseError<
          unknown
        >
        assert.strictEqual(invalid.code, ErrorCode.InvalidParams)
        const missing = (yield* rejection(() => connection.sendRequest("ours/missing", {}))) as ResponseError<unknown>
        assert.strictEqual(missing.code, ErrorCode.MethodNotFound)
      }).pipe(Effect.scoped))

    it.live("a CancellationTokenSource cancel interrupts our handler, which answers -32800", () =>
      Effect.gen(function*() {
        const { connection, ourSlow, peer } = yield* setup
        const source = new CancellationTokenSource()
        const answer = connection.sendRequest("ours/slow", {}, source.token).then(
          () => assert.fail("expected a rejection"),
          (error: unknown) => error as ResponseError<unknown>
        )
        yield* Deferred.await(ourSlow.started)
        source.cancel()
        yield* Deferred.await(ourSlow.interrupted)
        const error = yield* promise(() => answer)
        assert.strictEqual(error.code, ErrorCode.RequestCancelled)
        const stats = yield* peer.stats
        assert.strictEqual(stats.cancelledByPeer, 1)
        assert.strictEqual(stats.activeInbound, 0)
      }).pipe(Effect.scoped))
  })

  describe("we call vscode", () => {
    it.live("requests and their results", () =>
      Effect.gen(function*() {
        const { peer } = yield* setup
        assert.strictEqual(yield* peer.call(Add, { a: 2, b: 3 }), 5)
        assert.strictEqual(yield* peer.callUntyped("vs/add", { a: 1, b: 1 }), 2)
      }).pipe(Effect.scoped))

    it.live("notifications, in order", () =>
      Effect.gen(function*() {
        const { events, peer } = yield* setup
        for (let n = 0; n < 5; n++) yield* peer.notify(Event, { n })
        yield* peer.call(Add, { a: 0, b: 0 })
        yield* eventually(() => events.length === 5, "five notifications")
        assert.deepStrictEqual(events, [0, 1, 2, 3, 4])
      }).pipe(Effect.scoped))

    it.live("a ResponseError arrives as RpcError with code, message and data, and decodes to the typed error", () =>
      Effect.gen(function*() {
        const { peer } = yield* setup
        const raw = yield* Effect.flip(peer.callUntyped("vs/fails", {}))
        assert.instanceOf(raw, RpcError.RpcError)
        assert.deepStrictEqual((raw as RpcError.RpcError).toWire(), {
          code: -32042,
          message: "vs refused",
          data: { reason: "quota", retryIn: 5 }
        })
        const typed = yield* Effect.flip(peer.call(VsFails, {}))
        assert.deepStrictEqual(typed, { reason: "quota", retryIn: 5 })
      }).pipe(Effect.scoped))

    it.live("a method vscode does not serve is -32601", () =>
      Effect.gen(function*() {
        const { peer } = yield* setup
        const error = yield* Effect.flip(peer.call(VsMissing, {}))
        assert.instanceOf(error, RpcError.RpcError)
        assert.strictEqual((error as RpcError.RpcError).code, ErrorCode.MethodNotFound)
      }).pipe(Effect.scoped))

    it.live("interrupting our caller cancels vscode's token; its late answer is dropped and counted", () =>
      Effect.gen(function*() {
        const { peer, vsSlow, wireToVscode } = yield* setup
        const caller = yield* Effect.forkChild(peer.call(VsSlow, {}))
        yield* Deferred.await(vsSlow.started)
        yield* Fiber.interrupt(caller)
        yield* Deferred.await(vsSlow.cancelled)
        const request = wireToVscode.find((m) => m.method === "vs/slow")
        assert.deepStrictEqual(wireToVscode.find((m) => m.method === "$/cancelRequest"), {
          jsonrpc: "2.0",
          method: "$/cancelRequest",
          params: { id: request.id }
        })
        // vscode answers the cancelled request with -32800; it meets the tombstone.
        yield* eventually(() => peer.unsafeStats().lateResponses === 1, "the late answer")
        const stats = yield* peer.stats
        assert.strictEqual(stats.cancelledByUs, 1)
        assert.strictEqual(stats.unknownResponses, 0)
        assert.strictEqual(stats.pendingOutbound, 0)
      }).pipe(Effect.scoped))
  })

  describe("both ways", () => {
    it.live("concurrent calls in both directions on one connection each get their own answer", () =>
      Effect.gen(function*() {
        const { connection, peer } = yield* setup
        const n = 200
        const theirs = Promise.all(
          Array.from({ length: n }, (_, i) => connection.sendRequest("ours/echo", { text: `t${i}` }))
        )
        const ours = yield* Effect.forEach(
          Array.from({ length: n }, (_, i) => i),
          (i) => peer.call(Add, { a: i, b: 1000 }),
          { concurrency: "unbounded" }
        )
        assert.deepStrictEqual(ours, Array.from({ length: n }, (_, i) => i + 1000))
        assert.deepStrictEqual(yield* promise(() => theirs), Array.from({ length: n }, (_, i) => `t${i}`))
      }).pipe(Effect.scoped))
  })

  // vscode-jsonrpc numbers its own requests, so string ids are written onto the wire by hand, between the frames the
  // two peers exchange.
  describe("string ids", () => {
    it.live("vscode answers a string id with the same string; so do we, and we cancel by string id", () =>
      Effect.gen(function*() {
        const { peer, toOurs, toVscode, wireToOurs, wireToVscode } = yield* setup
        toVscode.write(frame({ jsonrpc: "2.0", id: "s-1", method: "vs/add", params: { a: 20, b: 22 } }))
        yield* eventually(() => wireToOurs.some((m) => m.id === "s-1"), "vscode's answer to s-1")
        assert.deepStrictEqual(wireToOurs.find((m) => m.id === "s-1"), { jsonrpc: "2.0", id: "s-1", result: 42 })

        toOurs.write(frame({ jsonrpc: "2.0", id: "s-2", method: "ours/echo", params: { text: "by string" } }))
        yield* eventually(() => wireToVscode.some((m) => m.id === "s-2"), "our answer to s-2")
        assert.deepStrictEqual(wireToVscode.find((m) => m.id === "s-2"), {
          jsonrpc: "2.0",
          id: "s-2",
          result: "by string"
        })

        toOurs.write(frame({ jsonrpc: "2.0", id: "s-3", method: "ours/slow", params: {} }))
        yield* eventually(() => peer.unsafeStats().activeInbound === 1, "ours/slow running")
        toOurs.write(frame({ jsonrpc: "2.0", method: "$/cancelRequest", params: { id: "s-3" } }))
        yield* eventually(() => wireToVscode.some((m) => m.id === "s-3"), "our answer to s-3")
        const cancelled = wireToVscode.find((m) => m.id === "s-3")
        assert.strictEqual(cancelled.error.code, ErrorCode.RequestCancelled)

        // Traffic between the two peers went on undisturbed.
        assert.strictEqual(yield* peer.call(Add, { a: 1, b: 2 }), 3)
      }).pipe(Effect.scoped))
  })
})
