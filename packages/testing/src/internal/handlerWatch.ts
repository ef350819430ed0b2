/**
 * Counts the handlers a test's far end has started and how many still run: the waits of `TestTransport.FarEnd`,
 * which says why a test needs them.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"

interface Waiter {
  readonly ready: () => boolean
  readonly deferred: Deferred.Deferred<void>
}

/** @internal */
export interface HandlerWatch {
  /** Wraps every handler of a record so that its start and its end are counted. */
  readonly wrap: <H extends Record<string, unknown>>(handlers: H) => H
  readonly started: (method: string, count: number) => Effect.Effect<void>
  readonly idle: Effect.Effect<void>
}

/** @internal */
export const make = (): HandlerWatch => {
  const starts = new Map<string, number>()
  let running = 0
  let waiters: Array<Waiter> = []

  const wake = () => {
    if (waiters.length === 0) return
    const still: Array<Waiter> = []
    for (const waiter of waiters) {
      if (waiter.ready()) Deferred.doneUnsafe(waiter.deferred, Exit.void)
      else still.push(waiter)
    }
    waiters = still
  }

  // A woken test runs after the handler that woke it reaches its first wait (a sleep, a call back): the yield lets
  // that handler finish its synchronous start, so a `TestClock.adjust` that follows sees its sleep registered.
  const until = (ready: () => boolean): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (ready()) return Effect.yieldNow
      const deferred = Deferred.makeUnsafe<void>()
      waiters.push({ ready, deferred })
      return Effect.andThen(Deferred.await(deferred), Effect.yieldNow)
    })

  const track = (method: string, handler: (...args: Array<unknown>) => Effect.Effect<unknown, unknown, unknown>) =>
  (
    ...args: Array<unknown>
  ) =>
    Effect.suspend(() => {
      starts.set(method, (starts.get(method) ?? 0) + 1)
      running++
      wake()
      return handler(...args)
    }).pipe(Effect.ensuring(Effect.sync(() => {
      running--
      wake()
    })))

  return {
    wrap: <H extends Record<string, unknown>>(handlers: H): H => {
      const wrapped: Record<string, unknown> = {}
      for (const [method, handler] of Object.entries(handlers)) {
        wrapped[method] = typeof handler === "function" ? track(method, handler as never) : handler
      }
      return wrapped as H
    },
    started: (method, count) => until(() => (starts.get(method) ?? 0) >= count),
    idle: until(() => running === 0)
  }
}
