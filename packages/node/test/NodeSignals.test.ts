import { assert, describe, it } from "@effect/vitest"
import { PeerError } from "@lifeline/kernel"
import { NodeSignals } from "@lifeline/node"
import { Cause, Deferred, Effect, Exit, Fiber } from "effect"

const interrupted = Exit.interrupt()

describe("NodeSignals", () => {
  it("the exit code says how the program ended", () => {
    assert.strictEqual(NodeSignals.exitCodeOf(Exit.void, []), 0)
    assert.strictEqual(NodeSignals.exitCodeOf(Exit.fail("boom"), []), 1)
    assert.strictEqual(NodeSignals.exitCodeOf(Exit.die("bug"), ["SIGTERM"]), 1)
    assert.strictEqual(NodeSignals.exitCodeOf(interrupted, []), 1)
    assert.strictEqual(NodeSignals.exitCodeOf(interrupted, ["SIGINT"]), 130)
    assert.strictEqual(NodeSignals.exitCodeOf(interrupted, ["SIGTERM"]), 143)
    assert.strictEqual(NodeSignals.exitCodeOf(Exit.void, ["SIGTERM"]), 143)
    assert.strictEqual(NodeSignals.exitCodeOf(interrupted, ["SIGTERM", "SIGINT"]), 2)
    assert.strictEqual(NodeSignals.exitCodeOf(interrupted, ["SIGHUP"]), 129)
    assert.deepStrictEqual(NodeSignals.ExitCode, {
      Success: 0,
      Failure: 1,
      Forced: 2,
      Abandoned: 3,
      Hangup: 129,
      Interrupt: 130,
      Terminate: 143
    })
  })

  it("a main fiber that fails only because a signal's stop cut it off exits with the signal's code", () => {
    const cut = new PeerError.ShutdownError({ reason: "Interrupted", phase: "Closing" })
    const drained = new PeerError.ShutdownError({ reason: "DrainTimeout", phase: "Closing" })
    const forced = new PeerError.ShutdownError({ reason: "Forced", phase: "Closing" })
    assert.strictEqual(NodeSignals.exitCodeOf(Exit.fail(cut), ["SIGTERM"]), 143)
    assert.strictEqual(NodeSignals.exitCodeOf(Exit.fail(drained), ["SIGTERM"]), 143)
    assert.strictEqual(NodeSignals.exitCodeOf(Exit.fail(cut), ["SIGINT"]), 130)
    assert.strictEqual(NodeSignals.exitCodeOf(Exit.fail(cut), ["SIGHUP"]), 129)
    assert.strictEqual(NodeSignals.exitCodeOf(Exit.fail(forced), ["SIGTERM", "SIGTERM"]), 2)
    // A ShutdownError and an interruption together (a forked call cut off, the main fiber interrupted).
    const both = Exit.failCause(Cause.combine(Cause.fail(cut), Cause.interrupt()))
    assert.strictEqual(NodeSignals.exitCodeOf(both, ["SIGTERM"]), 143)
    // No signal asked for the stop: a failure.
    assert.strictEqual(NodeSignals.exitCodeOf(Exit.fail(cut), []), 1)
    // A real failure during a signal stop stays a failure, alone or beside a ShutdownError.
    assert.strictEqual(NodeSignals.exitCodeOf(Exit.fail(new Error("boom")), ["SIGTERM"]), 1)
    assert.strictEqual(NodeSignals.exitCodeOf(Exit.die(cut), ["SIGTERM"]), 1)
    const mixed = Exit.failCause(Cause.combine(Cause.fail(cut), Cause.fail(new Error("boom"))))
    assert.strictEqual(NodeSignals.exitCodeOf(mixed, ["SIGTERM"]), 1)
    assert.isTrue(NodeSignals.isCutOffByStop(Cause.fail(cut)))
    assert.isFalse(NodeSignals.isCutOffByStop(Cause.empty))
    assert.isFalse(NodeSignals.isCutOffByStop(Cause.fail(new PeerError.PeerClosed({ reason: "TransportClosed" }))))
  })

  it.effect("the first signal requests the stop, the second forces it", () =>
    Effect.gen(function*() {
      const controller = NodeSignals.unsafeMakeController()
      const signals = controller.service
      assert.strictEqual(controller.unsafeReceive("SIGTERM"), 1)
      assert.strictEqual(yield* signals.stopRequested, "SIGTERM")
      assert.deepStrictEqual(yield* signals.received, ["SIGTERM"])
      const forced = yield* Effect.forkChild(signals.forced)
      assert.strictEqual(controller.unsafeReceive("SIGINT"), 2)
      assert.strictEqual(yield* Fiber.await(forced).pipe(Effect.flatten), "SIGINT")
    }))

  it.effect("forceOnSecondSignal runs the fail-fast stop at the second signal, from a daemon fiber", () =>
    Effect.gen(function*() {
      const controller = NodeSignals.unsafeMakeController()
      const stopped = yield* Deferred.make<void>()
      const closed = yield* Deferred.make<void>()
      yield* NodeSignals.forceOnSecondSignal(Deferred.succeed(stopped, void 0), Deferred.await(closed)).pipe(
        Effect.provideService(NodeSignals.NodeSignals, controller.service)
      )
      controller.unsafeReceive("SIGTERM")
      yield* Effect.repeat(Effect.yieldNow, { times: 10 })
      assert.isFalse(yield* Deferred.isDone(stopped))
      controller.unsafeReceive("SIGTERM")
      yield* Deferred.await(stopped)
    }))

  it.effect("forceOnSecondSignal stops watching when the connection has closed", () =>
    Effect.gen(function*() {
      const controller = NodeSignals.unsafeMakeController()
      let stops = 0
      const closed = yield* Deferred.make<void>()
      yield* NodeSignals.forceOnSecondSignal(Effect.sync(() => stops++), Deferred.await(closed)).pipe(
        Effect.provideService(NodeSignals.NodeSignals, controller.service)
      )
      yield* Deferred.succeed(closed, void 0)
      yield* Effect.repeat(Effect.yieldNow, { times: 10 })
      controller.unsafeReceive("SIGTERM")
      controller.unsafeReceive("SIGTERM")
      yield* Effect.repeat(Effect.yieldNow, { times: 10 })
      assert.strictEqual(stops, 0)
    }))

  it.effect("without the service (not run by runMain) forceOnSecondSignal does nothing", () =>
    Effect.gen(function*() {
      yield* NodeSignals.forceOnSecondSignal(Effect.die("never"), Effect.never)
    }))
})
