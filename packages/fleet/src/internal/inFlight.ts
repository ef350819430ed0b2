import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Latch from "effect/Latch"
import * as Option from "effect/Option"

// The operations of one session still running on this runner. Effect's cluster answers a request it interrupts at
// once and may close the entity's scope without waiting for its handler (a forced shard release, when the runner's
// shard locks fail: Postgres down), but an operation's handler goes on: it finishes within its drain and records its
// end (packages/fleet/src/internal/operation.ts, `runEntry`). The session's claim must outlive it, or the session's
// next runner could claim the session, find the operation unfinished and run it again. A count and a latch: Effect has
// no "wait until this set of fibers is empty" beside `FiberSet.awaitEmpty`, which would fork each handler into a set
// and change which fiber the cluster interrupts.

export interface InFlight {
  /** Runs `effect` counted as an operation of the session until it ends, however it ends. */
  readonly track: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * Waits until no operation of the session runs here, for at most `bound`; `true` when none does, `false` when it
   * gave up.
   */
  readonly awaitIdle: (bound: Duration.Input) => Effect.Effect<boolean>
  /** How many run now. */
  readonly count: () => number
}

export const make = (): InFlight => {
  let running = 0
  const idle = Latch.makeUnsafe(true)
  return {
    track: (effect) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          running += 1
          idle.closeUnsafe()
        }),
        () => effect,
        () =>
          Effect.sync(() => {
            running -= 1
            if (running === 0) idle.openUnsafe()
          })
      ),
    awaitIdle: (bound) => Effect.map(Effect.timeoutOption(idle.await, bound), Option.isSome),
    count: () => running
  }
}
