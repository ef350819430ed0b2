/**
 * The order of a connection's teardown with calls pending (docs/peer.md, "Teardown"): the pending table is taken off
 * the peer, the transport is ended, and only then are the callers woken, in batches with turns of the event loop
 * between them; `stop` returns once every caller has its `ShutdownError`.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Transport } from "@lifeline/kernel"
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
import { Effect, Exit, Fiber, Schema, Scope } from "effect"
import { TestClock } from "effect/testing"
import { WAKE_BATCH } from "../src/internal/peer/detach.js"
import { eventually, makeRaw, wire } from "./utils.js"

const Work = Method.request("work", { params: Schema.Struct({ n: Schema.Number }), result: Schema.Number })
const protocol = Protocol.make({ calls: [Work] })

/** More than two batches of callers, so that some are woken in a later batch. */
const effectCallers = 2 * WAKE_BATCH + 952
const promiseCallers = 50

type Event =
  | { readonly _tag: "end" }
  | {
    readonly _tag: "failed"
    readonly caller: number
    readonly error: unknown
    readonly again?: Exit.Exit<unknown, unknown>
  }

/**
 * A connection on a test transport whose `end` is logged, `effectCallers` fibers and `promiseCallers` Promise callers
 * waiting on it (the Promise callers after the fibers), and the raw other end. A caller that fails logs its error and,
 * for the fibers, what a second call made at once gets.
 */
const setup = (policy: ShutdownPolicy.Policy, onEnd: Effect.Effect<void> = Effect.void) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    const log: Array<Event> = []
    const transport: Transport.Transport.Service = {
      ...pair.left,
      end: Effect.andThen(Effect.sync(() => log.push({ _tag: "end" })), Effect.andThen(onEnd, pair.left.end))
    }
    const connection = yield* Connection.make({
      protocol,
      transport,
      handlers: {},
      policy,
      requestTimeout: "1 hour",
      outboundCapacity: 4096
    })
    const raw = yield* makeRaw(pair.right)
    const fibers: Array<Fiber.Fiber<void, unknown>> = []
    for (let caller = 0; caller < effectCallers; caller++) {
      fibers.push(
        yield* Effect.forkChild(
          Effect.flatMap(Effect.flip(connection.peer.call(Work, { n: caller })), (error) =>
            Effect.map(Effect.exit(connection.peer.call(Work, { n: -1 })), (again) => {
              log.push({ _tag: "failed", caller, error, again })
            }))
        )
      )
    }
    const client = PromiseClient.make(connection.peer)
    const promises = Array.from({ length: promiseCallers }, (_, i) =>
      client.call(Work, { n: effectCallers + i }).then(
        () =>
          assert.fail("a Promise call succeeded"),
        (error: unknown) => {
          log.push({ _tag: "failed", caller: effectCallers + i, error })
        }
      ))
    const total = effectCallers + promiseCallers
    yield* eventually(
      Effect.map(connection.peer.stats, (s) =>
        s.pendingOutbound === total),
      "every call pending"
    )
    return { connection, raw, log, fibers, promises, total }
  })

const failures = (log: ReadonlyArray<Event>) =>
  log.filter((e): e is Extract<Event, { _tag: "failed" }> => e._tag === "failed")

describe("Connection teardown with calls pending", () => {
  it.effect("ends the transport before the first caller sees its ShutdownError, and returns once all have it", () =>
    Effect.gen(function*() {
      const { connection, fibers, log, promises, total } = yield* setup(ShutdownPolicy.FailFast())
      assert.strictEqual(yield* connection.stop(), "Stopped")
      // Every Effect caller has run its failure by the time `stop` returns; the Promise callers' handlers run as
      // microtasks, once this fiber lets them.
      assert.strictEqual(failures(log).length, effectCallers)
      yield* Effect.promise(() => Promise.all(promises))
      assert.strictEqual(log[0]._tag, "end")
      const failed = failures(log)
      assert.strictEqual(failed.length, total)
      assert.strictEqual(new Set(failed.map((f) => f.caller)).size, total)
      for (const { error } of failed) {
        assert.instanceOf(error, PeerError.ShutdownError)
        assert.strictEqual((error as PeerError.ShutdownError).reason, "Stop")
        assert.strictEqual((error as PeerError.ShutdownError).phase, "Closing")
      }
      for (const fiber of fibers) assert.isTrue(Exit.isSuccess(yield* Fiber.await(fiber)))
      const report = yield* connection.awaitShutdown
      assert.strictEqual(report.cutOff.length, total)
      assert.strictEqual((yield* connection.peer.stats).failedByDisconnect, total)
    }))

  it.effect("wakes the callers in batches, letting other fibers run between them", () =>
    Effect.gen(function*() {
      const { connection, log } = yield* setup(ShutdownPolicy.FailFast())
      // What another fiber sees at each of its turns while the teardown runs.
      const seen: Array<number> = []
      const watcher = yield* Effect.forkChild(Effect.gen(function*() {
        while (true) {
          seen.push(failures(log).length)
          yield* Effect.yieldNow
        }
      }))
      yield* connection.stop()
      yield* Fiber.interrupt(watcher)
      const between = seen.filter((n) => n > 0 && n < effectCallers)
      assert.includeMembers(between, [WAKE_BATCH, 2 * WAKE_BATCH])
      assert.isTrue(between.every((n) => n % WAKE_BATCH === 0), `woken ${between.join(", ")}`)
    }))

  it.effect("a caller woken in a later batch that calls again is refused, and nothing is sent", () =>
    Effect.gen(function*() {
      const { connection, log } = yield* setup(ShutdownPolicy.FailFast())
      const sent = (yield* connection.peer.stats).requestsSent
      yield* connection.stop()
      const late = failures(log).filter((f) => f.caller >= 2 * WAKE_BATCH && f.caller < effectCallers)
      assert.strictEqual(late.length, effectCallers - 2 * WAKE_BATCH)
      for (const { again } of late) {
        const error = again === undefined ? undefined : Exit.findErrorOption(again)
        assert.isTrue(error?._tag === "Some" && error.value instanceof PeerError.ShutdownError)
      }
      assert.strictEqual((yield* connection.peer.stats).requestsSent, sent)
    }))

  it.effect("a drain that timed out fails every caller with DrainTimeout, after the end of input", () =>
    Effect.gen(function*() {
      const { connection, log, promises, total } = yield* setup(ShutdownPolicy.drain("2 seconds"))
      const stop = yield* Effect.forkChild(connection.stop())
      yield* TestClock.adjust("1999 millis")
      assert.strictEqual(log.length, 0)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Fiber.join(stop), "Stopped")
      yield* Effect.promise(() => Promise.all(promises))
      assert.strictEqual(log[0]._tag, "end")
      const failed = failures(log)
      assert.strictEqual(failed.length, total)
      for (const { error } of failed) {
        assert.instanceOf(error, PeerError.ShutdownError)
        assert.strictEqual((error as PeerError.ShutdownError).reason, "DrainTimeout")
      }
      const report = yield* connection.awaitShutdown
      assert.isFalse(report.drained)
      assert.strictEqual(report.cutOff.length, total)
    }))

  it.effect("a forced stop (stopNow) wakes every caller at once, before the end of input", () =>
    Effect.gen(function*() {
      const { connection, log, promises, total } = yield* setup(ShutdownPolicy.drain("1 hour"))
      const stop = yield* Effect.forkChild(connection.stop())
      yield* eventually(Effect.map(connection.lifecycle.state, (s) => s._tag === "Closing"), "closing")
      assert.strictEqual(yield* connection.stopNow(), "AlreadyClosing")
      yield* Fiber.join(stop)
      yield* Effect.promise(() => Promise.all(promises))
      // Every fiber failed before the end; the Promise callers' handlers run as microtasks, before or after it.
      const end = log.findIndex((e) => e._tag === "end")
      assert.strictEqual(failures(log.slice(0, end)).filter((f) => f.caller < effectCallers).length, effectCallers)
      assert.strictEqual(failures(log).length, total)
      for (const { error } of failures(log)) {
        assert.strictEqual((error as PeerError.ShutdownError).reason, "Forced")
      }
    }))

  it.effect("an answer that comes for a detached call is a late answer, and its caller still fails", () =>
    Effect.gen(function*() {
      // The answer is sent when the transport is ended: the calls are off the table, their callers not woken yet.
      let answer: Effect.Effect<void> = Effect.void
      const { connection, log, raw } = yield* setup(ShutdownPolicy.FailFast(), Effect.suspend(() => answer))
      answer = Effect.orDie(raw.send({ jsonrpc: "2.0", id: 1, result: 1 }))
      yield* connection.stop()
      yield* eventually(Effect.map(connection.peer.stats, (s) => s.lateResponses === 1), "late answer counted")
      const stats = yield* connection.peer.stats
      assert.strictEqual(stats.unknownResponses, 0)
      const first = failures(log).find((f) => f.caller === 0)
      assert.instanceOf(first?.error, PeerError.ShutdownError)
    }))

  it.effect("a caller that gives up after its call was detached, before it was woken, sends no second cancellation", () =>
    Effect.gen(function*() {
      // A handler interrupted by the teardown interrupts the caller: its call is off the table by then (cancelled on
      // the wire by the teardown) and its caller not woken yet, while the transport is still open.
      const Serve = Method.request("serve", { params: Schema.Struct({}), result: Schema.Number })
      const pair = yield* TestTransport.makePair()
      const raw = yield* makeRaw(pair.right)
      const caller: { fiber?: Fiber.Fiber<unknown, unknown> } = {}
      const connection = yield* Connection.make({
        protocol: Protocol.make({ serves: [Serve], calls: [Work], cancellation: Cancellation.lsp }),
        transport: pair.left,
        handlers: { serve: () => Effect.onInterrupt(Effect.never, () => Fiber.interrupt(caller.fiber!)) },
        policy: ShutdownPolicy.FailFast(),
        requestTimeout: "1 hour"
      })
      caller.fiber = yield* Effect.forkChild(connection.peer.call(Work, { n: 1 }))
      const ours = yield* raw.next
      yield* raw.send({ jsonrpc: "2.0", id: "theirs", method: "serve", params: {} })
      yield* eventually(Effect.map(connection.peer.stats, (s) => s.activeInbound === 1), "the handler runs")
      yield* connection.stop()
      assert.isTrue(Exit.hasInterrupts(yield* Fiber.await(caller.fiber)))
      const cancels = (yield* wire(pair.leftToRight)).filter((m) => m.method === "$/cancelRequest")
      assert.deepStrictEqual(cancels, [{ jsonrpc: "2.0", method: "$/cancelRequest", params: { id: ours.id } }])
      assert.strictEqual((yield* connection.peer.stats).cancelledByUs, 1)
    }))

  it.effect("a peer closed by its Scope also ends the transport first, and `closed` completes once all are woken", () =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      const log: Array<string> = []
      const scope = yield* Scope.make()
      const peer = yield* Peer.make({
        protocol,
        transport: { ...pair.left, end: Effect.andThen(Effect.sync(() => log.push("end")), pair.left.end) },
        handlers: {},
        requestTimeout: "1 hour"
      }).pipe(Scope.provide(scope))
      yield* makeRaw(pair.right)
      const calls = 2 * WAKE_BATCH + 1
      for (let n = 0; n < calls; n++) {
        yield* Effect.forkChild(Effect.flatMap(Effect.flip(peer.call(Work, { n })), (error) =>
          Effect.sync(() => {
            log.push(error._tag === "ShutdownError" && error.phase === "Scope" ? "failed" : `unexpected ${error._tag}`)
          })))
      }
      yield* eventually(Effect.map(peer.stats, (s) => s.pendingOutbound === calls), "every call pending")
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(log[0], "end")
      assert.deepStrictEqual(log.slice(1), Array.from({ length: calls }, () => "failed"))
      assert.strictEqual((yield* peer.closed)._tag, "ShutdownError")
    }))
})
