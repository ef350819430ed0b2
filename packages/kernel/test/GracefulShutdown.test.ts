import { assert, describe, it } from "@effect/vitest"
import { GracefulShutdown } from "@lifeline/kernel"
import { Deferred, Duration, Effect, Exit, Fiber, Option, Scope } from "effect"
import { TestClock } from "effect/testing"
import { poll, yieldTimes } from "./utils.js"

/** An entry whose graceful stop takes `ms` on the Clock and whose forced stop is immediate; it logs what it did. */
const makeEntry = (name: string, ms: number, log: Array<string>) =>
  Effect.gen(function*() {
    const stopped = yield* Deferred.make<void>()
    const entry: GracefulShutdown.Entry = {
      name,
      stop: Effect.andThen(
        Effect.sync(() => log.push(`${name} stop`)),
        Effect.raceFirst(Effect.sleep(Duration.millis(ms)), Deferred.await(stopped))
      ).pipe(Effect.andThen(Deferred.succeed(stopped, void 0))),
      stopNow: Effect.andThen(Effect.sync(() => log.push(`${name} stopNow`)), Deferred.succeed(stopped, void 0))
    }
    return entry
  })

describe("GracefulShutdown", () => {
  it.effect("stop asks every entry at once and completes when the slowest has stopped", () =>
    Effect.gen(function*() {
      const registry = yield* GracefulShutdown.make
      const log: Array<string> = []
      yield* registry.register(yield* makeEntry("a", 1000, log))
      yield* registry.register(yield* makeEntry("b", 3000, log))
      const stopping = yield* Effect.forkChild(registry.stop)
      yield* TestClock.adjust("2999 millis")
      assert.sameMembers(log, ["a stop", "b stop"])
      assert.isTrue(Option.isNone(yield* poll(stopping)))
      yield* TestClock.adjust("1 millis")
      yield* Fiber.join(stopping)
      assert.strictEqual(yield* registry.phase, "Stopping")
      yield* registry.stop // idempotent: nothing left to wait for
    }))

  it.effect("an entry that registers while the program stops is stopped at once, and waited for", () =>
    Effect.gen(function*() {
      const registry = yield* GracefulShutdown.make
      const log: Array<string> = []
      yield* registry.register(yield* makeEntry("a", 1000, log))
      const stopping = yield* Effect.forkChild(registry.stop)
      yield* Effect.yieldNow
      yield* registry.register(yield* makeEntry("late", 2000, log))
      yield* yieldTimes(10)
      assert.deepStrictEqual(log, ["a stop", "late stop"])
      yield* TestClock.adjust("1 second")
      assert.isTrue(Option.isNone(yield* poll(stopping)))
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(stopping)
    }))

  it.effect("force reaches an entry whose Scope closed while its graceful stop still runs", () =>
    Effect.gen(function*() {
      const registry = yield* GracefulShutdown.make
      const log: Array<string> = []
      const scope = yield* Scope.make()
      yield* registry.register(yield* makeEntry("a", 60_000, log)).pipe(Scope.provide(scope))
      const stopping = yield* Effect.forkChild(registry.stop)
      yield* yieldTimes(10)
      // What interrupting the main fiber does: the Scope the entry registered in closes, unregistering it.
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(yield* registry.size, 0)
      yield* registry.force
      assert.deepStrictEqual(log, ["a stop", "a stopNow"])
      yield* Fiber.join(stopping)
    }))

  it.effect("force stops every entry fail-fast, cutting a graceful stop short", () =>
    Effect.gen(function*() {
      const registry = yield* GracefulShutdown.make
      const log: Array<string> = []
      yield* registry.register(yield* makeEntry("a", 60_000, log))
      const stopping = yield* Effect.forkChild(registry.stop)
      yield* Effect.yieldNow
      yield* registry.force
      yield* Fiber.join(stopping)
      assert.deepStrictEqual(log, ["a stop", "a stopNow"])
      assert.strictEqual(yield* registry.phase, "Forced")
      const late: Array<string> = []
      yield* registry.register(yield* makeEntry("late", 60_000, late))
      yield* yieldTimes(10)
      assert.deepStrictEqual(late, ["late stopNow"])
    }))

  it.effect("an entry leaves with its Scope; a failing stop is logged, not fatal", () =>
    Effect.gen(function*() {
      const registry = yield* GracefulShutdown.make
      const scope = yield* Scope.make()
      yield* registry.register({ name: "gone", stop: Effect.die("never asked"), stopNow: Effect.void }).pipe(
        Scope.provide(scope)
      )
      assert.strictEqual(yield* registry.size, 1)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(yield* registry.size, 0)
      yield* registry.register({ name: "broken", stop: Effect.die("boom"), stopNow: Effect.void })
      yield* registry.stop
    }))

  it.effect("register without the service does nothing", () =>
    GracefulShutdown.register({ name: "x", stop: Effect.die("no"), stopNow: Effect.die("no") }).pipe(Effect.scoped))
})
