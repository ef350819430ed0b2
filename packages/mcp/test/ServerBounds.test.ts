import { assert, describe, it } from "@effect/vitest"
import type * as Process from "@lifeline/kernel/Process"
import * as Deferred from "effect/Deferred"
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
  it.effect("exitWithin: false once the timeout has passed without an exit, not a moment before", () =>
    Effect.gen(function*() {
      const { server } = yield* fake
      const waiting = yield* Effect.forkChild(Server.exitWithin(server, "2 seconds"))
      yield* TestClock.adjust("1999 millis")
      assert.isUndefined(waiting.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.isFalse(yield* Fiber.join(waiting))
    }))

  it.effect("exitWithin: true as soon as the server exits", () =>
    Effect.gen(function*() {
      const { exit, server } = yield* fake
      const waiting = yield* Effect.forkChild(Server.exitWithin(server, "2 seconds"))
      yield* TestClock.adjust("500 millis")
      yield* Deferred.succeed(exit, { exitCode: 0, signal: null })
      assert.isTrue(yield* Fiber.join(waiting))
    }))

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
