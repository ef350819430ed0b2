import { assert, describe, it } from "@effect/vitest"
import { Connection, Method, Peer, Protocol, Transport } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Fiber, Layer, Schema } from "effect"
import { TestClock } from "effect/testing"

const Slow = Method.request("slow", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.String })
const Note = Method.notification("note", { params: Schema.Struct({ text: Schema.String }) })
const Server = Protocol.make({ serves: [Slow, Note] })

const handlers = {
  slow: ({ ms }: { readonly ms: number }) => Effect.as(Effect.sleep(`${ms} millis`), "done"),
  note: () => Effect.void
}

// The far end in a layer, as an application's test composes it (docs/testing.md's first example).
const FarEndLayer = TestTransport.layerServe(Server, handlers)

class SlowConnection extends Connection.Service<SlowConnection>()("test/SlowConnection", {
  protocol: Protocol.flip(Server)
}) {}

describe("TestTransport.FarEnd", () => {
  it.effect("started waits until the far end's handler runs, so the clock moves its sleep to the millisecond", () =>
    Effect.gen(function*() {
      const client = yield* Peer.make({
        protocol: Protocol.flip(Server),
        transport: yield* Transport.Transport,
        handlers: {}
      })
      const farEnd = yield* TestTransport.FarEnd
      const call = yield* Effect.forkChild(client.call(Slow, { ms: 2000 }))
      yield* farEnd.started("slow")
      yield* TestClock.adjust("1999 millis")
      assert.isUndefined(call.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Fiber.join(call), "done")
    }).pipe(Effect.provide(FarEndLayer)))

  it.effect("started counts: it waits for the n-th start of a method, notifications included", () =>
    Effect.gen(function*() {
      const served = yield* TestTransport.serve(Server, handlers)
      const client = yield* Peer.make({ protocol: Protocol.flip(Server), transport: served.transport, handlers: {} })
      const third = yield* Effect.forkChild(served.started("note", 3))
      yield* client.notify(Note, { text: "1" })
      yield* client.notify(Note, { text: "2" })
      yield* served.idle
      assert.isUndefined(third.pollUnsafe())
      yield* client.notify(Note, { text: "3" })
      yield* Fiber.join(third)
    }))

  it.effect("idle waits until every running handler of the far end has ended", () =>
    Effect.gen(function*() {
      const served = yield* TestTransport.serve(Server, handlers)
      const client = yield* Peer.make({ protocol: Protocol.flip(Server), transport: served.transport, handlers: {} })
      yield* served.idle // nothing ever started
      const calls = yield* Effect.forkChild(
        Effect.all([client.call(Slow, { ms: 1000 }), client.call(Slow, { ms: 3000 })], { concurrency: 2 })
      )
      yield* served.started("slow", 2)
      const idle = yield* Effect.forkChild(served.idle)
      yield* TestClock.adjust("1 second")
      assert.isUndefined(idle.pollUnsafe())
      yield* TestClock.adjust("2 seconds")
      yield* Fiber.join(idle)
      assert.deepStrictEqual(yield* Fiber.join(calls), ["done", "done"])
    }))

  it.effect("a service over Connection.Service: the test waits for the far end, not for a guessed number of yields", () =>
    Effect.gen(function*() {
      const client = yield* SlowConnection.client
      const farEnd = yield* TestTransport.FarEnd
      const call = yield* Effect.forkChild(client.slow({ ms: 3000 }))
      yield* farEnd.started("slow")
      yield* TestClock.adjust("2999 millis")
      assert.isUndefined(call.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Fiber.join(call), "done")
    }).pipe(
      Effect.provide(SlowConnection.layer({ handlers: {} }).pipe(Layer.provideMerge(FarEndLayer)))
    ))
})
