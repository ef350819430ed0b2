/**
 * How a peer lets go of every pending call at once (`internal/peer/detach.ts`), at the edges mutation testing found
 * untested (`pnpm mutate packages/kernel/src/internal/peer/detach.ts`): a peer closed with a call pending wakes
 * `awaitIdle` as soon as the call is off its table, `failPending` on an empty table cuts off nothing, and a peer that
 * `Peer.make` did not make (a test double) has its calls failed at once by a detach, with nothing left to wake.
 */
import { assert, describe, it } from "@effect/vitest"
import { Method, Peer, PeerError, Protocol } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Exit, Fiber, Schema, Scope } from "effect"
import { detachPeer } from "../src/internal/peer/detach.js"
import { eventually, makeRaw, poll } from "./utils.js"

const Work = Method.request("work", { params: Schema.Struct({ n: Schema.Number }), result: Schema.Number })
const protocol = Protocol.make({ calls: [Work] })

/** A peer in a Scope of its own, with one call pending on a raw other end that never answers. */
const withPendingCall = Effect.gen(function*() {
  const pair = yield* TestTransport.makePair()
  const raw = yield* makeRaw(pair.right)
  const scope = yield* Scope.make()
  const peer = yield* Peer.make({ protocol, transport: pair.left, handlers: {}, requestTimeout: "1 hour" }).pipe(
    Scope.provide(scope)
  )
  const call = yield* Effect.forkChild(Effect.flip(peer.call(Work, { n: 1 })))
  const request = yield* raw.next
  return { call, peer, request, scope }
})

describe("Peer: detaching the pending table", () => {
  it.effect("a peer closed by its Scope with a call pending wakes awaitIdle, and the caller gets its error", () =>
    Effect.gen(function*() {
      const { call, peer, scope } = yield* withPendingCall
      const idle = yield* Effect.forkChild(peer.awaitIdle)
      yield* Effect.yieldNow
      assert.isTrue((yield* poll(idle))._tag === "None")
      yield* Scope.close(scope, Exit.void)
      // Nothing else is in flight: only the detach itself can tell the waiter that nothing is pending any more.
      yield* eventually(Effect.map(poll(idle), (o) => o._tag === "Some"), "awaitIdle woke")
      const error = yield* Fiber.join(call)
      assert.instanceOf(error, PeerError.ShutdownError)
      assert.strictEqual((error as PeerError.ShutdownError).phase, "Scope")
    }))

  it.effect("failPending with nothing pending cuts off nothing", () =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      yield* makeRaw(pair.right)
      const peer = yield* Peer.make({ protocol, transport: pair.left, handlers: {} })
      const cut = yield* peer.failPending(new PeerError.ShutdownError({ reason: "Stop", phase: "Draining" }))
      assert.deepStrictEqual(cut, [])
      assert.strictEqual((yield* peer.stats).failedByDisconnect, 0)
    }))

  it.effect("a peer Peer.make did not make: its calls fail at once, are reported, and nothing is left to wake", () =>
    Effect.gen(function*() {
      const { call, peer, request } = yield* withPendingCall
      // A test double that delegates to a real peer: only its `failPending` reaches the pending table.
      const double: Peer.Peer<never, typeof Work> = { ...peer }
      const error = new PeerError.ShutdownError({ reason: "Stop", phase: "Closing" })
      const detached = yield* detachPeer(double, error)
      assert.deepStrictEqual(detached.cutOff, [{ direction: "outbound", id: request.id, method: "work" }])
      // Failed by `failPending`, in the detach's own stack: the caller is woken before `wake` runs.
      assert.strictEqual(yield* Fiber.join(call), error)
      yield* detached.wake
      yield* detached.wakeNow
      assert.strictEqual((yield* peer.stats).failedByDisconnect, 1)
    }))
})
