/**
 * The lifecycle machine: one synchronous step that checks the table, sets the state and publishes the event, the
 * streams of events and states built on it, and the log line and span event of each transition.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as Lifecycle from "../Lifecycle.js"
import type { ShutdownError } from "../PeerError.js"
import { inboundGate, outboundGate } from "./lifecycleGate.js"
import { IllegalTransition, isLegal, isTerminal, State } from "./lifecycleState.js"

type Event = Lifecycle.Event

interface Published {
  readonly index: number
  readonly event: Event
}

const annotations = (event: Event): Record<string, string> => {
  const out: Record<string, string> = { from: event.from._tag, to: event.to._tag }
  if (event.to._tag === "Closing") out.reason = event.to.reason
  if (event.to._tag === "Failed") out.error = event.to.error._tag
  return out
}

const record = (event: Event): Effect.Effect<void> => {
  const fields = annotations(event)
  // Debug: a transition is routine (a host with many children logs four per child); what went wrong is logged at
  // its own level where it is known (a drain that cut work off warns, a failed handshake fails `make`).
  return Effect.logDebug(`lifecycle ${fields.from} → ${fields.to}`).pipe(
    Effect.annotateLogs(fields),
    Effect.andThen(
      Effect.currentSpan.pipe(
        Effect.flatMap((span) =>
          Effect.sync(() => span.event("lifeline.lifecycle.transition", BigInt(event.at) * 1_000_000n, fields))
        ),
        Effect.ignore
      )
    )
  )
}

/** @internal */
export const make: Effect.Effect<Lifecycle.Lifecycle, never, Scope.Scope> = Effect.gen(function*() {
  const clock = yield* Clock.Clock
  const pubsub = yield* Effect.acquireRelease(PubSub.unbounded<Published>(), PubSub.shutdown)
  let current: Lifecycle.State = State.Starting()
  const history: Array<Event> = []

  // The only place the state changes. Synchronous, so nothing can interleave between the check, the change and the
  // publish: that is what makes transitions atomic and the published order equal to the order of changes.
  const unsafeTransition = (
    to: Lifecycle.State,
    expected: Lifecycle.Tag | undefined
  ): Result.Result<Event, IllegalTransition> => {
    const from = current
    if ((expected !== undefined && from._tag !== expected) || !isLegal(from._tag, to._tag)) {
      return Result.fail(new IllegalTransition({ from, to, expected }))
    }
    const event: Event = { from, to, at: clock.currentTimeMillisUnsafe() }
    current = to
    history.push(event)
    PubSub.publishUnsafe(pubsub, { index: history.length - 1, event })
    return Result.succeed(event)
  }

  const transition = (to: Lifecycle.State, options?: { readonly from?: Lifecycle.Tag | undefined }) =>
    Effect.suspend(() => Effect.fromResult(unsafeTransition(to, options?.from))).pipe(Effect.tap(record))

  const beginStop = (reason: Lifecycle.CloseReason): Effect.Effect<Lifecycle.StopResult> =>
    Effect.suspend(() => {
      const state = current
      if (state._tag !== "Starting" && state._tag !== "Initializing" && state._tag !== "Ready") {
        return Effect.succeed("AlreadyClosing" as const)
      }
      return Result.match(unsafeTransition(State.Closing({ reason }), state._tag), {
        onFailure: () => Effect.succeed("AlreadyClosing" as const),
        onSuccess: (event) => Effect.as(record(event), "Stopped" as const)
      })
    })

  // Subscribes first, then reads the history in one synchronous step; events that reach the subscription and are
  // also in that snapshot are dropped by index, so none is lost or seen twice.
  const subscribe = <A>(
    f: (past: ReadonlyArray<Event>, state: Lifecycle.State, live: Stream.Stream<Event>) => Stream.Stream<A>
  ): Stream.Stream<A> =>
    Stream.unwrap(Effect.map(PubSub.subscribe(pubsub), (subscription) => {
      const past = history.slice()
      const live = Stream.fromSubscription(subscription).pipe(
        Stream.filter(({ index }) => index >= past.length),
        Stream.map(({ event }) => event)
      )
      return f(past, current, live)
    }))

  // The reason of the `Closing` the lifecycle went through, if it did: what a call refused in `Closed` is told.
  const closedBy = (): Lifecycle.CloseReason | undefined => {
    for (const event of history) if (event.to._tag === "Closing") return event.to.reason
    return undefined
  }
  // The refusal of the state it was made for: states are values that a transition replaces, never changes.
  let refusedIn: Lifecycle.State | undefined
  let refused: ShutdownError | undefined

  const events: Stream.Stream<Event> = subscribe((past, _, live) =>
    Stream.concat(Stream.fromIterable(past), live).pipe(Stream.takeUntil((event) => isTerminal(event.to)))
  )

  const changes: Stream.Stream<Lifecycle.State> = subscribe((_, state, live) =>
    Stream.concat(Stream.succeed(state), Stream.map(live, (event) => event.to)).pipe(Stream.takeUntil(isTerminal))
  )

  const lifecycle: Lifecycle.Lifecycle = {
    state: Effect.sync(() => current),
    unsafeState: () => current,
    transition,
    beginStop,
    events,
    changes,
    awaitState: (predicate) =>
      changes.pipe(
        Stream.takeUntil(predicate),
        Stream.runLast,
        Effect.map(Option.getOrElse(() => current))
      ),
    inboundGate: (method, isHandshake) => inboundGate(current, method, isHandshake),
    outboundGate: () => {
      if (refusedIn !== current) {
        refusedIn = current
        refused = outboundGate(current, closedBy())
      }
      return refused
    }
  }
  return lifecycle
})
