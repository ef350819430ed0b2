import { afterEach, assert, beforeEach, describe, it, vi } from "@effect/vitest"
import type * as Process from "@lifeline/kernel/Process"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/testing/TestClock"
import * as Server from "../src/internal/server.js"

/** A server whose exit and end of output the test decides. */
const fake = Effect.gen(function*() {
  const exit = yield* Deferred.make<Process.ExitStatus>()
  const output = yield* Deferred.make<void>()
  const server: Server.Server = {
    pid: 0,
    write: () => true,
    endInput: () => {},
    exit: Deferred.await(exit),
    outputDone: Deferred.await(output),
    stop: Effect.void
  }
  return { server, exit, output }
})

describe("the bounds of a server's end", () => {
  // `exitedWithin` is Promise code on the platform's timers (the transport's `close()`): Vitest's fake timers are its
  // TestClock.
  describe("exitedWithin", () => {
    beforeEach(() => {
      vi.useFakeTimers()
    })
    afterEach(() => {
      vi.useRealTimers()
    })
    const settled = (promise: Promise<void>) => {
      let done = false
      void promise.then(() => {
        done = true
      })
      return () => done
    }

    it("resolves once the timeout has passed without an exit, not a moment before", async () => {
      const done = settled(Server.exitedWithin(new Promise(() => {}), "2 seconds"))
      await vi.advanceTimersByTimeAsync(1999)
      assert.isFalse(done())
      await vi.advanceTimersByTimeAsync(1)
      assert.isTrue(done())
    })

    it("resolves as soon as the server exits, and leaves no timer behind", async () => {
      let exit!: () => void
      const done = settled(Server.exitedWithin(new Promise<void>((resolve) => exit = resolve), "2 seconds"))
      await vi.advanceTimersByTimeAsync(500)
      assert.isFalse(done())
      exit()
      await vi.advanceTimersByTimeAsync(0)
      assert.isTrue(done())
      assert.strictEqual(vi.getTimerCount(), 0)
    })

    it("an infinite timeout waits for the exit only (a timer beyond its range would fire at once)", async () => {
      let exit!: () => void
      const done = settled(Server.exitedWithin(new Promise<void>((resolve) => exit = resolve), Duration.infinity))
      await vi.advanceTimersByTimeAsync(3_000_000_000)
      assert.isFalse(done())
      exit()
      await vi.advanceTimersByTimeAsync(0)
      assert.isTrue(done())
    })
  })

  it.effect("exitedAndDrained: after the exit, at most the grace for the output to end", () =>
    Effect.gen(function*() {
      const { exit, server } = yield* fake
      const waiting = yield* Effect.forkChild(Server.exitedAndDrained(server, "100 millis"))
      yield* TestClock.adjust("1 second")
      assert.isUndefined(waiting.pollUnsafe(), "no exit yet: it waits for it without a bound")
      yield* Deferred.succeed(exit, { exitCode: 0, signal: null })
      yield* TestClock.adjust("99 millis")
      assert.isUndefined(waiting.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      yield* Fiber.join(waiting)
    }))

  it.effect("exitedAndDrained: the end of the output ends the wait at once", () =>
    Effect.gen(function*() {
      const { exit, output, server } = yield* fake
      const waiting = yield* Effect.forkChild(Server.exitedAndDrained(server, "100 millis"))
      yield* Deferred.succeed(exit, { exitCode: 0, signal: null })
      yield* Deferred.succeed(output, undefined)
      yield* Fiber.join(waiting)
    }))
})
