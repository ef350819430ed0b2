import { Effect, Option } from "effect"
import type { Exit, Fiber } from "effect"

/** A fiber's exit if it has ended, without waiting: `fiber.pollUnsafe()` as an Effect. */
export const poll = <A, E>(fiber: Fiber.Fiber<A, E>): Effect.Effect<Option.Option<Exit.Exit<A, E>>> =>
  Effect.sync(() => Option.fromUndefinedOr(fiber.pollUnsafe()))
