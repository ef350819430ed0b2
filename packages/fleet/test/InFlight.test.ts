/**
 * The operations of a session running on a runner (`internal/inFlight.ts`): what the session's claim waits for when
 * the session stops. TestClock throughout.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import { TestClock } from "effect/testing"
import * as InFlight from "../src/internal/inFlight.js"
import { drained } from "../src/internal/operation.js"

describe("a session's operations in flight", () => {
  it.effect("counts each tracked operation until it ends, however it ends", () =>
    Effect.gen(function*() {
      const inFlight = InFlight.make()
      const ok = yield* Effect.forkChild(inFlight.track(Effect.sleep("1 second")))
      const failing = yield* Effect.forkChild(
        inFlight.track(Effect.andThen(Effect.sleep("2 seconds"), Effect.fail("no")))
      )
      const interrupted = yield* Effect.forkChild(inFlight.track(Effect.never))
      yield* Effect.yieldNow
      assert.strictEqual(inFlight.count(), 3)
      yield* TestClock.adjust("1 second")
      assert.strictEqual(inFlight.count(), 2)
      yield* TestClock.adjust("1 second")
      assert.strictEqual(inFlight.count(), 1)
      yield* Fiber.interrupt(interrupted)
      assert.strictEqual(inFlight.count(), 0)
      yield* Fiber.await(ok)
      yield* Fiber.await(failing)
      assert.isTrue(yield* inFlight.interruptAndAwait("1 millis"), "none runs: at once")
    }))

  it.effect("interruptAndAwait interrupts them (each drains) and waits until the last one ended", () =>
    Effect.gen(function*() {
      const inFlight = InFlight.make()
      const ends: Array<string> = []
      const operation = (name: string, ms: number) =>
        inFlight.track(
          drained(Effect.andThen(Effect.sleep(`${ms} millis`), Effect.sync(() => ends.push(name))), {
            drainTimeout: "10 seconds",
            label: name
          })
        )
      yield* Effect.forkChild(operation("short", 2_000))
      yield* Effect.forkChild(operation("long", 5_000))
      yield* Effect.yieldNow
      const waiting = yield* Effect.forkChild(inFlight.interruptAndAwait("1 minute"))
      yield* TestClock.adjust("4999 millis")
      assert.deepStrictEqual(ends, ["short"])
      assert.isUndefined(waiting.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.isTrue(yield* Fiber.join(waiting))
      assert.deepStrictEqual(ends, ["short", "long"])
    }))

  it.effect("gives up at its bound when an operation does not end", () =>
    Effect.gen(function*() {
      const inFlight = InFlight.make()
      yield* Effect.forkChild(inFlight.track(Effect.uninterruptible(Effect.sleep("1 hour"))))
      yield* Effect.yieldNow
      const waiting = yield* Effect.forkChild(Effect.timeoutOption(inFlight.interruptAndAwait("50 seconds"), "1 day"))
      yield* TestClock.adjust("50 seconds")
      assert.deepStrictEqual(yield* Fiber.join(waiting), Option.some(false))
      assert.strictEqual(inFlight.count(), 1)
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(inFlight.count(), 0)
    }))
})
