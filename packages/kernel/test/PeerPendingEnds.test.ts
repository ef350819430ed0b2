/**
 * How a pending call ends, at the edges mutation testing found untested (`pnpm mutate
 * packages/kernel/src/internal/peer/outbound.ts`): a deadline that outlives its call must not fire later, the timer
 * must outlive an empty heap, a deadline past 2^31 ms is kept exactly, an outcome that comes before the caller waits
 * is not lost, a lost connection fails Effect and Promise callers alike and wakes `awaitIdle`, and the first reason a
 * connection was lost is the one later calls are refused with. Public entry points only.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Transport } from "@lifeline/kernel"
import { Cancellation, Method, Peer, PeerError, PromiseClient, Protocol } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Cause, Clock, Effect, Exit, Fiber, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as V8 from "node:v8"
import * as Vm from "node:vm"
import { eventually, makeRaw, poll, wire, yieldTimes } from "./utils.js"

const Sleep = Method.request("sleep", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })
const Ping = Method.notification("ping", { params: Schema.Struct({}) })

const connect = (cancellation: Cancellation.Cancellation = Cancellation.none) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    const raw = yield* makeRaw(pair.right)
    const peer = yield* Peer.make({
      protocol: Protocol.make({ calls: [Sleep, Ping], cancellation }),
      transport: pair.left,
      handlers: {},
      requestTimeout: "2 seconds"
    })
    // The timer fiber is parked on its wake-up before the first call.
    yield* Effect.yieldNow
    return { pair, peer, raw }
  })

/** A full garbage collection (`--expose-gc` for this one function, without a flag on the test process). */
const collectGarbage = (): void => {
  V8.setFlagsFromString("--expose-gc")
  ;(Vm.runInNewContext("gc") as () => void)()
}

/** Lets a macrotask turn pass: a WeakRef's target is kept alive until the end of the job that made it. */
const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

const issueAll = (
  client: PromiseClient.PromiseClient<any>,
  count: number,
  outcomes: { settled: number }
): Array<WeakRef<Promise<unknown>>> => {
  const refs: Array<WeakRef<Promise<unknown>>> = []
  for (let i = 0; i < count; i++) {
    const promise = client.callUntyped("sleep", { ms: i })
    promise.catch(() => outcomes.settled++)
    refs.push(new WeakRef(promise))
  }
  return refs
}

/**
 * The test's Clock, counting how often the time is read and how often a fiber goes to sleep on it (on a connection
 * without a link delay, only the peer's timer fiber sleeps).
 */
const countingClock = Effect.gen(function*() {
  const base = yield* Clock.Clock
  const reads = { all: 0, sleeps: 0 }
  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: () => (reads.all++, base.currentTimeMillisUnsafe()),
    currentTimeMillis: Effect.suspend(() => (reads.all++, base.currentTimeMillis)),
    currentTimeNanosUnsafe: () => base.currentTimeNanosUnsafe(),
    currentTimeNanos: base.currentTimeNanos,
    monotonicTimeNanosUnsafe: () => base.monotonicTimeNanosUnsafe(),
    monotonicTimeNanos: base.monotonicTimeNanos,
    sleep: (duration) => (reads.sleeps++, base.sleep(duration))
  }
  return { clock, reads }
})

/** A Promise's outcome, settled or not yet, as seen from an Effect. */
const track = <A>(promise: Promise<A>) => {
  const box: { exit: Exit.Exit<A, unknown> | undefined } = { exit: undefined }
  promise.then((value) => (box.exit = Exit.succeed(value)), (error) => (box.exit = Exit.fail(error)))
  return box
}

describe("Peer pending calls: how they end", () => {
  it.effect("a call its caller gave up leaves no deadline behind: nothing times out later", () =>
    Effect.gen(function*() {
      const { peer, raw } = yield* connect()
      const call = yield* Effect.forkChild(peer.call(Sleep, { ms: 1 }))
      yield* raw.next
      yield* Fiber.interrupt(call)
      yield* TestClock.adjust("5 seconds")
      const stats = yield* peer.stats
      assert.strictEqual(stats.cancelledByUs, 1)
      assert.strictEqual(stats.timedOut, 0)
      assert.strictEqual(stats.pendingOutbound, 0)
    }))

  it.effect("the timer outlives a heap emptied by an answer: a later call still times out on time", () =>
    Effect.gen(function*() {
      const { peer, raw } = yield* connect()
      const answered = yield* Effect.forkChild(peer.call(Sleep, { ms: 1 }))
      const request = yield* raw.next
      yield* raw.send({ jsonrpc: "2.0", id: request.id, result: 7 })
      assert.strictEqual(yield* Fiber.join(answered), 7)
      // The timer wakes at the answered call's old deadline and finds nothing to expire.
      yield* TestClock.adjust("2 seconds")
      const late = yield* Effect.forkChild(Effect.flip(peer.call(Sleep, { ms: 1 }, { timeout: "1 second" })))
      yield* raw.next
      yield* TestClock.adjust("999 millis")
      assert.isTrue((yield* poll(late))._tag === "None")
      yield* TestClock.adjust("1 millis")
      assert.strictEqual((yield* Fiber.join(late))._tag, "RequestTimeout")
      assert.strictEqual((yield* peer.stats).timedOut, 1)
    }))

  it.effect("a deadline past 2^31 ms (about 25 days) is kept exactly, not wrapped to a negative one", () =>
    Effect.gen(function*() {
      const { peer, raw } = yield* connect()
      const call = yield* Effect.forkChild(Effect.flip(peer.call(Sleep, { ms: 1 }, { timeout: "30 days" })))
      yield* raw.next
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* peer.stats).pendingOutbound, 1)
      yield* TestClock.adjust(30 * 86_400_000 - 1_001)
      assert.strictEqual((yield* peer.stats).pendingOutbound, 1)
      yield* TestClock.adjust("1 millis")
      const error = yield* Fiber.join(call)
      assert.strictEqual(error._tag, "RequestTimeout")
    }))

  it.effect("a call whose timeout has already passed when it is issued fails at once, Effect and Promise alike", () =>
    Effect.gen(function*() {
      const { peer } = yield* connect()
      // The timer runs in the caller's stack and expires the call before its caller waits.
      const error = yield* Effect.flip(peer.call(Sleep, { ms: 1 }, { timeout: 0 }))
      assert.strictEqual(error._tag, "RequestTimeout")
      const client = PromiseClient.make(peer)
      const rejected = yield* Effect.flip(Effect.tryPromise({
        try: () => client.callUntyped("sleep", { ms: 1 }, { timeout: 0 }),
        catch: (error) => error
      }))
      assert.instanceOf(rejected, PeerError.RequestTimeout)
      assert.strictEqual((yield* peer.stats).timedOut, 2)
    }))

  it.effect("a lost connection fails Effect and Promise callers alike, and its calls never time out afterwards", () =>
    Effect.gen(function*() {
      const { pair, peer, raw } = yield* connect()
      const client = PromiseClient.make(peer)
      const byEffect = yield* Effect.forkChild(Effect.flip(peer.call(Sleep, { ms: 1 })))
      const byPromise = track(client.call(Sleep, { ms: 2 }))
      const byEffectToo = yield* Effect.forkChild(Effect.flip(peer.callUntyped("sleep", { ms: 3 })))
      yield* raw.next
      yield* raw.next
      yield* raw.next
      yield* pair.rightToLeft.close
      for (const fiber of [byEffect, byEffectToo]) {
        const error = yield* Fiber.join(fiber)
        assert.instanceOf(error, PeerError.PeerClosed)
        assert.strictEqual((error as PeerError.PeerClosed).reason, "TransportClosed")
      }
      yield* eventually(Effect.sync(() => byPromise.exit !== undefined), "the Promise settled")
      const exit = byPromise.exit!
      assert.isTrue(Exit.isFailure(exit))
      assert.instanceOf(Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined, PeerError.PeerClosed)
      // Their deadlines went with them.
      yield* TestClock.adjust("5 seconds")
      const stats = yield* peer.stats
      assert.strictEqual(stats.failedByDisconnect, 3)
      assert.strictEqual(stats.timedOut, 0)
    }))

  it.effect("failPending wakes awaitIdle, and what it cut off never times out", () =>
    Effect.gen(function*() {
      const { peer, raw } = yield* connect()
      const call = yield* Effect.forkChild(Effect.flip(peer.call(Sleep, { ms: 1 })))
      yield* raw.next
      const idle = yield* Effect.forkChild(peer.awaitIdle)
      yield* Effect.yieldNow
      assert.isTrue((yield* poll(idle))._tag === "None")
      const error = new PeerError.ShutdownError({ reason: "Stop", phase: "Draining" })
      const cut = yield* peer.failPending(error)
      assert.strictEqual(cut.length, 1)
      assert.strictEqual(yield* Fiber.join(call), error)
      yield* eventually(Effect.map(poll(idle), (o) => o._tag === "Some"), "awaitIdle woke")
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual((yield* peer.stats).timedOut, 0)
    }))

  it.effect("the first reason the connection was lost is kept: writing failed, then the reading side closed", () =>
    Effect.gen(function*() {
      const { pair, peer } = yield* connect()
      yield* pair.leftToRight.close
      yield* peer.notify(Ping, {})
      yield* eventually(peer.isClosed, "the failed write lost the connection")
      yield* pair.rightToLeft.close
      yield* Effect.yieldNow
      const first = yield* peer.closed
      assert.strictEqual((first as PeerError.PeerClosed).reason, "TransportFailed")
      const refused = yield* Effect.flip(peer.call(Sleep, { ms: 1 }))
      assert.instanceOf(refused, PeerError.PeerClosed)
      assert.strictEqual((refused as PeerError.PeerClosed).reason, "TransportFailed")
      // The reader's end was still seen (and counted nothing more).
      assert.strictEqual((yield* peer.stats).failedByDisconnect, 0)
    }))

  it.effect("a caller woken by a lost connection that gives up another pending call sends no cancellation for it", () =>
    Effect.gen(function*() {
      const { pair, peer, raw } = yield* connect(Cancellation.lsp)
      // `first` is failed first (the table keeps the order calls were made in) and then interrupts `other`'s caller,
      // whose call is still live but already out of the table.
      const holder: { other: Fiber.Fiber<unknown> | undefined } = { other: undefined }
      const first = yield* Effect.forkChild(
        Effect.flip(peer.call(Sleep, { ms: 1 })).pipe(
          Effect.tap(() => Fiber.interrupt(holder.other!))
        )
      )
      yield* raw.next
      const other = yield* Effect.forkChild(Effect.exit(peer.call(Sleep, { ms: 2 })))
      holder.other = other
      yield* raw.next
      const error = new PeerError.ShutdownError({ reason: "Stop", phase: "Draining" })
      yield* peer.failPending(error)
      assert.strictEqual(yield* Fiber.join(first), error)
      yield* Fiber.await(other)
      const methods = (yield* wire(pair.leftToRight)).map((message) => message.method)
      assert.deepStrictEqual(methods, ["sleep", "sleep"])
      assert.strictEqual((yield* peer.stats).pendingOutbound, 0)
    }))

  it.effect("Promise callers failed by a lost connection are not kept alive by the ids remembered for late answers", () =>
    Effect.gen(function*() {
      const { peer } = yield* connect()
      const client = PromiseClient.make(peer)
      // Enough calls that the failed table itself is kept as one generation of tombstones (its entries with it).
      const count = 300
      const outcomes = { settled: 0 }
      // Made in a plain function: a suspended generator's frame would keep the last Promise alive.
      const refs = issueAll(client, count, outcomes)
      yield* eventually(Effect.map(peer.stats, (s) => s.pendingOutbound === count), "every call pending")
      const error = new PeerError.ShutdownError({ reason: "Stop", phase: "Draining" })
      yield* peer.failPending(error)
      yield* eventually(Effect.sync(() => outcomes.settled === count), "every Promise rejected")
      yield* nextTurn
      collectGarbage()
      yield* nextTurn
      collectGarbage()
      const alive = refs.filter((ref) => ref.deref() !== undefined).length
      assert.strictEqual(alive, 0)
    }))

  it.effect("the timer sleeps until the earliest deadline, on a Clock that did not start at 0", () =>
    Effect.gen(function*() {
      yield* TestClock.adjust("1 hour")
      const { clock, reads } = yield* countingClock
      const { peer, raw } = yield* Effect.provideService(connect(), Clock.Clock, clock)
      const call = yield* Effect.forkChild(Effect.flip(peer.call(Sleep, { ms: 1 })))
      yield* raw.next
      yield* yieldTimes(200)
      // One reading for the deadline, one or two for the timer before it sleeps: never a loop that polls the Clock.
      assert.isAtLeast(reads.all, 2)
      assert.isAtMost(reads.all, 10)
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* Fiber.join(call))._tag, "RequestTimeout")
    }))

  it.effect("during a drain (new calls refused), a call that times out still tells the peer to stop working on it", () =>
    Effect.gen(function*() {
      const { pair, peer } = yield* connect(Cancellation.lsp)
      const call = yield* Effect.forkChild(Effect.exit(peer.call(Sleep, { ms: 1 })))
      yield* yieldTimes(20)
      yield* peer.refuseNew(new PeerError.ShutdownError({ reason: "Stop", phase: "Closing" }))
      yield* TestClock.adjust("2 seconds")
      const exit = yield* Fiber.join(call)
      assert.isTrue(Exit.isFailure(exit))
      yield* yieldTimes(20)
      const sent = yield* wire(pair.leftToRight)
      assert.deepStrictEqual(sent.map((message) => message.method), ["sleep", "$/cancelRequest"])
      assert.strictEqual(sent[1].params.id, sent[0].id)
    }))

  it.effect("a call abandoned while its frame still waits for room sends no cancellation: that id never left", () =>
    Effect.gen(function*() {
      // One chunk in flight at a time, delivered a second after it was sent, and one frame of queue.
      const pair = yield* TestTransport.makePair({ capacity: 1 })
      yield* makeRaw(pair.right)
      yield* pair.leftToRight.delay("1 second")
      const peer = yield* Peer.make({
        protocol: Protocol.make({ calls: [Sleep], cancellation: Cancellation.lsp }),
        transport: pair.left,
        handlers: {},
        requestTimeout: "1 minute",
        outboundCapacity: 1
      })
      const calls = []
      for (let ms = 0; ms < 4; ms++) {
        calls.push(yield* Effect.forkChild(Effect.exit(peer.call(Sleep, { ms }))))
        yield* yieldTimes(20)
      }
      // The first frame is on the link, the writer waits for room to send the second, the third is queued and the
      // fourth waits in `overflow`. A second later the writer sends the third and the queue is empty, while the
      // fourth still waits for the writer's next turn.
      assert.deepStrictEqual((yield* wire(pair.leftToRight)).map((message) => message.params.ms), [0])
      yield* TestClock.adjust("1 second")
      yield* yieldTimes(20)
      assert.deepStrictEqual((yield* wire(pair.leftToRight)).map((message) => message.params.ms), [0, 1])
      yield* Fiber.interrupt(calls[3])
      yield* TestClock.adjust("10 seconds")
      yield* yieldTimes(20)
      const sent = yield* wire(pair.leftToRight)
      assert.deepStrictEqual(sent.map((message) => [message.method, message.params.ms]), [
        ["sleep", 0],
        ["sleep", 1],
        ["sleep", 2]
      ])
      const stats = yield* peer.stats
      assert.strictEqual(stats.cancelledByUs, 1)
      assert.strictEqual(stats.pendingOutbound, 3)
    }))

  it.effect("a call failed while its request is handed to the transport fails at once, and leaves no deadline", () =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      const lost = new PeerError.PeerClosed({ reason: "TransportFailed", detail: "gone while sending" })
      const holder: { peer: Peer.Peer<never, any> | undefined } = { peer: undefined }
      // A transport that takes a frame at once when its writer is idle, and, as it does, loses the connection.
      const transport: Transport.Transport.Service = {
        ...pair.left,
        unsafeTrySend: () => {
          Effect.runSync(holder.peer!.failPending(lost))
          return true
        }
      }
      const peer = yield* Peer.make({
        protocol: Protocol.make({ calls: [Sleep] }),
        transport,
        handlers: {},
        requestTimeout: "2 seconds"
      })
      holder.peer = peer
      yield* yieldTimes(5)
      assert.strictEqual(yield* Effect.flip(peer.call(Sleep, { ms: 1 })), lost)
      yield* TestClock.adjust("5 seconds")
      const stats = yield* peer.stats
      assert.strictEqual(stats.failedByDisconnect, 1)
      assert.strictEqual(stats.timedOut, 0)
    }))

  it.effect("the timer is woken only by a call due before the deadline it sleeps until", () =>
    Effect.gen(function*() {
      const { clock, reads } = yield* countingClock
      const { peer } = yield* Effect.provideService(connect(), Clock.Clock, clock)
      yield* Effect.forkChild(Effect.exit(peer.call(Sleep, { ms: 0 })))
      yield* yieldTimes(20)
      assert.strictEqual(reads.sleeps, 1)
      // The same deadline, then later ones: the timer sleeps on.
      for (let i = 0; i < 10; i++) yield* Effect.forkChild(Effect.exit(peer.call(Sleep, { ms: 1 })))
      for (let i = 0; i < 10; i++) {
        yield* Effect.forkChild(Effect.exit(peer.call(Sleep, { ms: 2 }, { timeout: "3 seconds" })))
      }
      yield* yieldTimes(20)
      assert.strictEqual(reads.sleeps, 1)
      // An earlier one wakes it: it sleeps until that deadline instead.
      yield* Effect.forkChild(Effect.exit(peer.call(Sleep, { ms: 3 }, { timeout: "1 second" })))
      yield* yieldTimes(20)
      assert.strictEqual(reads.sleeps, 2)
      assert.strictEqual((yield* peer.stats).pendingOutbound, 22)
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* peer.stats).timedOut, 1)
    }))
})
