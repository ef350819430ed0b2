/**
 * The extension host's event log: a ring of the latest `historyLimit` events that subscribers read with cursors of
 * their own, and the status, whose change is an event too.
 *
 * @internal
 */
import * as Arr from "effect/Array"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Pull from "effect/Pull"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type * as ExtensionHost from "../ExtensionHost.js"
import * as Model from "./extensionHostModel.js"

/** @internal */
export interface EventLog {
  readonly emit: (make: (at: number) => ExtensionHost.Event) => Effect.Effect<void>
  readonly setStatus: (next: ExtensionHost.Status) => Effect.Effect<void>
  readonly status: SubscriptionRef.SubscriptionRef<ExtensionHost.Status>
  readonly events: Stream.Stream<ExtensionHost.Event>
  readonly history: Effect.Effect<ReadonlyArray<ExtensionHost.Event>>
  readonly droppedEvents: Effect.Effect<number>
}

/** The log of one extension; subscribers' streams end when the Scope closes. @internal */
export const make = (historyLimit: number, label: string): Effect.Effect<EventLog, never, Scope.Scope> =>
  Effect.gen(function*() {
    // A ring of the latest `historyLimit` events: event number `n` (from 0) is at `n % historyLimit` once the ring is
    // full. Subscribers read it with a cursor of their own, so one that reads slowly costs no memory: it skips what
    // the ring no longer holds, and is told how much.
    const ring: Array<ExtensionHost.Event> = []
    let recorded = 0
    // Live subscribers read up to `published`, which `setStatus` moves only once the status has changed (see there).
    // Effect 4 runs a woken fiber at once, on the stack of whoever woke it: a subscriber, or a status waiter that
    // emits events of its own, may run inside `publish`, so the state is complete before anyone is woken.
    let published = 0
    let closed = false
    let announcedFull = false
    let wakeUp = Deferred.makeUnsafe<void>()
    const dropped = () => recorded - ring.length
    /** Events number `from` (at least `dropped()`) up to `to`, oldest first. */
    const slice = (from: number, to: number): Array<ExtensionHost.Event> => {
      const out: Array<ExtensionHost.Event> = []
      for (let n = from; n < to; n++) out.push(ring[n % historyLimit])
      return out
    }
    const record = (event: ExtensionHost.Event) => {
      if (ring.length < historyLimit) ring.push(event)
      else ring[recorded % historyLimit] = event
      recorded++
    }
    const publish = () => {
      if (published === recorded) return
      published = recorded
      const woken = wakeUp
      wakeUp = Deferred.makeUnsafe<void>()
      Deferred.doneUnsafe(woken, Exit.void)
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        Deferred.doneUnsafe(wakeUp, Exit.void)
      })
    )
    const logEvent = (event: ExtensionHost.Event) =>
      Effect.logDebug(`extension event ${event._tag}`).pipe(
        Effect.andThen(Effect.suspend(() => {
          // Said once, when the first event leaves the history.
          if (announcedFull || recorded <= historyLimit) return Effect.void
          announcedFull = true
          return Effect.logInfo(`the event history is full: older events are dropped (historyLimit ${historyLimit})`)
        })),
        Effect.annotateLogs({ extension: label })
      )
    const emit = (make: (at: number) => ExtensionHost.Event): Effect.Effect<void> =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => {
        const event = make(at)
        record(event)
        publish()
        return logEvent(event)
      })
    const status = yield* SubscriptionRef.make<ExtensionHost.Status>("Starting")
    // The event is in the history before the status changes, and the status has changed before the event is
    // published: whoever wakes up on one finds the other already there (both happened at once in Effect 3).
    const setStatus = (next: ExtensionHost.Status) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => {
        const event = Model.Event.StatusChanged({ at, status: next })
        record(event)
        return SubscriptionRef.set(status, next).pipe(
          Effect.andThen(Effect.sync(publish)),
          Effect.andThen(logEvent(event))
        )
      })

    const events: Stream.Stream<ExtensionHost.Event> = Stream.fromPull(Effect.sync(() => {
      // What the history holds now, recorded or published, is replayed; then what is published after.
      let cursor = dropped()
      let replayTo = recorded
      const pull: Pull.Pull<Arr.NonEmptyReadonlyArray<ExtensionHost.Event>> = Effect.suspend(() => {
        const to = Math.max(published, replayTo)
        if (cursor < to) {
          const from = Math.max(cursor, dropped())
          const missed = from - cursor
          const batch = slice(from, to)
          cursor = to
          replayTo = 0
          const next = Arr.isArrayNonEmpty(batch) ? Effect.succeed(batch) : pull
          return missed === 0 ? next : Effect.andThen(
            Effect.logWarning(
              `an events subscriber fell behind: ${missed} event(s) left the history (historyLimit ${historyLimit}) ` +
                "before it read them"
            ).pipe(Effect.annotateLogs({ extension: label })),
            next
          )
        }
        if (closed) return Cause.done()
        return Effect.andThen(Deferred.await(wakeUp), pull)
      })
      return pull
    }))
    return {
      emit,
      setStatus,
      status,
      events,
      history: Effect.sync(() => slice(dropped(), recorded)),
      droppedEvents: Effect.sync(dropped)
    }
  })
