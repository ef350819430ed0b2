import { assert, describe, it } from "@effect/vitest"
import { NodeSignals } from "@lifeline/node"
import { Deferred, Effect, Exit, Fiber } from "effect"

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
