/**
 * The lifecycle of a peer as a state machine: `Starting → Initializing → Ready → Closing → Closed`, and `Failed` from
 * any state that has not ended. Only the transitions in one table are possible; each one is published as an event
 * stamped by the Clock and logged at Debug, so tests, UIs and telemetry all read the same story.
 *
 * @since 0.1.0
 */
import type * as RpcError from "@lifeline/jsonrpc/RpcError"
import type * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type { Predicate } from "effect/Predicate"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import * as internal from "./internal/lifecycle.js"
import * as internalGate from "./internal/lifecycleGate.js"
import * as internalHandshake from "./internal/lifecycleHandshake.js"
import type { HandshakeTimeout } from "./internal/lifecycleHandshake.js"
import * as internalState from "./internal/lifecycleState.js"
import type { IllegalTransition } from "./internal/lifecycleState.js"
import type * as PeerError from "./PeerError.js"
import type { ShutdownError } from "./PeerError.js"
import type { TransportError } from "./Transport.js"

export {
  /**
   * @since 0.1.0
   * @category errors
   */
  HandshakeTimeout
} from "./internal/lifecycleHandshake.js"

export {
  /**
   * @since 0.1.0
   * @category errors
   */
  IllegalTransition
} from "./internal/lifecycleState.js"

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
export const State: Data.TaggedEnum.Constructor<State> = internalState.State

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
 * `Failed` with `error`, kept as it is: it outlives the span it was raised in and may be journaled.
 *
 * @since 0.1.0
 * @category constructors
 */
export const Failed: (args: { readonly error: Failure }) => State = internalState.Failed

/**
 * The states each state may move to (`Starting → Ready` is for peers without a handshake). No state moves to itself,
 * which is what makes `beginStop` answer `AlreadyClosing` the second time.
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
export const isLegal: (from: Tag, to: Tag) => boolean = internalState.isLegal

/**
 * `Closed` or `Failed`: nothing follows.
 *
 * @since 0.1.0
 * @category models
 */
export const isTerminal: (state: State) => boolean = internalState.isTerminal

/**
 * `Closing`, `Closed` or `Failed`: the peer takes no new work in either direction.
 *
 * @since 0.1.0
 * @category models
 */
export const isShuttingDown: (state: State) => boolean = internalState.isShuttingDown

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
 * What `beginStop` tells its caller: `Stopped` for the one call that moved the lifecycle to `Closing`,
 * `AlreadyClosing` for every other call.
 *
 * @since 0.1.0
 * @category models
 */
export type StopResult = "Stopped" | "AlreadyClosing"

/**
 * The error an inbound request gets in `state`, or `undefined` if it may run; `isHandshake` marks the handshake's
 * messages (docs/lifecycle.md, "Gates").
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
export const inboundGate: (state: State, method: string, isHandshake: boolean) => RpcError.RpcError | undefined =
  internalGate.inboundGate

/**
 * The error an outbound call fails with at once in `state`, or `undefined` if it may be sent (docs/lifecycle.md,
 * "Gates"). A `Closed` state does not say why it closed: `closedBy` is the reason of the `Closing` before it.
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
export const outboundGate: (state: State, closedBy?: CloseReason) => ShutdownError | undefined =
  internalGate.outboundGate

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
   * {@link outboundGate} in the current state. Every call refused in one state gets the same `ShutdownError` instance,
   * so a flood of refused calls allocates nothing each.
   */
  readonly outboundGate: () => ShutdownError | undefined
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
export const make: Effect.Effect<Lifecycle, never, Scope.Scope> = internal.make

/**
 * Runs a handshake on a lifecycle in `Starting`: `Initializing`, then `Ready` with its result, or `Failed` with its
 * error or a `HandshakeTimeout` (a Clock timeout). Each transition is a compare-and-set on `Initializing`: a `stop`
 * that came meanwhile wins (a late success fails with `IllegalTransition`). Interruption and defects leave the state to
 * the owner.
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
export const runHandshake: <A, E extends Failure, R>(
  lifecycle: Lifecycle,
  handshake: Effect.Effect<A, E, R>,
  timeout: Duration.Input
) => Effect.Effect<A, E | HandshakeTimeout | IllegalTransition, R> = internalHandshake.runHandshake
