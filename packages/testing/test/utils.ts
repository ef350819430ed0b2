import { Effect, Option } from "effect"
import type { Exit, Fiber } from "effect"

/** A fiber's exit if it has ended, without waiting: `fiber.pollUnsafe()` as an Effect. */
export const poll = <A, E>(fiber: Fiber.Fiber<A, E>): Effect.Effect<Option.Option<Exit.Exit<A, E>>> =>
  Effect.sync(() => Option.fromUndefinedOr(fiber.pollUnsafe()))

/** Lets the other fibers run: `Effect.yieldNow` once, then `n` times more. */
export const yieldTimes = (n: number): Effect.Effect<void> =>
  Effect.gen(function*() {
    for (let i = 0; i <= n; i++) yield* Effect.yieldNow
  })
