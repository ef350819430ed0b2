/**
 * A session's child process as a slot: started on first use, started again after it exits (at most `maxRestarts` times
 * in a row without an operation succeeding, with a doubling backoff), and reported `Unavailable` when it cannot be.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"

/** A started child: what talks to it, and whether it still runs. */
export interface Started<P> {
  readonly value: P
  readonly alive: Effect.Effect<boolean>
}

/** Why no child could be had: its spawn failed, or the restart budget is spent. */
interface Unavailable {
  readonly reason: "SpawnFailed" | "RestartBudgetSpent"
  readonly detail: string
}

/**
 * The child of a session: started on first use, started again on the next use after it exited, at most `maxRestarts`
 * times in a row without a success (`succeeded`), the n-th restart after `backoff × 2^(n-1)` on the Clock. Each child
 * lives in a Scope of its own, closed when it is replaced or when the slot's Scope closes, in the place the slot was
 * made among that Scope's finalizers.
 */
interface Slot<P> {
  readonly acquire: Effect.Effect<P, Unavailable>
  /** An operation succeeded on the current child: the restart budget is whole again. */
  readonly succeeded: Effect.Effect<void>
}

export const make = <P, E, R>(options: {
  readonly spawn: Effect.Effect<Started<P>, E, R | Scope.Scope>
  readonly maxRestarts: number
  readonly backoff: Duration.Input
  readonly describe: (error: E) => string
}): Effect.Effect<Slot<P>, never, R | Scope.Scope> =>
  Effect.gen(function*() {
    // One scope for every child of the slot, made now: a child started later (a restart) must not close before
    // what was set up after the slot and before that restart (a session's drain and claim), as a scope forked from
    // the slot's own at each start would (finalizers run last in, first out).
    const parent = yield* Scope.fork(yield* Effect.scope)
    const context = yield* Effect.context<R>()
    const lock = yield* Semaphore.make(1)
    const backoff = Duration.fromInputUnsafe(options.backoff)
    let current: (Started<P> & { readonly scope: Scope.Closeable }) | undefined
    let spawned = false
    let restarts = 0

    const start = Effect.gen(function*() {
      if (spawned) {
        if (restarts >= options.maxRestarts) {
          return yield* Effect.fail<Unavailable>({
            reason: "RestartBudgetSpent",
            detail: `started again ${restarts} times in a row without an operation succeeding (maxRestarts)`
          })
        }
        yield* Effect.sleep(Duration.times(backoff, 2 ** restarts))
        restarts++
      }
      spawned = true
      const scope = yield* Scope.fork(parent)
      const exit = yield* Effect.exit(Scope.provide(options.spawn, scope))
      if (Exit.isFailure(exit)) {
        yield* Scope.close(scope, Exit.void)
        const error = exit.cause.reasons.find((reason) => reason._tag === "Fail")
        return yield* Effect.fail<Unavailable>({
          reason: "SpawnFailed",
          detail: error === undefined ? "the spawn died" : options.describe(error.error)
        })
      }
      current = { ...exit.value, scope }
      return exit.value.value
    })

    const acquire = lock.withPermits(1)(Effect.gen(function*() {
      if (current !== undefined) {
        if (yield* current.alive) return current.value
        const dead = current
        current = undefined
        yield* Scope.close(dead.scope, Exit.void)
      }
      return yield* start
    })).pipe(Effect.provideContext(context))

    return { acquire, succeeded: Effect.sync(() => void (restarts = 0)) }
  })
