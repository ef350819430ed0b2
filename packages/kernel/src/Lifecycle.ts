/**
 * The lifecycle of a peer as a state machine: `Starting → Initializing → Ready → Closing → Closed`, and `Failed` from
 * any state that has not ended. Only the transitions in one table are possible; each one is published as an event
 * stamped by the Clock and logged at Debug, so tests, UIs and telemetry all read the same story.
 *
 * @since 0.1.0
 */
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Predicate } from "effect/Predicate"
import * as PubSub from "effect/PubSub"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as PeerError from "./PeerError.js"
import { ShutdownError } from "./PeerError.js"
import type { TransportError } from "./Transport.js"

/**
 * The handshake did not finish within its timeout; the lifecycle is `Failed` with this error.
 *
 * @since 0.1.0
 * @category errors
 */
export class HandshakeTimeout extends Schema.TaggedError<HandshakeTimeout>("@lifeline/kernel/HandshakeTimeout")(
  "HandshakeTimeout",
  { timeoutMillis: Schema.Number }
) {
  override get message(): string {
    return `the handshake did not finish within ${this.timeoutMillis} ms`
  }
}

/**
 * Why a lifecycle ended in `Failed`. Every member is a tagged error, so a `Failed` state can be matched on `_tag`;
 * it covers what a handshake call can fail with and what ends a connection.
 *
 * @since 0.1.0
 * @category models
 */
export type Failure =
  | HandshakeTimeout
  | TransportError
  | RpcError.RpcError
  | PeerError.RequestTimeout
  | PeerError.Disconnect

/**
 * What started the shutdown: a local `stop`, interruption of the owning fiber (scope closed, SIGTERM/SIGINT), a
 * shutdown request from the other side, or the other side closing the connection.
 *
 * @since 0.1.0
 * @category models
 */
export type CloseReason = "Stop" | "Interrupted" | "RemoteShutdown" | "TransportClosed"

/**
 * A lifecycle state. `Closing` says why the peer is closing, `Failed` carries the error that ended it.
 *
 * @since 0.1.0
 * @category models
 */
export type State = Data.TaggedEnum<{
  Starting: {}
  Initializing: {}
  Ready: {}
  Closing: { readonly reason: CloseReason }
  Closed: {}
  Failed: { readonly error: Failure }
}>

/**
 * Constructors, `$is` and `$match` for {@link State}.
 *
 * @example
 * ```ts
 * import { Lifecycle } from "@lifeline/kernel"
 *
 * const label = Lifecycle.State.$match({
 *   Starting: () => "starting",
 *   Initializing: () => "handshake",
 *   Ready: () => "ready",
 *   Closing: ({ reason }) => `closing (${reason})`,
 *   Closed: () => "closed",
 *   Failed: ({ error }) => `failed: ${error.message}`
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const State = Data.taggedEnum<State>()

/**
 * The name of a state.
 *
 * @since 0.1.0
 * @category models
 */
export type Tag = State["_tag"]

/**
 * @since 0.1.0
 * @category constructors
 */
export const Starting: (args: void) => State = State.Starting

/**
 * @since 0.1.0
 * @category constructors
 */
export const Initializing: (args: void) => State = State.Initializing

/**
 * @since 0.1.0
 * @category constructors
 */
export const Ready: (args: void) => State = State.Ready

/**
 * @since 0.1.0
 * @category constructors
 */
export const Closing: (args: { readonly reason: CloseReason }) => State = State.Closing

/**
 * @since 0.1.0
 * @category constructors
 */
export const Closed: (args: void) => State = State.Closed

/**
 * `Failed` with `error`. The state keeps the error itself: it outlives the span it was raised in and may be journaled.
 * (Effect 4 reports an error's span in the `Cause`, so the error that reaches a handler is already the original.)
 *
 * @since 0.1.0
 * @category constructors
 */
export const Failed = (args: { readonly error: Failure }): State => State.Failed({ error: args.error })

/**
 * The states each state may move to. `Starting → Ready` is for peers without a handshake. `Closing` and `Failed` are
 * reachable from every state that has not ended; `Closed` and `Failed` are terminal. No state moves to itself, which
 * is what makes `beginStop` answer `AlreadyClosing` the second time.
 *
 * @since 0.1.0
 * @category models
 */
export type Next<From extends Tag> = {
  readonly Starting: "Initializing" | "Ready" | "Closing" | "Failed"
  readonly Initializing: "Ready" | "Closing" | "Failed"
  readonly Ready: "Closing" | "Failed"
  readonly Closing: "Closed" | "Failed"
  readonly Closed: never
  readonly Failed: never
}[From]

// Typed against `Next`, so a missing or extra entry does not compile: the type and the runtime check cannot drift.
const table: { readonly [From in Tag]: { readonly [To in Next<From>]: true } } = {
  Starting: { Initializing: true, Ready: true, Closing: true, Failed: true },
  Initializing: { Ready: true, Closing: true, Failed: true },
  Ready: { Closing: true, Failed: true },
  Closing: { Closed: true, Failed: true },
  Closed: {},
  Failed: {}
}

/**
 * Every state name, in lifecycle order.
 *
 * @since 0.1.0
 * @category models
 */
export const tags: ReadonlyArray<Tag> = ["Starting", "Initializing", "Ready", "Closing", "Closed", "Failed"]

/**
 * Whether the transition table allows `from → to`.
 *
 * @example
 * ```ts
 * import { Lifecycle } from "@lifeline/kernel"
 *
 * Lifecycle.isLegal("Initializing", "Ready") // true
 * Lifecycle.isLegal("Closed", "Ready") // false
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const isLegal = (from: Tag, to: Tag): boolean => Object.hasOwn(table[from], to)

/**
 * `Closed` or `Failed`: nothing follows.
 *
 * @since 0.1.0
 * @category models
 */
export const isTerminal = (state: State): boolean => state._tag === "Closed" || state._tag === "Failed"

/**
 * `Closing`, `Closed` or `Failed`: the peer takes no new work in either direction.
 *
 * @since 0.1.0
 * @category models
 */
export const isShuttingDown = (state: State): boolean =>
  state._tag === "Closing" || state._tag === "Closed" || state._tag === "Failed"

/**
 * One transition, stamped with `Clock` milliseconds.
 *
 * @since 0.1.0
 * @category models
 */
export interface Event {
  readonly from: State
  readonly to: State
  readonly at: number
}

/**
 * A transition the table does not allow (`from → to`), or a compare-and-set transition whose expected state was no
 * longer current. The state is left unchanged.
 *
 * This is a typed failure, not a defect, because it is an expected race rather than a bug: a handshake that completes
 * just after `stop` tries `Closing → Ready`, and the caller decides that this is fine.
 *
 * @since 0.1.0
 * @category errors
 */
export class IllegalTransition extends Data.TaggedError("IllegalTransition")<{
  readonly from: State
  readonly to: State
  readonly expected: Tag | undefined
}> {
  override get message(): string {
    return this.expected !== undefined && this.expected !== this.from._tag
      ? `expected ${this.expected} but was ${this.from._tag}, so ${this.from._tag} → ${this.to._tag} was not made`
      : `${this.from._tag} → ${this.to._tag} is not a legal lifecycle transition`
  }
}

/**
 * What `beginStop` tells its caller: `Stopped` for the one call that moved the lifecycle to `Closing`,
 * `AlreadyClosing` for every other call (docs/lifecycle.md: a later caller learns the stop is already under way).
 *
 * @since 0.1.0
 * @category models
 */
export type StopResult = "Stopped" | "AlreadyClosing"

/**
 * The error an inbound request gets in `state`, or `undefined` if it may run. `isHandshake` marks the handshake's
 * messages (e.g. `initialize` and `initialized`): they are the only ones admitted before `Ready`, and a handshake
 * request once `Ready` is a second handshake (-32600). Before `Ready` anything else gets -32002; from `Closing` on
 * everything gets -32003. Notifications are never answered, so the peer drops those the gate refuses.
 *
 * @example
 * ```ts
 * import { Lifecycle } from "@lifeline/kernel"
 *
 * Lifecycle.inboundGate(Lifecycle.Starting(), "tools/list", false)?.code // -32002
 * Lifecycle.inboundGate(Lifecycle.Ready(), "tools/list", false) // undefined
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const inboundGate = (state: State, method: string, isHandshake: boolean): RpcError.RpcError | undefined => {
  switch (state._tag) {
    case "Starting":
    case "Initializing":
      return isHandshake ? undefined : RpcError.RpcError.serverNotInitialized(method)
    case "Ready":
      return isHandshake
        ? RpcError.RpcError.invalidRequest(`${method}: the handshake has already completed`)
        : undefined
    case "Closing":
    case "Closed":
    case "Failed":
      return RpcError.RpcError.shuttingDown(method)
  }
}

/**
 * The error an outbound call fails with at once in `state`, or `undefined` if it may be sent. `phase` is the state's
 * name; `reason` says what started the shutdown: `Interrupted` or `Failed` when that is what started it, otherwise
 * `Stop` (with the `CloseReason` in `detail` when it was the other side: `RemoteShutdown`, `TransportClosed`). A
 * `Closed` state does not say why it closed: `closedBy` is the reason of the `Closing` before it (a lifecycle's own
 * `outboundGate` passes it), `Stop` when it is not given.
 *
 * @example
 * ```ts
 * import { Lifecycle } from "@lifeline/kernel"
 *
 * Lifecycle.outboundGate(Lifecycle.Closing({ reason: "Stop" }))?.phase // "Closing"
 * Lifecycle.outboundGate(Lifecycle.Closed(), "Interrupted")?.reason // "Interrupted"
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const outboundGate = (state: State, closedBy?: CloseReason): ShutdownError | undefined => {
  switch (state._tag) {
    case "Starting":
    case "Initializing":
    case "Ready":
      return undefined
    case "Closing":
      return refusal(state.reason, state._tag)
    case "Closed":
      return refusal(closedBy ?? "Stop", state._tag)
    case "Failed":
      return new ShutdownError({ reason: "Failed", phase: state._tag, detail: state.error.message })
  }
}

const refusal = (reason: CloseReason, phase: Tag): ShutdownError =>
  reason === "Interrupted" || reason === "Stop"
    ? new ShutdownError({ reason, phase })
    : new ShutdownError({ reason: "Stop", phase, detail: reason })

/**
 * A peer's lifecycle. Every change of state goes through one synchronous step that checks the table, sets the state
 * and publishes the event, so concurrent callers can never both win a transition and events arrive in the order the
 * state changed.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Lifecycle } from "@lifeline/kernel"
 *
 * const program = Effect.gen(function*() {
 *   const lifecycle = yield* Lifecycle.make
 *   yield* lifecycle.transition(Lifecycle.Ready())
 *   const first = yield* lifecycle.beginStop("Stop") // "Stopped"
 *   const second = yield* lifecycle.beginStop("Stop") // "AlreadyClosing"
 *   return [first, second]
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Lifecycle {
  /** The current state. */
  readonly state: Effect.Effect<State>
  /** The current state, read synchronously for the peer's per-message path. */
  readonly unsafeState: () => State
  /**
   * Moves to `to` if the table allows it from the current state, and, when `from` is given, only if the current state
   * is `from` (compare-and-set). Otherwise fails with `IllegalTransition` and changes nothing.
   */
  readonly transition: (
    to: State,
    options?: { readonly from?: Tag | undefined }
  ) => Effect.Effect<Event, IllegalTransition>
  /**
   * Moves `Starting`, `Initializing` or `Ready` to `Closing` and answers `Stopped`; in any other state, or when a
   * concurrent caller got there first, answers `AlreadyClosing`. Never waits: the check and the change are one step.
   */
  readonly beginStop: (reason: CloseReason) => Effect.Effect<StopResult>
  /**
   * Every transition since `make`, then each new one as it happens; ends after a terminal state, or when the scope
   * that made the lifecycle closes. The machine has no cycles, so the history is at most four events.
   */
  readonly events: Stream.Stream<Event>
  /** The current state, then each new state; ends like `events`. */
  readonly changes: Stream.Stream<State>
  /**
   * The first state, the current one included, that satisfies `predicate`. If the lifecycle ends (or its scope
   * closes) without one, the state it ended in, so nobody waits forever: check what you got.
   */
  readonly awaitState: (predicate: Predicate<State>) => Effect.Effect<State>
  /** {@link inboundGate} in the current state. */
  readonly inboundGate: (method: string, isHandshake: boolean) => RpcError.RpcError | undefined
  /**
   * {@link outboundGate} in the current state, with the reason of the `Closing` that came before a `Closed`. One error
   * per state: every call refused in the same state gets the same `ShutdownError` instance (as the calls a teardown
   * cuts off all get one), so a flood of refused calls costs no allocation each.
   */
  readonly outboundGate: () => ShutdownError | undefined
}

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

/**
 * A lifecycle in `Starting`. Timestamps come from the `Clock` of the fiber that runs `make` (the `TestClock` in
 * tests). Closing the scope ends every `events` and `changes` stream; it does not change the state, which is the
 * owner's job (the peer's finalizer calls `beginStop("Interrupted")`).
 *
 * @example
 * ```ts
 * import { Effect, Stream } from "effect"
 * import { Lifecycle } from "@lifeline/kernel"
 *
 * const program = Effect.gen(function*() {
 *   const lifecycle = yield* Lifecycle.make
 *   yield* lifecycle.transition(Lifecycle.Ready())
 *   yield* lifecycle.beginStop("Stop")
 *   yield* lifecycle.transition(Lifecycle.Closed())
 *   return yield* Stream.runCollect(lifecycle.events) // the whole story, ending at Closed
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Lifecycle, never, Scope.Scope> = Effect.gen(function*() {
  const clock = yield* Clock.Clock
  const pubsub = yield* Effect.acquireRelease(PubSub.unbounded<Published>(), PubSub.shutdown)
  let current: State = Starting()
  const history: Array<Event> = []

  // The only place the state changes. Synchronous, so nothing can interleave between the check, the change and the
  // publish: that is what makes transitions atomic and the published order equal to the order of changes.
  const unsafeTransition = (to: State, expected: Tag | undefined): Result.Result<Event, IllegalTransition> => {
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

  const transition = (to: State, options?: { readonly from?: Tag | undefined }) =>
    Effect.suspend(() => Effect.fromResult(unsafeTransition(to, options?.from))).pipe(Effect.tap(record))

  const beginStop = (reason: CloseReason): Effect.Effect<StopResult> =>
    Effect.suspend(() => {
      const state = current
      if (state._tag !== "Starting" && state._tag !== "Initializing" && state._tag !== "Ready") {
        return Effect.succeed("AlreadyClosing" as const)
      }
      return Result.match(unsafeTransition(Closing({ reason }), state._tag), {
        onFailure: () => Effect.succeed("AlreadyClosing" as const),
        onSuccess: (event) => Effect.as(record(event), "Stopped" as const)
      })
    })

  // Subscribes first, then reads the history in one synchronous step; events that reach the subscription and are
  // also in that snapshot are dropped by index, so none is lost or seen twice.
  const subscribe = <A>(
    f: (past: ReadonlyArray<Event>, state: State, live: Stream.Stream<Event>) => Stream.Stream<A>
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
  const closedBy = (): CloseReason | undefined => {
    for (const event of history) if (event.to._tag === "Closing") return event.to.reason
    return undefined
  }
  // The refusal of the state it was made for: states are values that a transition replaces, never changes.
  let refusedIn: State | undefined
  let refused: ShutdownError | undefined

  const events: Stream.Stream<Event> = subscribe((past, _, live) =>
    Stream.concat(Stream.fromIterable(past), live).pipe(Stream.takeUntil((event) => isTerminal(event.to)))
  )

  const changes: Stream.Stream<State> = subscribe((_, state, live) =>
    Stream.concat(Stream.succeed(state), Stream.map(live, (event) => event.to)).pipe(Stream.takeUntil(isTerminal))
  )

  const lifecycle: Lifecycle = {
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

/**
 * Runs a handshake on a lifecycle in `Starting`: moves to `Initializing`, runs `handshake` with `timeout` (a Clock
 * timeout, so `TestClock` drives it), then moves to `Ready` with its result. If it fails, or does not finish in time
 * (`HandshakeTimeout`), the lifecycle moves to `Failed` with that error and the error is returned.
 *
 * Each transition is a compare-and-set on `Initializing`: if a `stop` arrived meanwhile, the lifecycle stays in
 * `Closing`, a late success fails with `IllegalTransition`, and a failure is returned without marking `Failed`. A
 * lifecycle that is not in `Starting` fails with `IllegalTransition` at once. Interruption and defects leave the
 * state to the owner, whose finalizer stops the lifecycle.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Lifecycle } from "@lifeline/kernel"
 *
 * const program = Effect.gen(function*() {
 *   const lifecycle = yield* Lifecycle.make
 *   const initialize = Effect.succeed({ protocolVersion: "1.0" }) // the Hermes `initialize` call goes here
 *   return yield* Lifecycle.runHandshake(lifecycle, initialize, "10 seconds")
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const runHandshake = <A, E extends Failure, R>(
  lifecycle: Lifecycle,
  handshake: Effect.Effect<A, E, R>,
  timeout: Duration.Input
): Effect.Effect<A, E | HandshakeTimeout | IllegalTransition, R> => {
  // Effect 4 durations may be negative; a negative timeout is a zero one, as it was with Effect 3.
  const duration = Duration.max(Duration.fromInputUnsafe(timeout), Duration.zero)
  const timeoutMillis = Duration.toMillis(duration)
  return Effect.gen(function*() {
    yield* lifecycle.transition(Initializing(), { from: "Starting" })
    const result = yield* handshake.pipe(
      Effect.timeoutOrElse({ duration, orElse: () => Effect.fail(new HandshakeTimeout({ timeoutMillis })) }),
      Effect.tapError((error: E | HandshakeTimeout) =>
        Effect.ignore(lifecycle.transition(Failed({ error }), { from: "Initializing" }))
      )
    )
    yield* lifecycle.transition(Ready(), { from: "Initializing" })
    return result
  }).pipe(Effect.withSpan("Lifecycle.runHandshake", { attributes: { timeoutMillis } }))
}
