import { assert, describe, it } from "@effect/vitest"
import { ErrorCode } from "@lifeline/jsonrpc"
import { Method, Peer, Protocol } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Schema } from "effect"
import { makeRaw } from "./utils.js"

/** `n`: 0 answers a plain string, 1 a `BigInt`, anything else an object that refers to itself. */
const Odd = Method.request("odd", { params: Schema.Struct({ n: Schema.Number }), result: Schema.Unknown })
const Get = Method.request("get", { params: Schema.Struct({ n: Schema.Number }), result: Schema.String })
const Server = Protocol.make({ serves: [Odd, Get] })

const cyclic = () => {
  const value: Record<string, unknown> = {}
  value.self = value
  return value
}

const setup = Effect.gen(function*() {
  const pair = yield* TestTransport.makePair()
  yield* Peer.make({
    protocol: Server,
    transport: pair.right,
    handlers: {
      odd: ({ n }) => Effect.succeed(n === 0 ? "fine" : n === 1 ? BigInt(n) : cyclic()),
      get: ({ n }) => Effect.succeed(`answer ${n}`)
    }
  })
  return yield* makeRaw(pair.left)
})

const request = (id: number, method: string, params: unknown) => ({ jsonrpc: "2.0", id, method, params })

describe("Peer: an answer JSON cannot write", () => {
  it.effect("a single answer is replaced by -32603 for its request", () =>
    Effect.gen(function*() {
      const raw = yield* setup
      yield* raw.send(request(1, "odd", { n: 1 }))
      yield* raw.send(request(2, "odd", { n: 2 }))
      const one = yield* raw.next
      const two = yield* raw.next
      assert.strictEqual(one.id, 1)
      assert.strictEqual(one.error.code, ErrorCode.InternalError)
      assert.strictEqual(two.id, 2)
      assert.strictEqual(two.error.code, ErrorCode.InternalError)
    }))

  it.effect("in a batch, each answer that cannot be written is replaced by -32603, the others go as they are", () =>
    Effect.gen(function*() {
      const raw = yield* setup
      yield* raw.send([
        request(1, "odd", { n: 0 }),
        request(2, "odd", { n: 1 }),
        request(3, "get", { n: 3 }),
        request(4, "odd", { n: 2 })
      ])
      const answers: Array<any> = yield* raw.next
      assert.isTrue(Array.isArray(answers))
      const byId = new Map(answers.map((a) => [a.id, a]))
      assert.strictEqual(byId.size, 4)
      assert.strictEqual(byId.get(1).result, "fine")
      assert.strictEqual(byId.get(2).error.code, ErrorCode.InternalError)
      assert.strictEqual(byId.get(3).result, "answer 3")
      assert.strictEqual(byId.get(4).error.code, ErrorCode.InternalError)
    }))
})
