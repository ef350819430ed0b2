import { assert, describe, it } from "@effect/vitest"
import { ErrorCode, Framing, RpcError } from "@lifeline/jsonrpc"
import { Cancellation, Method, Peer, PeerError, Protocol } from "@lifeline/kernel"
import type { Transport } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import {
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  Option,
  Queue,
  Ref,
  References,
  Schema,
  Scope,
  Stream,
  Tracer
} from "effect"
import type { Cause } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { eventually, makeRaw, poll, wireBodies, yieldTimes } from "./utils.js"

class Nope
  extends Schema.TaggedError<Nope>()("Nope", { code: Schema.Number, message: Schema.String, why: Schema.String })
{}

const Echo = Method.request("echo", { params: Schema.Struct({ text: Schema.String }), result: Schema.String })
const Sleep = Method.request("sleep", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })
const Fails = Method.request("fails", { params: Schema.Struct({}), result: Schema.Null, error: Nope })
const Refuses = Method.request("refuses", { params: Schema.Struct({}), result: Schema.Null })
const Boom = Method.request("boom", { params: Schema.Struct({}), result: Schema.Null })
const Log = Method.notification("log", { params: Schema.Struct({ text: Schema.String }) })
const Ask = Method.request("ask", { params: Schema.Struct({ question: Schema.String }), result: Schema.String })
const Quick = Method.request("quick", { params: Schema.Struct({}), result: Schema.Null, timeout: "100 millis" })

// LSP's cancellation: the timeout and cancellation tests below assert `$/cancelRequest` on the wire.
const Server = Protocol.make({
  serves: [Echo, Sleep, Fails, Refuses, Boom, Log],
  calls: [Ask],
  cancellation: Cancellation.lsp
})
const Client = Protocol.flip(Server)

type ServerOptions = Partial<Omit<Peer.Options<never, never, never>, "protocol" | "handlers" | "transport">>

const setup = (options: { readonly server?: ServerOptions; readonly raw?: boolean } = {}) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    const logged = yield* Ref.make<Array<string>>([])
    const server = yield* Peer.make({
      protocol: Server,
      transport: pair.left,
      handlers: {
        echo: ({ text }) => Effect.succeed(text),
        sleep: ({ ms }) => Effect.as(Effect.sleep(Duration.millis(ms)), ms),
        fails: () => Effect.fail(new Nope({ code: 7, message: "nope", why: "because" })),
        refuses: () => Effect.fail(RpcError.make(-32001, "refused", { hint: 1 })),
        boom: () => Effect.die(new Error("secret stack")),
        log: ({ text }) => Ref.update(logged, (all) => [...all, text])
      },
      ...(options.server as {})
    })
    const client = yield* Peer.make({
      protocol: Client,
      // A raw test drives the client's end by hand, so the client peer gets a transport of its own.
      transport: options.raw === true ? (yield* TestTransport.makePair()).right : pair.right,
      handlers: {
        ask: ({ question }) => Effect.succeed(`answer to ${question}`)
      }
    })
    return { pair, server, client, logged }
  })

describe("Peer", () => {
  describe("calls", () => {
    it.effect("calls a typed method and gets its typed result", () =>
      Effect.gen(function*() {
        const { client } = yield* setup()
        assert.strictEqual(yield* client.call(Echo, { text: "héllo 🌍" }), "héllo 🌍")
      }))

    it.effect("both sides call each other on one connection", () =>
      Effect.gen(function*() {
        const { client, server } = yield* setup()
        const [a, b] = yield* Effect.all([client.call(Echo, { text: "x" }), server.call(Ask, { question: "y" })], {
          concurrency: 2
        })
        assert.strictEqual(a, "x")
        assert.strictEqual(b, "answer to y")
      }))

    it.effect("answers may come in any order; each call gets its own result", () =>
      Effect.gen(function*() {
        const { client } = yield* setup()
        const fiber = yield* Effect.forkChild(
          Effect.all([30, 10, 20].map((ms) => client.call(Sleep, { ms })), { concurrency: "unbounded" })
        )
        yield* eventually(Effect.map(client.stats, (s) => s.requestsSent === 3))
        yield* TestClock.adjust("30 millis")
        assert.deepStrictEqual(yield* Fiber.join(fiber), [30, 10, 20])
      }))

    it.effect("notifications are handled while a call waits", () =>
      Effect.gen(function*() {
        const { client, logged } = yield* setup()
        const slow = yield* Effect.forkChild(client.call(Sleep, { ms: 1000 }))
        yield* client.notify(Log, { text: "one" })
        yield* client.notify(Log, { text: "two" })
        yield* eventually(Effect.map(Ref.get(logged), (l) => l.length === 2))
        assert.deepStrictEqual(yield* Ref.get(logged), ["one", "two"])
        assert.isTrue(Option.isNone(yield* poll(slow)))
        yield* TestClock.adjust("1 second")
        assert.strictEqual(yield* Fiber.join(slow), 1000)
      }))
  })

  describe("errors", () => {
    it.effect("params that fail the Schema are answered -32602 with the issue in data", () =>
      Effect.gen(function*() {
        const { client } = yield* setup()
        const error = yield* Effect.flip(client.callUntyped("echo", { text: 42 }))
        assert.strictEqual(error._tag, "RpcError")
        const rpc = error as RpcError.RpcError
        assert.strictEqual(rpc.code, ErrorCode.InvalidParams)
        assert.include(String(rpc.data), "text")
      }))

    it.effect("hostile params that make a Schema decoder throw are still -32602, not a defect", () =>
      Effect.gen(function*() {
        const Shape = Method.request("shape", {
          params: Schema.Union([Schema.TaggedStruct("Circle", { r: Schema.Number }), Schema.TaggedStruct("Dot", {})]),
          result: Schema.String
        })
        const pair = yield* TestTransport.makePair()
        const server = yield* Peer.make({
          protocol: Protocol.make({ serves: [Shape] }),
          transport: pair.left,
          handlers: { shape: (shape) => Effect.succeed(shape._tag) }
        })
        const raw = yield* makeRaw(pair.right)
        yield* raw.send({ jsonrpc: "2.0", id: 1, method: "shape", params: { _tag: { toString: null } } })
        const answer = yield* raw.next
        assert.strictEqual(answer.error.code, ErrorCode.InvalidParams)
        assert.strictEqual((yield* server.stats).handlerDefects, 0)
      }))

    it.effect("a handler's typed failure reaches the caller typed", () =>
      Effect.gen(function*() {
        const { client } = yield* setup()
        const error = yield* Effect.flip(client.call(Fails, {}))
        assert.instanceOf(error, Nope)
        assert.strictEqual((error as Nope).why, "because")
        const raw = yield* Effect.flip(client.callUntyped("fails", {}))
        assert.strictEqual((raw as RpcError.RpcError).code, 7)
        assert.strictEqual((raw as RpcError.RpcError).message, "nope")
      }))

    it.effect("a handler's RpcError is answered as is", () =>
      Effect.gen(function*() {
        const { client } = yield* setup()
        const error = yield* Effect.flip(client.call(Refuses, {}))
        assert.strictEqual(error._tag, "RpcError")
        assert.deepStrictEqual((error as RpcError.RpcError).toWire(), {
          code: -32001,
          message: "refused",
          data: { hint: 1 }
        })
      }))

    it.effect("a defect answers -32603 without the stack and the peer keeps serving", () =>
      Effect.gen(function*() {
        const { client, server } = yield* setup()
        const error = (yield* Effect.flip(client.call(Boom, {}))) as RpcError.RpcError
        assert.strictEqual(error.code, ErrorCode.InternalError)
        assert.isUndefined(error.data)
        assert.strictEqual(yield* client.call(Echo, { text: "still here" }), "still here")
        assert.strictEqual((yield* server.stats).handlerDefects, 1)
      }))

    it.effect("exposeDefects puts the cause in data", () =>
      Effect.gen(function*() {
        const { client } = yield* setup({ server: { exposeDefects: true } })
        const error = (yield* Effect.flip(client.call(Boom, {}))) as RpcError.RpcError
        assert.include(String(error.data), "secret stack")
      }))

    it.effect("an unknown method is -32601; unknown and $/ notifications are ignored", () =>
      Effect.gen(function*() {
        const { client } = yield* setup()
        const error = (yield* Effect.flip(client.callUntyped("nope/nothing"))) as RpcError.RpcError
        assert.strictEqual(error.code, ErrorCode.MethodNotFound)
        yield* client.notifyUntyped("nope/notified", { a: 1 })
        yield* client.notifyUntyped("$/progress", { token: 1 })
        assert.strictEqual(yield* client.call(Echo, { text: "ok" }), "ok")
      }))

    it.effect("invalid input from the peer gets a JSON-RPC error and the peer keeps serving", () =>
      Effect.gen(function*() {
        const { pair } = yield* setup({ raw: true })
        // The server's link is `left`; drive the other end by hand instead of the client peer.
        const raw = yield* makeRaw(pair.right)
        yield* raw.sendBytes("Content-Length: 5\r\n\r\n{oops")
        assert.deepStrictEqual(yield* raw.next, {
          jsonrpc: "2.0",
          id: null,
          error: { code: -32700, message: "Parse error", data: yield* Effect.sync(() => parseErrorMessage("{oops")) }
        })
        yield* raw.send({ jsonrpc: "2.0", id: 9, method: 42 })
        const invalid = yield* raw.next
        assert.strictEqual(invalid.id, 9)
        assert.strictEqual(invalid.error.code, -32600)
        yield* raw.send([])
        assert.strictEqual((yield* raw.next).error.code, -32600)
        yield* raw.send({ jsonrpc: "2.0", id: 10, method: "echo", params: { text: "fine" } })
        assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", id: 10, result: "fine" })
      }))

    it.effect("a batch is answered with a batch", () =>
      Effect.gen(function*() {
        const { pair, logged } = yield* setup({ raw: true })
        const raw = yield* makeRaw(pair.right)
        yield* raw.send([
          { jsonrpc: "2.0", id: 1, method: "echo", params: { text: "a" } },
          { jsonrpc: "2.0", method: "log", params: { text: "n" } },
          { jsonrpc: "2.0", id: 2, method: "missing" },
          { foo: 1 }
        ])
        const answers = yield* raw.next
        assert.deepStrictEqual(answers.slice(0, 2), [
          { jsonrpc: "2.0", id: 1, result: "a" },
          { jsonrpc: "2.0", id: 2, error: { code: -32601, message: "Method not found: missing" } }
        ])
        assert.strictEqual(answers[2].error.code, -32600)
        yield* eventually(Effect.map(Ref.get(logged), (l) => l.length === 1))
      }))

    it.effect("a defect inside a batch is answered -32603 and counted, as in a single request", () =>
      Effect.gen(function*() {
        const { pair, server } = yield* setup({ raw: true })
        const raw = yield* makeRaw(pair.right)
        yield* raw.send([
          { jsonrpc: "2.0", id: 1, method: "boom", params: {} },
          { jsonrpc: "2.0", id: 2, method: "echo", params: { text: "b" } }
        ])
        const answers = yield* raw.next
        assert.deepStrictEqual(answers[0], {
          jsonrpc: "2.0",
          id: 1,
          error: { code: -32603, message: "Internal error" }
        })
        assert.deepStrictEqual(answers[1], { jsonrpc: "2.0", id: 2, result: "b" })
        assert.strictEqual((yield* server.stats).handlerDefects, 1)
      }))

    it.effect("a second request with an id still in progress is refused", () =>
      Effect.gen(function*() {
        const { pair } = yield* setup({ raw: true })
        const raw = yield* makeRaw(pair.right)
        yield* raw.send({ jsonrpc: "2.0", id: 1, method: "sleep", params: { ms: 50 } })
        yield* raw.send({ jsonrpc: "2.0", id: 1, method: "sleep", params: { ms: 10 } })
        const refused = yield* raw.next
        assert.strictEqual(refused.error.code, -32600)
        yield* TestClock.adjust("50 millis")
        assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", id: 1, result: 50 })
      }))
  })

  describe("params null", () => {
    // Each handler answers with what it was given, so the test sees what absent params decoded to.
    const got = (params: unknown) => Effect.succeed(params === undefined ? "undefined" : params)
    const taking = <P extends Method.Codec<any>>(name: string, params: P) =>
      Method.request(name, { params, result: Schema.Unknown })
    const Empty = taking("empty", Schema.Struct({}))
    const Optional = taking("optional", Schema.Struct({ verbose: Schema.optional(Schema.Boolean) }))
    const None = taking("none", Method.NoParams)
    const Positional = taking("positional", Schema.Tuple([]))
    const Nullable = taking("nullable", Schema.Null)
    const Required = taking("required", Schema.Struct({ text: Schema.String }))
    const Note = Method.notification("note", { params: Schema.Struct({}) })
    const Taking = Protocol.make({ serves: [Empty, Optional, None, Positional, Nullable, Required, Note] })

    const serveTaking = Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      const notes = yield* Ref.make<Array<unknown>>([])
      const unknown = yield* Ref.make<Array<unknown>>([])
      const server = yield* Peer.make({
        protocol: Taking,
        transport: pair.left,
        handlers: {
          empty: got,
          optional: got,
          none: got,
          positional: got,
          nullable: got,
          required: got,
          note: (params) => Ref.update(notes, (all) => [...all, params])
        },
        onUnknownRequest: (_method, params) => Effect.as(Ref.update(unknown, (all) => [...all, params]), "fallback")
      })
      return { pair, server, notes, unknown }
    })

    it.effect("a request with params null is answered as one without params", () =>
      Effect.gen(function*() {
        const { pair } = yield* serveTaking
        const raw = yield* makeRaw(pair.right)
        // The exact bytes another client sends.
        yield* raw.sendBytes(
          Framing.contentLength.encodeString(`{"jsonrpc":"2.0","id":1,"method":"empty","params":null}`)
        )
        assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", id: 1, result: {} })
        yield* raw.sendBytes(Framing.contentLength.encodeString(`{"jsonrpc":"2.0","id":2,"method":"empty"}`))
        assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", id: 2, result: {} })
      }))

    it.effect("a handler whose params Schema takes no params gets what that Schema accepts", () =>
      Effect.gen(function*() {
        const { notes, pair, unknown } = yield* serveTaking
        const raw = yield* makeRaw(pair.right)
        const answers: Record<string, unknown> = {}
        let id = 0
        for (const method of ["empty", "optional", "none", "positional", "nullable", "nowhere"]) {
          yield* raw.send({ jsonrpc: "2.0", id: ++id, method, params: null })
          const answer = yield* raw.next
          assert.strictEqual(answer.id, id)
          answers[method] = answer.result
        }
        assert.deepStrictEqual(answers, {
          empty: {},
          optional: {},
          none: "undefined",
          positional: [],
          nullable: null,
          nowhere: "fallback"
        })
        assert.deepStrictEqual(yield* Ref.get(unknown), [undefined])
        // Params it requires are still required: -32602, not -32600.
        yield* raw.send({ jsonrpc: "2.0", id: 10, method: "required", params: null })
        const refused = yield* raw.next
        assert.strictEqual(refused.id, 10)
        assert.strictEqual(refused.error.code, ErrorCode.InvalidParams)
        // A notification with params null reaches its handler; so do batched requests.
        yield* raw.send({ jsonrpc: "2.0", method: "note", params: null })
        yield* eventually(Effect.map(Ref.get(notes), (all) => all.length === 1), "the notification is handled")
        assert.deepStrictEqual(yield* Ref.get(notes), [{}])
        yield* raw.send([
          { jsonrpc: "2.0", id: 11, method: "optional", params: null },
          { jsonrpc: "2.0", id: 12, method: "none", params: null }
        ])
        assert.deepStrictEqual(yield* raw.next, [
          { jsonrpc: "2.0", id: 11, result: {} },
          { jsonrpc: "2.0", id: 12, result: "undefined" }
        ])
      }))

    it.effect("a client never puts params null on the wire: it leaves the member out", () =>
      Effect.gen(function*() {
        const { pair, server } = yield* serveTaking
        const client = yield* Peer.make({ protocol: Protocol.flip(Taking), transport: pair.right, handlers: {} })
        // Untyped params given as null, and typed params whose Schema encodes them as null or undefined.
        assert.strictEqual(yield* client.callUntyped("nowhere", null as never), "fallback")
        assert.strictEqual(yield* client.call(Nullable, null), null)
        assert.strictEqual(yield* client.call(None, undefined), "undefined")
        yield* client.notifyUntyped("note", null as never)
        yield* client.notify(Note, {})
        yield* eventually(Effect.map(server.stats, (s) => s.notificationsReceived === 2), "both notifications arrive")
        assert.deepStrictEqual(yield* wireBodies(pair.rightToLeft), [
          `{"jsonrpc":"2.0","id":1,"method":"nowhere"}`,
          `{"jsonrpc":"2.0","id":2,"method":"nullable"}`,
          `{"jsonrpc":"2.0","id":3,"method":"none"}`,
          `{"jsonrpc":"2.0","method":"note"}`,
          `{"jsonrpc":"2.0","method":"note","params":{}}`
        ])
      }))
  })

  describe("tracing", () => {
    // A tracer that is not Effect's built-in one, as an exporter would install.
    const exporter = Effect.map(
      Effect.tracer,
      (builtIn) => Tracer.make({ span: builtIn.span, context: builtIn.context })
    )
    const cases = [
      { tracing: true, exporter: false, span: true, annotated: true },
      { tracing: false, exporter: true, span: false, annotated: false },
      { tracing: "auto", exporter: false, span: false, annotated: true },
      { tracing: "auto", exporter: true, span: true, annotated: true }
    ] as const
    for (const c of cases) {
      it.effect(
        `tracing: ${c.tracing}${c.exporter ? " with an exporter" : ""}: ${c.span ? "a" : "no"} span, ${
          c.annotated ? "with" : "without"
        } log annotations`,
        () =>
          Effect.gen(function*() {
            const Probe = Method.request("probe", {
              params: Schema.Struct({}),
              result: Schema.Struct({ span: Schema.String, method: Schema.optional(Schema.String) })
            })
            const pair = yield* TestTransport.makePair()
            const server = Peer.make({
              protocol: Protocol.make({ serves: [Probe] }),
              transport: pair.left,
              tracing: c.tracing,
              handlers: {
                probe: () =>
                  Effect.gen(function*() {
                    const span = yield* Effect.option(Effect.currentSpan)
                    const annotations = yield* References.CurrentLogAnnotations
                    const method = Option.fromUndefinedOr(annotations["rpc.method"])
                    return {
                      span: Option.match(span, { onNone: () => "none", onSome: (s) => s.name }),
                      ...(Option.isSome(method) ? { method: String(method.value) } : {})
                    }
                  })
              }
            })
            yield* c.exporter ? Effect.withTracer(server, yield* exporter) : server
            const client = yield* Peer.make({
              protocol: Protocol.make({ calls: [Probe] }),
              transport: pair.right,
              handlers: {}
            })
            assert.deepStrictEqual(yield* client.call(Probe, {}), {
              span: c.span ? "rpc.serve probe" : "none",
              ...(c.annotated ? { method: "probe" } : {})
            })
          })
      )
    }
  })

  describe("timeouts", () => {
    it.effect("a call fails with RequestTimeout exactly at its timeout, then a late answer is dropped", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const client = yield* Peer.make({
          protocol: Client,
          transport: pair.right,
          handlers: { ask: () => Effect.succeed("") }
        })
        const raw = yield* makeRaw(pair.left)
        const call = yield* Effect.forkChild(client.call(Echo, { text: "hello?" }))
        const request = yield* raw.next
        yield* TestClock.adjust(Duration.millis(4999))
        assert.isTrue(Option.isNone(yield* poll(call)))
        yield* TestClock.adjust(Duration.millis(1))
        const error = yield* Effect.flip(Fiber.join(call))
        assert.instanceOf(error, PeerError.RequestTimeout)
        // The other side is told to stop working on it.
        assert.deepStrictEqual(yield* raw.next, {
          jsonrpc: "2.0",
          method: "$/cancelRequest",
          params: { id: request.id }
        })
        yield* raw.send({ jsonrpc: "2.0", id: request.id, result: "too late" })
        yield* raw.send({ jsonrpc: "2.0", id: 999, result: "never asked" })
        yield* eventually(Effect.map(client.stats, (s) => s.lateResponses === 1 && s.unknownResponses === 1))
        const stats = yield* client.stats
        assert.strictEqual(stats.timedOut, 1)
        assert.strictEqual(stats.pendingOutbound, 0)
      }))

    it.effect("per-call and per-method timeouts override the default", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const client = yield* Peer.make({
          protocol: Protocol.make({ calls: [Echo, Quick] }),
          transport: pair.right,
          handlers: {},
          requestTimeout: "1 minute"
        })
        yield* makeRaw(pair.left)
        const byMethod = yield* Effect.forkChild(client.call(Quick, {}))
        const byCall = yield* Effect.forkChild(client.call(Echo, { text: "" }, { timeout: "2 seconds" }))
        yield* TestClock.adjust("100 millis")
        assert.strictEqual((yield* Effect.flip(Fiber.join(byMethod)))._tag, "RequestTimeout")
        assert.isTrue(Option.isNone(yield* poll(byCall)))
        yield* TestClock.adjust("1900 millis")
        assert.strictEqual((yield* Effect.flip(Fiber.join(byCall)))._tag, "RequestTimeout")
      }))
  })

  describe("cancellation", () => {
    it.effect("interrupting a caller cancels the handler on the other side, which answers -32800", () =>
      Effect.gen(function*() {
        const { client, server } = yield* setup()
        const call = yield* Effect.forkChild(client.call(Sleep, { ms: 10_000 }))
        yield* eventually(Effect.map(server.stats, (s) => s.activeInbound === 1))
        yield* Fiber.interrupt(call)
        yield* eventually(Effect.map(server.stats, (s) => s.activeInbound === 0), "handler interrupted")
        assert.strictEqual((yield* server.stats).cancelledByPeer, 1)
        // The -32800 answer meets the tombstone on our side and is dropped quietly.
        yield* eventually(Effect.map(client.stats, (s) => s.lateResponses === 1), "late -32800 dropped")
        assert.strictEqual((yield* client.stats).cancelledByUs, 1)
      }))

    it.effect("a cancel that arrives after the answer left is ignored", () =>
      Effect.gen(function*() {
        const { pair, server } = yield* setup({ raw: true })
        const raw = yield* makeRaw(pair.right)
        yield* raw.send({ jsonrpc: "2.0", id: 5, method: "echo", params: { text: "done" } })
        assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", id: 5, result: "done" })
        yield* raw.send({ jsonrpc: "2.0", method: "$/cancelRequest", params: { id: 5 } })
        yield* raw.send({ jsonrpc: "2.0", id: 6, method: "echo", params: { text: "next" } })
        assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", id: 6, result: "next" })
        assert.strictEqual((yield* server.stats).cancelledByPeer, 0)
      }))

    it.effect("the cancellation method is configurable (MCP's notifications/cancelled)", () =>
      Effect.gen(function*() {
        const mcp: Peer.Cancellation = {
          method: "notifications/cancelled",
          encode: (requestId) => ({ requestId }),
          decode: (params) => (params as { requestId?: string | number } | undefined)?.requestId
        }
        const { pair, server } = yield* setup({ server: { cancellation: mcp }, raw: true })
        const raw = yield* makeRaw(pair.right)
        yield* raw.send({ jsonrpc: "2.0", id: "a", method: "sleep", params: { ms: 10_000 } })
        yield* eventually(Effect.map(server.stats, (s) => s.activeInbound === 1))
        yield* raw.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "a" } })
        const answer = yield* raw.next
        assert.strictEqual(answer.id, "a")
        assert.strictEqual(answer.error.code, ErrorCode.RequestCancelled)
      }))
  })

  describe("teardown", () => {
    it.effect("closing the Scope fails pending calls with ShutdownError and interrupts handlers", () =>
      Effect.gen(function*() {
        const outer = yield* Scope.make()
        const pair = yield* TestTransport.makePair().pipe(Scope.provide(outer))
        const interrupted = yield* Deferred.make<void>()
        const scope = yield* Scope.make()
        const server = yield* Peer.make({
          protocol: Protocol.make({ serves: [Sleep] }),
          transport: pair.left,
          handlers: { sleep: () => Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, void 0))) }
        }).pipe(Scope.provide(scope))
        const client = yield* Peer.make({
          protocol: Protocol.make({ calls: [Sleep] }),
          transport: pair.right,
          handlers: {}
        })
          .pipe(Scope.provide(scope))
        const call = yield* Effect.forkChild(client.call(Sleep, { ms: 1 }))
        yield* eventually(Effect.map(server.stats, (s) => s.activeInbound === 1))
        yield* Scope.close(scope, Exit.void)
        const error = yield* Effect.flip(Fiber.join(call))
        assert.strictEqual(error._tag, "ShutdownError")
        assert.isTrue(yield* Deferred.isDone(interrupted))
        // Calls after the close fail at once; they do not wait for a timeout.
        assert.strictEqual((yield* Effect.flip(client.call(Sleep, { ms: 1 })))._tag, "ShutdownError")
        yield* Scope.close(outer, Exit.void)
      }))

    it.effect("while the peer closes, a request or a batch that arrives is refused with -32003, nothing starts", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const release = yield* Deferred.make<void>()
        const started = yield* Ref.make(0)
        const server = yield* Peer.make({
          protocol: Protocol.make({ serves: [Sleep] }),
          transport: pair.left,
          handlers: {
            // Its interruption waits for `release`: the close is held in its "interrupt the handlers" step.
            sleep: () =>
              Ref.update(started, (n) => n + 1).pipe(
                Effect.andThen(Effect.never),
                Effect.onInterrupt(() => Deferred.await(release))
              )
          }
        })
        const raw = yield* makeRaw(pair.right)
        yield* raw.send({ jsonrpc: "2.0", id: 1, method: "sleep", params: { ms: 1 } })
        yield* eventually(Effect.map(Ref.get(started), (n) => n === 1))
        const closing = yield* Effect.forkChild(
          server.close(new PeerError.ShutdownError({ reason: "Stop", phase: "Scope" }))
        )
        yield* raw.send({ jsonrpc: "2.0", id: 2, method: "sleep", params: { ms: 1 } })
        yield* raw.send([
          { jsonrpc: "2.0", id: 3, method: "sleep", params: { ms: 1 } },
          { jsonrpc: "2.0", id: 4, method: "sleep", params: { ms: 1 } }
        ])
        const single = yield* raw.next
        const batch = yield* raw.next
        assert.deepStrictEqual([single.id, single.error.code], [2, -32003])
        assert.deepStrictEqual(batch.map((answer: any) => [answer.id, answer.error.code]), [[3, -32003], [4, -32003]])
        assert.strictEqual(yield* Ref.get(started), 1)
        yield* Deferred.succeed(release, void 0)
        yield* Fiber.join(closing)
      }))

    it.effect("when the other side closes, pending calls fail with PeerClosed at once", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const client = yield* Peer.make({
          protocol: Client,
          transport: pair.right,
          handlers: { ask: () => Effect.succeed("") }
        })
        const raw = yield* makeRaw(pair.left)
        const call = yield* Effect.forkChild(client.call(Echo, { text: "?" }))
        yield* raw.next
        yield* pair.leftToRight.close
        const error = yield* Effect.flip(Fiber.join(call))
        assert.instanceOf(error, PeerError.PeerClosed)
        assert.strictEqual((error as PeerError.PeerClosed).reason, "TransportClosed")
        assert.strictEqual((yield* client.closed)._tag, "PeerClosed")
      }))

    it.effect("a framing error fails pending calls with PeerClosed(TransportFailed)", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair()
        const client = yield* Peer.make({
          protocol: Client,
          transport: pair.right,
          handlers: { ask: () => Effect.succeed("") },
          limits: { maxBodyBytes: 100 }
        })
        const raw = yield* makeRaw(pair.left)
        const call = yield* Effect.forkChild(client.call(Echo, { text: "?" }))
        yield* raw.next
        yield* raw.sendBytes("Content-Length: 1000\r\n\r\n")
        const error = (yield* Effect.flip(Fiber.join(call))) as PeerError.PeerClosed
        assert.strictEqual(error.reason, "TransportFailed")
      }))
  })

  describe("flow control", () => {
    it.effect("maxConcurrentHandlers bounds the handlers running at once", () =>
      Effect.gen(function*() {
        const { client, server } = yield* setup({ server: { maxConcurrentHandlers: 2 } })
        const calls = yield* Effect.forkChild(
          Effect.all([100, 100, 100].map((ms) => client.call(Sleep, { ms })), { concurrency: "unbounded" })
        )
        yield* eventually(Effect.map(server.stats, (s) => s.requestsReceived === 3))
        yield* TestClock.adjust("100 millis")
        yield* eventually(Effect.map(client.stats, (s) => s.responsesReceived === 2))
        assert.isTrue(Option.isNone(yield* poll(calls)))
        yield* TestClock.adjust("100 millis")
        assert.deepStrictEqual(yield* Fiber.join(calls), [100, 100, 100])
      }))

    it.effect("a reader that does not read pushes back on the writer instead of growing memory", () =>
      Effect.gen(function*() {
        const pair = yield* TestTransport.makePair({ capacity: 4 })
        const client = yield* Peer.make({
          protocol: Protocol.make({ calls: [Log] }),
          transport: pair.right,
          handlers: {},
          outboundCapacity: 8
        })
        yield* pair.rightToLeft.pause
        const sent = yield* Ref.make(0)
        const flood = yield* Effect.forkChild(
          Effect.forEach(
            Array.from({ length: 100 }, (_, i) => i),
            (i) => Effect.andThen(client.notify(Log, { text: String(i) }), Ref.update(sent, (n) => n + 1))
          )
        )
        for (let i = 0; i < 200; i++) yield* Effect.yieldNow
        const stuckAt = yield* Ref.get(sent)
        assert.isBelow(stuckAt, 100)
        assert.isTrue(Option.isNone(yield* poll(flood)))
        yield* pair.rightToLeft.resume
        const raw = yield* makeRaw(pair.left)
        yield* Fiber.join(flood)
        for (let i = 0; i < 100; i++) assert.strictEqual((yield* raw.next).params.text, String(i))
      }))
  })

  it.effect("a transport's unsafeTrySend carries frames while the writer is idle, in order with send", () =>
    Effect.gen(function*() {
      // A pair whose right side offers the fast path and counts which way each frame went.
      const leftToRight = yield* Queue.unbounded<Uint8Array, Cause.Done>()
      const rightToLeft = yield* Queue.bounded<Uint8Array, Cause.Done>(4)
      let direct = 0
      let sent = 0
      const left: Transport.Transport.Service = {
        incoming: Stream.fromQueue(rightToLeft),
        send: (chunks) => Effect.asVoid(Queue.offerAll(leftToRight, chunks)),
        end: Effect.asVoid(Queue.end(leftToRight))
      }
      const right: Transport.Transport.Service = {
        incoming: Stream.fromQueue(leftToRight),
        send: (chunks) =>
          Effect.sync(() => sent += chunks.length).pipe(Effect.andThen(Queue.offerAll(rightToLeft, chunks))),
        end: Effect.asVoid(Queue.end(rightToLeft)),
        unsafeTrySend: (chunk) => Queue.offerUnsafe(rightToLeft, chunk) && ++direct > 0
      }
      yield* Peer.make({
        protocol: Protocol.make({ serves: [Sleep] }),
        transport: left,
        handlers: { sleep: ({ ms }) => Effect.succeed(ms) }
      })
      const client = yield* Peer.make({ protocol: Protocol.make({ calls: [Sleep] }), transport: right, handlers: {} })
      // Sequential calls: once the writer has started and parked, each request leaves through the fast path.
      for (let i = 0; i < 5; i++) assert.strictEqual(yield* client.call(Sleep, { ms: i }), i)
      assert.isAtLeast(direct, 4)
      // 50 at once overflow the 4-frame mailbox: the rest go through send, and every call still gets its own answer.
      const results = yield* Effect.all(Array.from({ length: 50 }, (_, i) => client.call(Sleep, { ms: i })), {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual(results, Array.from({ length: 50 }, (_, i) => i))
      assert.isAbove(sent, 0)
    }))

  it.effect("calls that find the outbound queue full wait for room; one that times out there is never sent", () =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair({ capacity: 1 })
      const client = yield* Peer.make({
        protocol: Protocol.make({ calls: [Sleep], cancellation: Cancellation.lsp }),
        transport: pair.right,
        handlers: {},
        outboundCapacity: 2
      })
      yield* pair.rightToLeft.pause
      // The first waits without a deadline to speak of; the rest time out while the reader is stuck.
      const first = yield* Effect.forkChild(client.call(Sleep, { ms: 1 }, { timeout: "1 hour" }))
      const rest = yield* Effect.forkChild(
        Effect.all(
          Array.from(
            { length: 9 },
            (_, i) => Effect.result(client.call(Sleep, { ms: i + 2 }, { timeout: "1 second" }))
          ),
          { concurrency: "unbounded" }
        )
      )
      yield* eventually(Effect.map(client.stats, (s) => s.requestsSent === 10), "all ten calls issued")
      yield* TestClock.adjust("1 second")
      const failed = yield* Fiber.join(rest)
      assert.isTrue(failed.every((r) => r._tag === "Failure" && r.failure._tag === "RequestTimeout"))
      assert.strictEqual((yield* client.stats).pendingOutbound, 1)
      // The reader wakes: what reached the queue arrives (with a cancellation for each timed-out call that was in
      // it); the calls that never left the overflow are not sent at all.
      const raw = yield* makeRaw(pair.left)
      yield* pair.rightToLeft.resume
      yield* eventually(Effect.map(Queue.size(raw.received), (n) => n > 0), "frames arrive")
      for (let i = 0; i < 100; i++) yield* Effect.yieldNow
      // `Queue.clear` takes whatever is there without waiting (`Queue.takeAll` waits for at least one).
      const arrived = yield* Queue.clear(raw.received)
      const requests = arrived.filter((m: any) => m.method === "sleep")
      const cancels = arrived.filter((m: any) => m.method === "$/cancelRequest")
      assert.isBelow(requests.length, 10)
      assert.strictEqual(requests[0].params.ms, 1)
      assert.deepStrictEqual(
        cancels.map((m: any) => m.params.id).sort(),
        requests.slice(1).map((m: any) => m.id).sort()
      )
      yield* raw.send({ jsonrpc: "2.0", id: requests[0].id, result: 1 })
      assert.strictEqual(yield* Fiber.join(first), 1)
    }))

  it.effect("frames leave in the order they were issued while calls wait for room in a full outbound queue", () =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair({ capacity: 1 })
      const client = yield* Peer.make({
        protocol: Protocol.make({ calls: [Sleep, Log] }),
        transport: pair.right,
        handlers: {},
        outboundCapacity: 1
      })
      yield* pair.rightToLeft.pause
      const settle = yieldTimes(50)
      // 1 fills the link, 2 blocks the writer in `send`, 3 fills the queue, 4 finds it full and waits for room.
      for (let ms = 1; ms <= 4; ms++) {
        yield* Effect.forkChild(client.call(Sleep, { ms }, { timeout: "1 hour" }))
        yield* eventually(Effect.map(client.stats, (s) => s.requestsSent === ms), `call ${ms} issued`)
        yield* settle
      }
      // Issued after call 4 (which its caller knows was issued): it must not reach the wire before it.
      const notified = yield* Effect.forkChild(client.notify(Log, { text: "after 4" }))
      yield* settle
      // And a call issued after that, once room frees up.
      const raw = yield* makeRaw(pair.left)
      yield* pair.rightToLeft.resume
      yield* Fiber.join(notified)
      yield* Effect.forkChild(client.call(Sleep, { ms: 5 }, { timeout: "1 hour" }))
      const order: Array<string> = []
      for (let i = 0; i < 6; i++) {
        const message = yield* raw.next
        order.push(message.method === "log" ? message.params.text : String(message.params.ms))
      }
      assert.deepStrictEqual(order, ["1", "2", "3", "4", "after 4", "5"])
    }))

  it.effect("a notification interrupted while it waits for room in a full outbound queue is never sent", () =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair({ capacity: 1 })
      const client = yield* Peer.make({
        protocol: Protocol.make({ calls: [Log] }),
        transport: pair.right,
        handlers: {},
        outboundCapacity: 1
      })
      yield* pair.rightToLeft.pause
      const settle = yieldTimes(50)
      const notifiers: Array<Fiber.Fiber<void, unknown>> = []
      for (let i = 1; i <= 5; i++) {
        notifiers.push(yield* Effect.forkChild(client.notify(Log, { text: String(i) })))
        yield* settle
      }
      assert.isTrue(Option.isNone(yield* poll(notifiers[3])))
      yield* Fiber.interrupt(notifiers[3])
      const raw = yield* makeRaw(pair.left)
      yield* pair.rightToLeft.resume
      yield* Fiber.join(notifiers[4])
      const texts: Array<string> = []
      for (let i = 0; i < 4; i++) texts.push((yield* raw.next).params.text)
      assert.deepStrictEqual(texts, ["1", "2", "3", "5"])
      yield* settle
      assert.strictEqual(yield* Queue.size(raw.received), 0)
    }))

  // fast-check itself: the @effect/vitest 4 `it.effect.prop` takes `effect/Arbitrary` values and Schemas only. Each run
  // gets a Scope and a TestClock of its own, as a run of `it.effect.prop` did.
  it.effect("concurrent calls both ways with answers in random order: each completes once with its own result", () =>
    Effect.gen(function*() {
      const context = yield* Effect.context<never>()
      const property = (fromClient: ReadonlyArray<number>, fromServer: ReadonlyArray<number>) =>
        Effect.gen(function*() {
          const { client, server } = yield* setup()
          const both = yield* Effect.forkChild(Effect.all([
            Effect.all(fromClient.map((ms) => client.call(Sleep, { ms })), { concurrency: "unbounded" }),
            Effect.all(fromServer.map((n) => server.call(Ask, { question: String(n) })), { concurrency: "unbounded" })
          ], { concurrency: 2 }))
          yield* eventually(Effect.map(client.stats, (s) => s.requestsSent === fromClient.length))
          yield* TestClock.adjust("50 millis")
          const [a, b] = yield* Fiber.join(both)
          assert.deepStrictEqual(a, fromClient)
          assert.deepStrictEqual(b, fromServer.map((n) => `answer to ${n}`))
          const stats = yield* client.stats
          assert.strictEqual(stats.responsesReceived, fromClient.length)
          assert.strictEqual(stats.pendingOutbound, 0)
          assert.strictEqual(stats.unknownResponses + stats.lateResponses, 0)
        }).pipe(Effect.scoped, Effect.provide(TestClock.layer()), Effect.runPromiseWith(context))
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(
            fc.array(fc.nat({ max: 50 }), { minLength: 1, maxLength: 40 }),
            fc.array(fc.nat({ max: 50 }), { maxLength: 40 }),
            property
          ),
          { numRuns: 30 }
        )
      )
    }))
})

const parseErrorMessage = (text: string): string => {
  try {
    JSON.parse(text)
    return ""
  } catch (e) {
    return (e as Error).message
  }
}
