/**
 * Where a session's drain comes from (`internal/operation.ts`, `resolveDrainTimeout`): the `drainTimeout` option,
 * else the operator's `LIFELINE_DRAIN_TIMEOUT`, else the fleet's default from the kernel's `Bounds`. TestClock
 * throughout: no Postgres.
 */
import { assert, describe, it } from "@effect/vitest"
import { Bounds, ShutdownPolicy } from "@lifeline/kernel"
import { ConfigProvider, Duration, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { drained, resolveDrainTimeout } from "../src/internal/operation.js"

const withEnv = (env: Record<string, string>) =>
  Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env }))

/** How long an operation that never ends keeps running once interrupted, under the resolved drain. */
const drainOf = (resolved: Duration.Input) =>
  Effect.gen(function*() {
    let ended = false
    const running = yield* Effect.forkChild(
      drained(Effect.onInterrupt(Effect.never, () => Effect.sync(() => (ended = true))), {
        drainTimeout: resolved,
        label: "operation"
      }),
      { startImmediately: true }
    )
    yield* Effect.yieldNow
    const interrupting = yield* Effect.forkChild(Fiber.interrupt(running), { startImmediately: true })
    const bound = Duration.toMillis(Duration.fromInputUnsafe(resolved))
    yield* TestClock.adjust(bound - 1)
    assert.isFalse(ended, "still draining 1 ms before the bound")
    yield* TestClock.adjust(1)
    yield* Fiber.await(interrupting)
    assert.isTrue(ended, "interrupted at the bound")
    return bound
  })

describe("a session's drain", () => {
  it.effect("reads LIFELINE_DRAIN_TIMEOUT when the option is not given", () =>
    Effect.gen(function*() {
      const resolved = yield* resolveDrainTimeout(undefined).pipe(
        withEnv({ [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "3s" })
      )
      assert.strictEqual(yield* drainOf(resolved), 3000)
    }))

  it.effect("the option wins over the environment", () =>
    Effect.gen(function*() {
      const resolved = yield* resolveDrainTimeout("2 seconds").pipe(
        withEnv({ [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "3s" })
      )
      assert.strictEqual(yield* drainOf(resolved), 2000)
    }))

  it.effect("is the fleet's default from Bounds (10 s) when neither says", () =>
    Effect.gen(function*() {
      const resolved = yield* resolveDrainTimeout(undefined).pipe(withEnv({}))
      assert.strictEqual(yield* drainOf(resolved), Duration.toMillis(Bounds.fleetDrainTimeout))
      assert.strictEqual(Duration.toMillis(Bounds.fleetDrainTimeout), 10_000)
    }))

  it.effect("an invalid variable keeps the default (logged), so the session's entity still builds", () =>
    Effect.gen(function*() {
      const resolved = yield* resolveDrainTimeout(undefined).pipe(
        withEnv({ [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "soon" })
      )
      assert.strictEqual(Duration.toMillis(Duration.fromInputUnsafe(resolved)), 10_000)
    }))

  it.effect("the claim waits for the drain it was given, the record retries and the slack", () =>
    Effect.sync(() => {
      assert.strictEqual(Duration.toMillis(Bounds.claimWait(Duration.seconds(3))), 3000 + 30_000 + 30_000)
    }))
})
