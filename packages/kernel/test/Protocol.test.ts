import { assert, describe, it } from "@effect/vitest"
import { RpcError } from "@lifeline/jsonrpc"
import { Method, Peer, PeerError, Protocol } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Fiber, Queue, Schema } from "effect"
import { TestClock } from "effect/testing"

class DivisionByZero extends Schema.TaggedError<DivisionByZero>()("DivisionByZero", {
  dividend: Schema.Number
}) {}

const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
const Divide = Method.request("math/divide", {
  params: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  result: Schema.Number,
  error: DivisionByZero
})
const Version = Method.request("version", { params: Method.NoParams, result: Schema.String })
const Slow = Method.request("slow", { params: Schema.Struct({}), result: Schema.Null })
const Log = Method.notification("window/log", { params: Schema.Struct({ text: Schema.String }) })
const Exit = Method.notification("exit", { params: Method.NoParams })

const Server = Protocol.make({ serves: [Add, Divide, Version, Slow, Log, Exit] })
const Client = Protocol.flip(Server)

const setup = Effect.gen(function*() {
  const logged = yield* Queue.unbounded<string>()
  const { transport } = yield* TestTransport.serve(Server, {
    add: ([a, b]) => Effect.succeed(a + b),
    "math/divide": ({ a, b }) => b === 0 ? Effect.fail(new DivisionByZero({ dividend: a })) : Effect.succeed(a / b),
    version: () => Effect.succeed("1.2.3"),
    slow: () => Effect.as(Effect.sleep("1 minute"), null),
    "window/log": ({ text }) => Queue.offer(logged, text),
    exit: () => Queue.offer(logged, "exit")
  })
  const peer = yield* Peer.make({ protocol: Client, transport, handlers: {} })
  return { client: Protocol.client(peer), logged }
})

describe("Protocol", () => {
  describe("client", () => {
    it.effect("one function per method the protocol calls, keyed by the method's name", () =>
      Effect.gen(function*() {
        const { client } = yield* setup
        assert.deepStrictEqual(Object.keys(client).sort(), [
          "add",
          "exit",
          "math/divide",
          "slow",
          "version",
          "window/log"
        ])
        assert.strictEqual(yield* client.add([1, 2]), 3)
        assert.strictEqual(yield* client["math/divide"]({ a: 6, b: 3 }), 2)
      }))

    it.effect("a request fails with the method's typed error, caught by its tag", () =>
      Effect.gen(function*() {
        const { client } = yield* setup
        const error = yield* Effect.flip(client["math/divide"]({ a: 1, b: 0 }))
        assert.strictEqual(error._tag, "DivisionByZero")
        const recovered = yield* client["math/divide"]({ a: 1, b: 0 }).pipe(
          Effect.catchTag("DivisionByZero", (e) => Effect.succeed(-e.dividend))
        )
        assert.strictEqual(recovered, -1)
      }))

    it.effect("params that may be undefined may be left out, for requests and notifications", () =>
      Effect.gen(function*() {
        const { client, logged } = yield* setup
        assert.strictEqual(yield* client.version(), "1.2.3")
        yield* client.exit()
        assert.strictEqual(yield* Queue.take(logged), "exit")
      }))

    it.effect("a notification completes once queued; the far end handles it", () =>
      Effect.gen(function*() {
        const { client, logged } = yield* setup
        yield* client["window/log"]({ text: "hello" })
        assert.strictEqual(yield* Queue.take(logged), "hello")
      }))

    it.effect("call options are the peer's: a timeout of the call's own, on the Clock", () =>
      Effect.gen(function*() {
        const { client } = yield* setup
        const call = yield* Effect.forkChild(Effect.flip(client.slow({}, { timeout: "2 seconds" })))
        yield* TestClock.adjust("2 seconds")
        const error = yield* Fiber.join(call)
        assert.instanceOf(error, PeerError.RequestTimeout)
      }))

    it.effect("params that do not match their Schema are refused with -32602 before anything is sent", () =>
      Effect.gen(function*() {
        const { client } = yield* setup
        // @ts-expect-error: a string is not a number
        const error = yield* Effect.flip(client.add([1, "2"]))
        assert.instanceOf(error, RpcError.RpcError)
        assert.strictEqual((error as RpcError.RpcError).code, -32602)
      }))

    it.effect("a method named __proto__ is an own key, not the prototype", () =>
      Effect.gen(function*() {
        const Proto = Method.request("__proto__", { params: Schema.Struct({}), result: Schema.String })
        const server = Protocol.make({ serves: [Proto] })
        const { transport } = yield* TestTransport.serve(server, { __proto__: () => Effect.succeed("own") } as any)
        const peer = yield* Peer.make({ protocol: Protocol.flip(server), transport, handlers: {} })
        const client = Protocol.client(peer)
        assert.isTrue(Object.hasOwn(client, "__proto__"))
        assert.strictEqual(Object.getPrototypeOf(client), Object.prototype)
      }))

    it("is typed from the protocol: unknown names and wrong params do not compile", () => {
      type CalcClient = Protocol.Client<Protocol.Calls<typeof Client>>
      const check = (client: CalcClient) => {
        // @ts-expect-error: the protocol does not call `subtract`
        const subtract = client.subtract
        // @ts-expect-error: `add` takes a pair
        client.add([1])
        // @ts-expect-error: notifications take their params too
        client["window/log"]({})
        const sum: Effect.Effect<number, Peer.CallError> = client.add([1, 2])
        const divided: Effect.Effect<number, DivisionByZero | Peer.CallError> = client["math/divide"]({ a: 1, b: 2 })
        const logged: Effect.Effect<void, PeerError.Disconnect> = client["window/log"]({ text: "" })
        return [subtract, sum, divided, logged]
      }
      assert.isFunction(check)
    })
  })
})
