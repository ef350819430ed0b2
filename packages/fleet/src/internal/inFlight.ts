/**
 * The operations of one session still running on this runner. Effect's cluster answers a request it interrupts at
 * once and may close the entity's scope without waiting for its handler (a forced shard release, when the runner's
 * shard locks fail: Postgres down), but an operation's handler goes on: it finishes within its drain and records its
 * end (packages/fleet/src/internal/operation.ts, `runEntry`). The session's claim must outlive it, or the session's
 * next runner could claim the session, find the operation unfinished and run it again. And when the scope closes
 * without the cluster interrupting the handlers first (a handler died and the entity is rebuilt), they are
 * interrupted here, so that their drain starts then. A count, the fibers and a latch: Effect's `FiberSet` would fork
 * each handler into the set and change which fiber the cluster interrupts.
 *
 * @internal
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Latch from "effect/Latch"
import * as Option from "effect/Option"

/** @internal */
export interface InFlight {
  /** Runs `effect` counted as an operation of the session until it ends, however it ends. */
  readonly track: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * Interrupts every operation of the session running here (each then drains) and waits until none runs, for at most
   * `bound`; `true` when none runs, `false` when it gave up.
   */
  readonly interruptAndAwait: (bound: Duration.Input) => Effect.Effect<boolean>
  /** How many run now. */
  readonly count: () => number
}

/** @internal */
export const make = (): InFlight => {
  const fibers = new Map<Fiber.Fiber<unknown, unknown>, number>()
  let running = 0
  const idle = Latch.makeUnsafe(true)
  return {
    track: (effect) =>
      Effect.withFiber((fiber) =>
        Effect.acquireUseRelease(
          Effect.sync(() => {
            running += 1
            fibers.set(fiber, (fibers.get(fiber) ?? 0) + 1)
            idle.closeUnsafe()
          }),
          () => effect,
          () =>
            Effect.sync(() => {
              running -= 1
              const left = (fibers.get(fiber) ?? 1) - 1
              if (left === 0) fibers.delete(fiber)
              else fibers.set(fiber, left)
              if (running === 0) idle.openUnsafe()
            })
        )
      ),
    interruptAndAwait: (bound) =>
      Effect.withFiber((self) => {
        const others = [...fibers.keys()].filter((fiber) => fiber.id !== self.id)
        // Not waited for here: each ends when its drain does, which `idle` says.
        return Effect.andThen(
          others.length === 0 ? Effect.void : Effect.forkDetach(Fiber.interruptAll(others)),
          Effect.map(Effect.timeoutOption(idle.await, bound), Option.isSome)
        )
      }),
    count: () => running
  }
}
