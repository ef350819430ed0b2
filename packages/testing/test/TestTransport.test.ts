import { assert, describe, it } from "@effect/vitest"
import { Framing } from "@lifeline/jsonrpc"
import { Method, Peer, Protocol, Transport } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Exit, Fiber, Option, Queue, Schema, Scope, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { poll, yieldTimes } from "./utils.js"

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text)
const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes)

const readAll = (transport: Transport.Transport.Service) =>
  Stream.runCollect(transport.incoming).pipe(Effect.map((chunks) => chunks.map(text)))

const readN = (transport: Transport.Transport.Service, n: number) =>
  transport.incoming.pipe(
    Stream.take(n),
    Stream.runCollect,
    Effect.map((chunks) => chunks.map(text))
  )

/** Forks a reader that puts every chunk it receives into a queue, so a test can look at what has arrived so far. */
const collect = (transport: Transport.Transport.Service) =>
  Effect.gen(function*() {
    const received = yield* Queue.unbounded<string>()
    const fiber = yield* transport.incoming.pipe(
      Stream.runForEach((chunk) => Queue.offer(received, text(chunk))),
      Effect.forkChild
    )
    return { received, fiber }
  })

const settle = yieldTimes(20)

describe("TestTransport", () => {
  it.effect("delivers the chunks one side sends to the other, in order, both ways", () =>
    Effect.gen(function*() {
      const { left, right } = yield* TestTransport.makePair()
      yield* left.send([utf8("a"), utf8("b")])
      yield* left.send([utf8("c")])
      yield* right.send([utf8("x")])
      yield* right.send([utf8("y"), utf8("z")])
      assert.deepStrictEqual(yield* readN(right, 3), ["a", "b", "c"])
      assert.deepStrictEqual(yield* readN(left, 3), ["x", "y", "z"])
    }))

  it.effect("copies what is sent, so the sender may reuse its buffer", () =>
    Effect.gen(function*() {
      const { left, right } = yield* TestTransport.makePair()
      const buffer = utf8("abc")
      yield* left.send([buffer])
      buffer.set(utf8("zzz"))
      assert.deepStrictEqual(yield* readN(right, 1), ["abc"])
    }))

  it.effect("end half-closes: the other side reads what was sent, then the end, and can still send back", () =>
    Effect.gen(function*() {
      const { left, leftToRight, right } = yield* TestTransport.makePair()
      yield* left.send([utf8("last words")])
      yield* left.end
      yield* left.end // idempotent
      const error = yield* Effect.flip(left.send([utf8("too late")]))
      assert.strictEqual(error._tag, "TransportError")
      assert.strictEqual(error.reason, "Closed")
      assert.deepStrictEqual(yield* readAll(right), ["last words"])
      assert.deepStrictEqual(yield* readAll(right), []) // it stays ended
      yield* right.send([utf8("still here")])
      assert.deepStrictEqual(yield* readN(left, 1), ["still here"])
      assert.deepStrictEqual((yield* leftToRight.sent).map(text), ["last words"])
    }))

  it.effect("close ends the receiver's incoming after what was sent and fails later sends", () =>
    Effect.gen(function*() {
      const { left, leftToRight, right } = yield* TestTransport.makePair()
      yield* left.send([utf8("before")])
      yield* leftToRight.close
      assert.deepStrictEqual(yield* readAll(right), ["before"])
      const error = yield* Effect.flip(left.send([utf8("after")]))
      assert.strictEqual(error.reason, "Closed")
    }))

  it.effect("fail fails the receiver's incoming with a Read error after what was sent", () =>
    Effect.gen(function*() {
      const { left, leftToRight, right } = yield* TestTransport.makePair()
      yield* left.send([utf8("before")])
      yield* leftToRight.fail("connection reset")
      const { fiber, received } = yield* collect(right)
      const exit = yield* Fiber.await(fiber)
      // `Queue.clear` takes whatever is there without waiting (`Queue.takeAll` waits for at least one).
      assert.deepStrictEqual(yield* Queue.clear(received), ["before"])
      assert.isTrue(Exit.isFailure(exit))
      const error = yield* Effect.flip(Stream.runDrain(right.incoming)) // and again on a later run
      assert.strictEqual(error._tag, "TransportError")
      assert.strictEqual(error.reason, "Read")
      assert.strictEqual(error.message, "connection reset")
      assert.strictEqual((yield* Effect.flip(left.send([utf8("after")]))).reason, "Closed")
    }))

  it.effect("drop loses the next chunks, which still show up in sent", () =>
    Effect.gen(function*() {
      const { left, leftToRight, right } = yield* TestTransport.makePair()
      yield* leftToRight.drop(2)
      yield* left.send([utf8("one"), utf8("two")])
      yield* left.send([utf8("three")])
      yield* left.end
      assert.deepStrictEqual(yield* readAll(right), ["three"])
      assert.deepStrictEqual((yield* leftToRight.sent).map(text), ["one", "two", "three"])
    }))

  it.effect("rechunk re-splits the bytes with the sizes cycled, merging what has arrived", () =>
    Effect.gen(function*() {
      const { left, leftToRight, right } = yield* TestTransport.makePair()
      yield* leftToRight.rechunk([3, 1])
      yield* left.send([utf8("ab"), utf8("cdef"), utf8("g")])
      yield* left.end
      assert.deepStrictEqual(yield* readAll(right), ["abc", "d", "efg"])
    }))

  it.effect("rechunk never holds bytes back waiting for more", () =>
    Effect.gen(function*() {
      const { left, leftToRight, right } = yield* TestTransport.makePair()
      yield* leftToRight.rechunk([100])
      yield* left.send([utf8("short")])
      assert.deepStrictEqual(yield* readN(right, 1), ["short"])
    }))

  // One test running fast-check itself: `it.effect.prop` builds a fresh test environment per run (~35 ms each here),
  // and takes `effect/Arbitrary` values and Schemas only.
  it.effect("rechunk with any sizes preserves the byte sequence", () =>
    Effect.gen(function*() {
      const context = yield* Effect.context<never>()
      const property = (chunks: ReadonlyArray<Uint8Array>, sizes: ReadonlyArray<number>) =>
        Effect.gen(function*() {
          const { left, leftToRight, right } = yield* TestTransport.makePair({ capacity: 4 })
          yield* leftToRight.rechunk(sizes)
          const reading = yield* Effect.forkChild(Stream.runCollect(right.incoming))
          for (const chunk of chunks) yield* left.send([chunk])
          yield* left.end
          const delivered = yield* Fiber.join(reading)
          const flatten = (parts: ReadonlyArray<Uint8Array>) => parts.flatMap((part) => Array.from(part))
          assert.deepStrictEqual(flatten(delivered), flatten(chunks))
          for (const chunk of delivered) {
            assert.isTrue(chunk.length > 0 && chunk.length <= Math.max(...sizes))
          }
        }).pipe(Effect.scoped, Effect.runPromiseWith(context))
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(
            fc.array(fc.uint8Array({ minLength: 0, maxLength: 40 }), { maxLength: 12 }),
            fc.array(fc.integer({ min: 1, max: 16 }), { minLength: 1, maxLength: 5 }),
            property
          )
        )
      )
    }))

  it.effect("injectGarbage puts raw bytes on the link in order, without recording them as sent", () =>
    Effect.gen(function*() {
      const { left, leftToRight, right } = yield* TestTransport.makePair()
      yield* left.send([utf8("first")])
      yield* leftToRight.injectGarbage("garbage")
      yield* leftToRight.injectGarbage(new Uint8Array([0xff, 0x00]))
      yield* left.send([utf8("second")])
      yield* left.end
      const delivered = yield* Stream.runCollect(right.incoming)
      assert.deepStrictEqual(delivered.slice(0, 2).map(text), ["first", "garbage"])
      assert.deepStrictEqual(Array.from(delivered[2]), [0xff, 0x00])
      assert.deepStrictEqual(text(delivered[3]), "second")
      assert.deepStrictEqual((yield* leftToRight.sent).map(text), ["first", "second"])
    }))

  it.effect("delay holds chunks on the Clock until TestClock.adjust releases them, in order", () =>
    Effect.gen(function*() {
      const { left, leftToRight, right } = yield* TestTransport.makePair()
      yield* leftToRight.delay("100 millis")
      const { received } = yield* collect(right)
      yield* left.send([utf8("a")])
      yield* TestClock.adjust("50 millis")
      yield* left.send([utf8("b")])
      yield* leftToRight.delay(0) // lowering the delay does not let "c" overtake "b"
      yield* left.send([utf8("c")])
      yield* TestClock.adjust("49 millis")
      yield* settle
      assert.strictEqual(yield* Queue.size(received), 0)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Queue.take(received), "a")
      yield* TestClock.adjust("49 millis")
      yield* settle
      assert.strictEqual(yield* Queue.size(received), 0)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Queue.take(received), "b")
      assert.strictEqual(yield* Queue.take(received), "c")
    }))

  it.effect("backpressure: with capacity 2 and a paused reader, the third send waits for resume", () =>
    Effect.gen(function*() {
      const { left, leftToRight, right } = yield* TestTransport.makePair({ capacity: 2 })
      yield* leftToRight.pause
      const { received } = yield* collect(right)
      yield* settle
      yield* left.send([utf8("1")])
      yield* left.send([utf8("2")])
      const third = yield* Effect.forkChild(left.send([utf8("3")]))
      yield* settle
      assert.isTrue(Option.isNone(yield* poll(third)))
      assert.strictEqual(yield* leftToRight.buffered, 2)
      assert.strictEqual(yield* Queue.size(received), 0)
      yield* leftToRight.resume
      yield* Fiber.join(third)
      assert.deepStrictEqual([yield* Queue.take(received), yield* Queue.take(received), yield* Queue.take(received)], [
        "1",
        "2",
        "3"
      ])
      assert.strictEqual(yield* leftToRight.buffered, 0)
    }))

  it.effect("backpressure: a send blocked on a full link fails when the link closes", () =>
    Effect.gen(function*() {
      const { left, leftToRight, right } = yield* TestTransport.makePair({ capacity: 1 })
      yield* left.send([utf8("1")])
      const second = yield* Effect.forkChild(left.send([utf8("2")]))
      yield* settle
      assert.isTrue(Option.isNone(yield* poll(second)))
      yield* leftToRight.close
      const error = yield* Effect.flip(Fiber.join(second))
      assert.strictEqual(error.reason, "Closed")
      assert.deepStrictEqual(yield* readAll(right), ["1"])
    }))

  it.effect("a later run of incoming continues where the earlier one stopped", () =>
    Effect.gen(function*() {
      const { left, leftToRight, right } = yield* TestTransport.makePair()
      yield* leftToRight.rechunk([2])
      yield* left.send([utf8("abcdef")])
      assert.deepStrictEqual(yield* readN(right, 1), ["ab"])
      assert.deepStrictEqual(yield* readN(right, 1), ["cd"])
      yield* left.end
      assert.deepStrictEqual(yield* readAll(right), ["ef"])
    }))

  it.effect("closing the pair's scope ends both directions and fails pending and later sends", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { left, leftToRight, right, rightToLeft } = yield* TestTransport.makePair({ capacity: 1 }).pipe(
        Scope.provide(scope)
      )
      yield* leftToRight.pause
      yield* rightToLeft.delay("1 hour")
      const leftReader = yield* collect(left)
      const rightReader = yield* collect(right)
      yield* left.send([utf8("buffered")])
      const blocked = yield* Effect.forkChild(left.send([utf8("blocked")]))
      yield* right.send([utf8("delayed")])
      yield* settle
      yield* Scope.close(scope, Exit.void)
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(leftReader.fiber)))
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(rightReader.fiber)))
      assert.strictEqual(yield* Queue.size(leftReader.received), 0)
      assert.strictEqual(yield* Queue.size(rightReader.received), 0)
      assert.strictEqual((yield* Effect.flip(Fiber.join(blocked))).reason, "Closed")
      assert.strictEqual((yield* Effect.flip(left.send([utf8("later")]))).reason, "Closed")
      assert.strictEqual((yield* Effect.flip(right.send([utf8("later")]))).reason, "Closed")
      assert.deepStrictEqual(yield* readAll(right), [])
      yield* TestClock.adjust("1 hour") // the delayed chunk was discarded, not just held
      assert.strictEqual(yield* Queue.size(leftReader.received), 0)
    }))

  describe("serve", () => {
    const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
    const WhoAreYou = Method.request("whoAreYou", { params: Schema.Struct({}), result: Schema.String })
    /** The far end serves `add` and calls `whoAreYou` back. */
    const Server = Protocol.make({ serves: [Add], calls: [WhoAreYou] })

    it.effect("the far end serves the protocol in one line; the near end is an ordinary transport", () =>
      Effect.gen(function*() {
        const { peer: far, transport } = yield* TestTransport.serve(Server, { add: ([a, b]) => Effect.succeed(a + b) })
        const near = yield* Peer.make({
          protocol: Protocol.flip(Server),
          transport,
          handlers: { whoAreYou: () => Effect.succeed("the near end") }
        })
        assert.strictEqual(yield* near.call(Add, [20, 22]), 42)
        assert.strictEqual(yield* far.call(WhoAreYou, {}), "the near end", "the far end calls back through its peer")
      }).pipe(Effect.scoped))

    it.effect("its handlers run on the test's Clock, and the pair's links still inject faults", () =>
      Effect.gen(function*() {
        const { pair, transport } = yield* TestTransport.serve(Server, {
          add: ([a, b]) => Effect.as(Effect.sleep("10 seconds"), a + b)
        })
        const near = yield* Peer.make({
          protocol: Protocol.flip(Server),
          transport,
          handlers: { whoAreYou: () => Effect.succeed("near") },
          requestTimeout: "1 minute"
        })
        const call = yield* Effect.forkChild(near.call(Add, [1, 2]))
        yield* yieldTimes(20)
        yield* TestClock.adjust("10 seconds")
        assert.strictEqual(yield* Fiber.join(call), 3)
        yield* pair.rightToLeft.close // the far end goes away
        const reason = yield* near.closed
        assert.strictEqual(reason._tag, "PeerClosed")
      }).pipe(Effect.scoped))

    it.effect("layerServe is the Transport layer of the code under test, for the life of the layer", () =>
      Effect.gen(function*() {
        const program = Effect.gen(function*() {
          const transport = yield* Transport.Transport
          const near = yield* Peer.make({
            protocol: Protocol.flip(Server),
            transport,
            handlers: { whoAreYou: () => Effect.succeed("near") }
          })
          return yield* near.call(Add, [2, 3])
        }).pipe(Effect.scoped)
        const sum = yield* program.pipe(
          Effect.provide(TestTransport.layerServe(Server, { add: ([a, b]) => Effect.succeed(a + b) }))
        )
        assert.strictEqual(sum, 5)
      }))

    it.effect("options reach the far end's peer: its framing must be the near end's", () =>
      Effect.gen(function*() {
        const { transport } = yield* TestTransport.serve(Server, { add: ([a, b]) => Effect.succeed(a * b) }, {
          framing: Framing.ndjson,
          capacity: 4
        })
        const near = yield* Peer.make({
          protocol: Protocol.flip(Server),
          transport,
          framing: Framing.ndjson,
          handlers: { whoAreYou: () => Effect.succeed("near") }
        })
        assert.strictEqual(yield* near.call(Add, [6, 7]), 42)
      }).pipe(Effect.scoped))
  })
})
