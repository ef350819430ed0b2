/**
 * A peer with a lifecycle: the handshake that makes it `Ready`, the gates that refuse traffic in the wrong state, and
 * a synchronous, idempotent `stop` that shuts it down under a `ShutdownPolicy` (fail-fast or timeout-bounded drain).
 * Its lifetime is the Scope it is made in; closing that Scope stops it under the same policy, and so does a request to
 * stop the whole program (`GracefulShutdown`, which `NodeSignals.runMain` provides). Layer-first, `Service` declares a
 * connection of one protocol as a service of its own, built by `layer` over the `Transport` service.
 *
 * @since 0.1.0
 */
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Cancellation from "./Cancellation.js"
import * as GracefulShutdown from "./GracefulShutdown.js"
import * as Lifecycle from "./Lifecycle.js"
import type * as Method from "./Method.js"
import * as Peer from "./Peer.js"
import * as PeerError from "./PeerError.js"
import * as PeerMetrics from "./PeerMetrics.js"
import * as Protocol from "./Protocol.js"
import * as ShutdownPolicy from "./ShutdownPolicy.js"
import * as Transport from "./Transport.js"

/**
 * How the connection becomes `Ready`.
 *
 * - `Initiate`: this side starts it (a host, an LSP client): `run` is called with the peer once it is up, within
 *   `timeout`; `make` returns when it succeeded and fails with the error (a `HandshakeTimeout` included) otherwise.
 *   Inbound requests are served before `Ready`, since servers ask their client things while initializing.
 * - `Accept`: the other side starts it (an extension, a language server): the handler of `request` runs the
 *   handshake. Until it has answered, every other inbound request gets -32002; a second one gets -32600. If it has
 *   not completed within `timeout`, the lifecycle moves to `Failed` with a `HandshakeTimeout` and the connection
 *   closes. `notifications` (such as `initialized`) are admitted before `Ready` too.
 *
 * `E` is what the handshake may fail with besides a `Lifecycle.Failure`: the typed error of the method it calls.
 * The names of an `Accept` handshake are those of requests and notifications the protocol serves, so a misspelled
 * one is a type error where the handshake is given to `make`.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Connection, Method, Protocol } from "@lifeline/kernel"
 *
 * const Initialize = Method.request("initialize", { params: Schema.Struct({}), result: Schema.Struct({}) })
 * const Server = Protocol.make({ serves: [Initialize] })
 *
 * const handshake: Connection.Handshake<Protocol.Serves<typeof Server>, never> = Connection.accept("initialize")
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Handshake<Serves extends Method.Any, Calls extends Method.Any, E = never> =
  | Initiate<Serves, Calls, E>
  | Accept<RequestName<Serves>, NotificationName<Serves>>

/**
 * The handshakes `make` accepts for a protocol that serves `Serves` and calls `Calls`: a {@link Handshake}, checked
 * against the protocol and never inferred from it (an `Accept` names requests and notifications it serves, an
 * `Initiate` made from a method calls one it calls), whose typed error `E` is inferred.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Connection, Method, Protocol } from "@lifeline/kernel"
 *
 * const Initialize = Method.request("initialize", { params: Schema.Struct({}), result: Schema.Struct({}) })
 * const Server = Protocol.make({ serves: [Initialize] })
 * type Serves = Protocol.Serves<typeof Server>
 *
 * const ok: Connection.HandshakeFor<Serves, never, never> = Connection.accept("initialize")
 * // @ts-expect-error: the protocol serves no `initialise`
 * const typo: Connection.HandshakeFor<Serves, never, never> = Connection.accept("initialise")
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type HandshakeFor<Serves extends Method.Any, Calls extends Method.Any, E> =
  // Written out rather than as `Initiate<...>`: TypeScript would infer `Serves` and `Calls` from the type arguments of
  // a handshake made without the protocol (`initiate(method, params)`) and let any method through.
  | {
    readonly _tag: "Initiate"
    readonly run: (peer: Peer.Peer<Serves, Calls>) => Effect.Effect<unknown, E | Lifecycle.Failure>
    readonly timeout: Duration.Duration
    readonly method?: NoInfer<Extract<Calls, Method.AnyRequest>> | undefined
  }
  // `NoInfer` around the names, never inside `Extract`: `NoInfer<A | B>` is not distributed over.
  | Accept<NoInfer<RequestName<Serves>>, NoInfer<NotificationName<Serves>>>

/**
 * The names of the requests among `M`.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Connection, Method } from "@lifeline/kernel"
 *
 * const Initialize = Method.request("initialize", { params: Schema.Struct({}), result: Schema.Struct({}) })
 * const Initialized = Method.notification("initialized", { params: Schema.Struct({}) })
 *
 * type Name = Connection.RequestName<typeof Initialize | typeof Initialized> // "initialize"
 * const name: Name = "initialize"
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type RequestName<M extends Method.Any> = Extract<M, Method.AnyRequest>["name"]

/**
 * The names of the notifications among `M`.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Connection, Method } from "@lifeline/kernel"
 *
 * const Initialize = Method.request("initialize", { params: Schema.Struct({}), result: Schema.Struct({}) })
 * const Initialized = Method.notification("initialized", { params: Schema.Struct({}) })
 *
 * type Name = Connection.NotificationName<typeof Initialize | typeof Initialized> // "initialized"
 * const name: Name = "initialized"
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type NotificationName<M extends Method.Any> = Extract<M, Method.AnyNotification>["name"]

/**
 * A handshake this side starts. `method` is the request it calls, when it was made from one
 * (`initiate(Initialize, params)`): `make` checks that the protocol calls it.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Connection, Method } from "@lifeline/kernel"
 *
 * const Initialize = Method.request("initialize", { params: Schema.Struct({}), result: Schema.Struct({}) })
 *
 * const handshake = Connection.initiate(Initialize, {}, { timeout: "5 seconds" })
 * const method: typeof Initialize | undefined = handshake.method
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Initiate<
  Serves extends Method.Any,
  Calls extends Method.Any,
  E = never,
  M extends Method.AnyRequest = Extract<Calls, Method.AnyRequest>
> {
  readonly _tag: "Initiate"
  readonly run: (peer: Peer.Peer<Serves, Calls>) => Effect.Effect<unknown, E | Lifecycle.Failure>
  readonly timeout: Duration.Duration
  readonly method?: M | undefined
}

/**
 * A handshake the other side starts with `request`.
 *
 * @example
 * ```ts
 * import { Connection } from "@lifeline/kernel"
 *
 * const handshake: Connection.Accept<"initialize", "initialized"> = Connection.accept("initialize", {
 *   notifications: ["initialized"]
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Accept<Request extends string = string, Notification extends string = string> {
  readonly _tag: "Accept"
  readonly request: Request
  readonly notifications: ReadonlyArray<Notification>
  readonly timeout: Duration.Duration | undefined
}

// Effect 4 durations may be negative; a negative timeout is a zero one, as it was with Effect 3.
const nonNegative = (input: Duration.Input): Duration.Duration =>
  Duration.max(Duration.fromInputUnsafe(input), Duration.zero)

const defaultHandshakeTimeout = Duration.seconds(10)

/**
 * This side starts the handshake. Default timeout 10 seconds (Hermes' `initialize`). The timeout is the handshake's
 * calls' timeout too: while the handshake runs, a call made with the peer `run` gets has no shorter timeout than it
 * (unless the call or its method sets one), so a silent peer gets the full `timeout` and `make` fails with
 * `HandshakeTimeout`, not with the peer's default 5 s `RequestTimeout`.
 *
 * Two forms:
 *
 * - `initiate(Initialize, params, { then })`: calls `Initialize` with `params`, then runs `then` with its result
 *   (to send `initialized`, say). `make` checks that the protocol calls `Initialize`, and fails with its typed error
 *   when it answers with one.
 * - `initiate((peer) => ...)`: runs any Effect with the peer. TypeScript does not carry `make`'s protocol into the
 *   function, so `peer` calls any method unless the type parameters are given (`initiate<Serves, Calls>(...)`);
 *   the Effect may fail with a typed error of its own, which `make` fails with.
 *
 * A handshake that fails with an error that is not a `Lifecycle.Failure` leaves the lifecycle `Failed` with an
 * `RpcError` -32000 whose `data` is that error.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Connection, Method } from "@lifeline/kernel"
 *
 * class Refused extends Schema.TaggedError<Refused>()("Refused", { reason: Schema.String }) {}
 * const Initialize = Method.request("initialize", {
 *   params: Schema.Struct({ version: Schema.String }),
 *   result: Schema.Struct({ name: Schema.String }),
 *   error: Refused
 * })
 * const Initialized = Method.notification("initialized", { params: Schema.Struct({}) })
 *
 * // The method form: `make` checks that the protocol calls `initialize`, and may fail with `Refused`.
 * const typed = Connection.initiate(Initialize, { version: "1.0" }, {
 *   then: (_result, peer) => peer.notify(Initialized, {}),
 *   timeout: "5 seconds"
 * })
 *
 * // The function form.
 * const free = Connection.initiate((peer) => peer.callUntyped("initialize", { capabilities: {} }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const initiate: {
  <M extends Method.AnyRequest, E = never>(
    method: M,
    params: Method.Params<M>,
    options?: {
      readonly then?:
        | ((result: Method.Result<M>, peer: Peer.Peer<any, any>) => Effect.Effect<unknown, E | Lifecycle.Failure>)
        | undefined
      readonly timeout?: Duration.Input | undefined
      readonly callOptions?: Peer.CallOptions | undefined
    }
  ): Initiate<any, any, Method.Failure<M> | E, M>
  <Serves extends Method.Any, Calls extends Method.Any, E = never>(
    run: (peer: Peer.Peer<Serves, Calls>) => Effect.Effect<unknown, E | Lifecycle.Failure>,
    options?: { readonly timeout?: Duration.Input | undefined }
  ): Initiate<Serves, Calls, E, never>
} = ((first: any, params?: any, options?: any): Initiate<any, any, any, any> => {
  if (typeof first === "function") {
    return { _tag: "Initiate", run: first, timeout: nonNegative(params?.timeout ?? defaultHandshakeTimeout) }
  }
  const method = first as Method.AnyRequest
  const then = options?.then as
    | ((result: unknown, peer: Peer.Peer<any, any>) => Effect.Effect<unknown, unknown>)
    | undefined
  return {
    _tag: "Initiate",
    method,
    run: (peer: Peer.Peer<any, any>) => {
      const call = peer.call(method, params, options?.callOptions)
      return (then === undefined ? call : Effect.flatMap(call, (result) => then(result, peer))) as Effect.Effect<
        unknown,
        any
      >
    },
    timeout: nonNegative(options?.timeout ?? defaultHandshakeTimeout)
  }
}) as any

/**
 * The other side starts the handshake with `request`; its handler (in `handlers`) does the work. The request and the
 * notifications are given as methods or as their names; either way `make` checks that the protocol serves them, so
 * `accept("initialise")` against a protocol that serves `initialize` does not compile.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Connection, Method } from "@lifeline/kernel"
 *
 * const Initialized = Method.notification("initialized", { params: Schema.Struct({}) })
 *
 * const byName = Connection.accept("initialize", { notifications: ["initialized"], timeout: "10 seconds" })
 * const byMethod = Connection.accept("initialize", { notifications: [Initialized] })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const accept = <
  const Request extends string,
  const Notifications extends ReadonlyArray<string | Method.AnyNotification> = readonly []
>(
  request: Request | Method.Request<Request, any, any, any>,
  options?: {
    readonly notifications?: Notifications | undefined
    readonly timeout?: Duration.Input | undefined
  }
): Accept<Request, NameOf<Notifications[number]>> => ({
  _tag: "Accept",
  request: (typeof request === "string" ? request : request.name) as Request,
  notifications: (options?.notifications ?? []).map((n) => typeof n === "string" ? n : n.name) as Array<
    NameOf<Notifications[number]>
  >,
  timeout: options?.timeout === undefined ? undefined : nonNegative(options.timeout)
})

type NameOf<N> = N extends string ? N : N extends Method.AnyNotification ? N["name"] : never

/**
 * What a shutdown did: under which policy and why, whether everything in flight finished (`drained`), and what was
 * cut off. The recovery journal persists `cutOff`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ShutdownReport {
  readonly policy: ShutdownPolicy.Policy
  readonly reason: Lifecycle.CloseReason | "Failed"
  readonly drained: boolean
  readonly cutOff: ReadonlyArray<Peer.CutOff>
  readonly startedAt: number
  readonly finishedAt: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<Serves extends Method.Any, Calls extends Method.Any, R, E = never>
  extends Peer.Options<Serves, Calls, R>
{
  /**
   * Checked against `protocol` (never inferred from it): an `Accept` handshake names requests and notifications the
   * protocol serves, an `Initiate` handshake made from a method calls one the protocol calls.
   */
  readonly handshake?: HandshakeFor<Serves, Calls, E> | undefined
  /**
   * Default: `ShutdownPolicy.resolve`'s rule: the `ShutdownPolicy` service when one is provided, else
   * `LIFELINE_SHUTDOWN_POLICY` / `LIFELINE_DRAIN_TIMEOUT`, else fail-fast (docs/lifecycle.md). An invalid environment fails
   * `make` with the `ConfigError` that names the variable.
   */
  readonly policy?: ShutdownPolicy.Policy | undefined
  /** Runs once, after every shutdown, with what it cut off. */
  readonly onShutdown?: ((report: ShutdownReport) => Effect.Effect<void>) | undefined
  /**
   * Registers the connection with the `GracefulShutdown` service, when one is provided (`NodeSignals.runMain`), so a
   * request to stop the program stops it under its policy before the main fiber is interrupted. Default true;
   * `NodeChildProcess.makeConnection` registers the child's whole stop instead.
   */
  readonly gracefulShutdown?: boolean | undefined
  /**
   * Effect metrics of the connection's traffic (`PeerMetrics`). By default the peer's counters (`lifeline.calls`,
   * `lifeline.failures`, `lifeline.pending`, `lifeline.served`, `lifeline.active`) are registered for the life of the
   * connection, read from its stats when the registry is read: nothing is done per message. `{ perMethod: true }`
   * adds per-method calls, failures and durations, updated per call; `{ name }` sets the `lifeline.peer` attribute;
   * `false` registers nothing.
   */
  readonly metrics?: boolean | PeerMetrics.Options | undefined
}

/**
 * A running connection.
 *
 * @since 0.1.0
 * @category models
 */
export interface Connection<Serves extends Method.Any, Calls extends Method.Any> {
  readonly peer: Peer.Peer<Serves, Calls>
  readonly lifecycle: Lifecycle.Lifecycle
  readonly policy: ShutdownPolicy.Policy
  /**
   * Stops under the policy. The first caller gets `Stopped` once the shutdown is over (milliseconds under fail-fast,
   * at most the drain timeout plus the flush bound under drain); every later or concurrent caller gets
   * `AlreadyClosing` at once, from any state.
   */
  readonly stop: (reason?: Lifecycle.CloseReason) => Effect.Effect<Lifecycle.StopResult>
  /**
   * Stops fail-fast whatever the policy: cuts a drain in progress short at once (a second SIGTERM). Answers like
   * `stop`.
   */
  readonly stopNow: (reason?: Lifecycle.CloseReason) => Effect.Effect<Lifecycle.StopResult>
  /** Waits for the end of the shutdown, however it started, and tells what it did. */
  readonly awaitShutdown: Effect.Effect<ShutdownReport>
}

/**
 * The peer as an initiating handshake sees it: while the lifecycle is `Starting` or `Initializing`, a call with no
 * timeout of its own (from its options or its method) waits longer than the handshake, so the handshake's timeout is
 * what ends it, with `HandshakeTimeout`. Once the handshake is over, calls are the peer's own again.
 */
const handshakePeer = <Serves extends Method.Any, Calls extends Method.Any>(
  peer: Peer.Peer<Serves, Calls>,
  lifecycle: Lifecycle.Lifecycle,
  timeout: Duration.Duration
): Peer.Peer<Serves, Calls> => {
  // Longer than the handshake, so that its timeout always fires first, even on a TestClock that wakes both at once.
  const bound = Duration.sum(timeout, Duration.seconds(1))
  const during = () => {
    const state = lifecycle.unsafeState()._tag
    return state === "Starting" || state === "Initializing"
  }
  return {
    ...peer,
    call: (method, params, callOptions) =>
      Effect.suspend(() =>
        peer.call(
          method,
          params,
          callOptions?.timeout !== undefined || method.timeout !== undefined || !during()
            ? callOptions
            : { ...callOptions, timeout: bound }
        )
      ),
    callUntyped: (method, params, callOptions) =>
      Effect.suspend(() =>
        peer.callUntyped(
          method,
          params,
          callOptions?.timeout !== undefined || !during() ? callOptions : { ...callOptions, timeout: bound }
        )
      )
  }
}

const asFailure = (error: unknown): Lifecycle.Failure =>
  error instanceof RpcError.RpcError
    ? error
    : RpcError.make(
      -32000,
      error instanceof Error && error.message !== "" ? error.message : "The handshake failed",
      error
    )

const isFailure = (error: unknown): error is Lifecycle.Failure =>
  error instanceof RpcError.RpcError ||
  error instanceof Lifecycle.HandshakeTimeout ||
  error instanceof Transport.TransportError ||
  error instanceof PeerError.RequestTimeout ||
  error instanceof PeerError.PeerClosed ||
  error instanceof PeerError.ShutdownError ||
  error instanceof PeerError.PeerExited

/**
 * Starts a connection in the current Scope.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Connection, Method, Protocol, ShutdownPolicy, TestTransport } from "@lifeline/kernel"
 *
 * const Work = Method.request("work", { params: Schema.Struct({}), result: Schema.Null })
 *
 * const program = Effect.gen(function*() {
 *   const { left } = yield* TestTransport.makePair()
 *   const connection = yield* Connection.make({
 *     protocol: Protocol.make({ serves: [Work] }),
 *     transport: left,
 *     handlers: { work: () => Effect.succeed(null) },
 *     policy: ShutdownPolicy.drain("3 seconds")
 *   })
 *   return yield* connection.stop() // "Stopped"
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <Serves extends Method.Any, Calls extends Method.Any, R = never, E = never>(
  options: Options<Serves, Calls, R, E>
): Effect.Effect<
  Connection<Serves, Calls>,
  Lifecycle.Failure | E | Lifecycle.IllegalTransition | Config.ConfigError,
  Scope.Scope | R
> =>
  Effect.gen(function*() {
    const policy = yield* ShutdownPolicy.resolve(options.policy)
    const cancellation = Cancellation.spelling(options.cancellation ?? options.protocol.cancellation)
    const flushTimeout = Duration.fromInputUnsafe(options.flushTimeout ?? Duration.seconds(1))
    const lifecycle = yield* Lifecycle.make
    const handshake = options.handshake
    const handshakeMessages = new Set(
      handshake?._tag === "Accept" ? [handshake.request, ...handshake.notifications] : []
    )
    const accepting = handshake?._tag === "Accept"

    const handlers = { ...options.handlers } as Record<string, Peer.RequestHandler<any, R>>
    if (handshake?._tag === "Accept") {
      const serve = handlers[handshake.request]
      if (serve !== undefined) {
        handlers[handshake.request] = (params, context) =>
          lifecycle.transition(Lifecycle.Initializing(), { from: "Starting" }).pipe(
            // The gate admits handshake requests until Ready: only the one that moves Starting on may run.
            Effect.mapError(() =>
              RpcError.RpcError.invalidRequest(`${handshake.request}: the handshake is already running`)
            ),
            Effect.andThen(serve(params, context)),
            Effect.tap(() => Effect.ignore(lifecycle.transition(Lifecycle.Ready(), { from: "Initializing" }))),
            Effect.tapError((error) =>
              Effect.ignore(
                lifecycle.transition(Lifecycle.Failed({ error: asFailure(error) }), { from: "Initializing" })
              )
            )
          )
      }
    }

    const peer = yield* Peer.make<Serves, Calls, R>({
      ...options,
      handlers: handlers as Peer.Handlers<Serves, R>,
      gate: {
        inbound: (method) => {
          const isHandshake = handshakeMessages.has(method)
          const state = lifecycle.unsafeState()
          // The side that initiates serves what the other side asks while the handshake runs.
          if (!accepting && !Lifecycle.isShuttingDown(state)) return undefined
          return Lifecycle.inboundGate(state, method, isHandshake)
        },
        inboundNotification: (method) => {
          const state = lifecycle.unsafeState()
          if (Lifecycle.isShuttingDown(state)) return false
          return !accepting || state._tag === "Ready" || handshakeMessages.has(method)
        },
        // Open for the cancellations of what a teardown cut off, and only for them (see `cancelOnWire`).
        outbound: () => cancelling ? undefined : lifecycle.outboundGate()
      }
    })
    let cancelling = false

    const metrics = options.metrics === false ? undefined : options.metrics === true ? {} : options.metrics ?? {}
    let exposed: Peer.Peer<Serves, Calls> = peer
    if (metrics !== undefined) {
      const name = PeerMetrics.nameOf(metrics)
      yield* PeerMetrics.register(peer, name)
      if (metrics.perMethod === true) exposed = yield* PeerMetrics.instrument(peer, name)
    }

    /**
     * Tells the other side, in the protocol's cancellation (`$/cancelRequest`, `notifications/cancelled`), that the
     * calls a teardown cut off are abandoned, so that it stops working on them too. Nothing is sent when the protocol
     * has no cancellation (plain JSON-RPC, Hermes) or when the connection is already lost. In a fiber of its own, for
     * the reason the drain is (a teardown in a finalizer of an interrupted fiber), bounded by the flush timeout: the
     * notifications wait for room in the outbound queue like any frame.
     */
    const cancelOnWire = (cut: ReadonlyArray<Peer.CutOff>, why: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const spelling = cancellation
        if (spelling === undefined) return Effect.void
        const ids = cut.flatMap((c) => c.direction === "outbound" && c.id !== null ? [c.id] : [])
        if (ids.length === 0) return Effect.void
        return Effect.gen(function*() {
          if (yield* peer.isClosed) return
          cancelling = true
          for (const id of ids) yield* Effect.ignore(peer.notifyUntyped(spelling.method, spelling.encode(id, why)))
        }).pipe(
          Effect.ensuring(Effect.sync(() => {
            cancelling = false
          })),
          Effect.timeoutOption(flushTimeout),
          Effect.interruptible,
          Effect.forkDetach,
          Effect.flatMap(Fiber.join),
          Effect.asVoid
        )
      })

    const done = yield* Deferred.make<ShutdownReport>()
    const force = yield* Deferred.make<void>()
    let started = false

    /** The one teardown. Whoever calls it first runs it; everybody else waits for its report. */
    const teardown = (reason: Lifecycle.CloseReason | "Failed", how: ShutdownPolicy.Policy): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (started) return Effect.asVoid(Deferred.await(done))
        started = true
        return Effect.gen(function*() {
          const startedAt = yield* Clock.currentTimeMillis
          let drained = true
          if (how._tag === "Drain") {
            // In a fiber of its own: the teardown often runs in a finalizer of an interrupted fiber (SIGTERM through
            // runMain), where an interruptible wait would end at once. Joined uninterruptibly, the drain gets its
            // full deadline; `stopNow` (a second signal) is what cuts it short.
            const waited = yield* peer.awaitIdle.pipe(
              Effect.as(true),
              Effect.raceFirst(Effect.as(Deferred.await(force), false)),
              Effect.timeoutOrElse({ duration: how.timeout, orElse: () => Effect.succeed(false) }),
              Effect.interruptible,
              Effect.forkDetach,
              Effect.flatMap(Fiber.join),
              Effect.exit
            )
            drained = Exit.isSuccess(waited) && waited.value
          }
          const phase = lifecycle.unsafeState()._tag
          const error = new PeerError.ShutdownError({
            reason: reason === "Failed"
              ? "Failed"
              : !drained
              ? "DrainTimeout"
              : reason === "Interrupted"
              ? "Interrupted"
              : "Stop",
            phase
          })
          const cutOut = yield* peer.failPending(error)
          yield* cancelOnWire(
            cutOut,
            error.reason === "DrainTimeout"
              ? `the drain deadline (${Duration.format(how._tag === "Drain" ? how.timeout : Duration.zero)}) passed`
              : "the connection is shutting down"
          )
          const cutIn = yield* peer.interruptHandlers
          yield* peer.close(error)
          yield* Effect.ignore(lifecycle.transition(Lifecycle.Closed(), { from: "Closing" }))
          const report: ShutdownReport = {
            policy: how,
            reason,
            drained: drained && cutOut.length + cutIn.length === 0,
            cutOff: [...cutOut, ...cutIn],
            startedAt,
            finishedAt: yield* Clock.currentTimeMillis
          }
          if (report.cutOff.length > 0) {
            yield* Effect.logWarning(`shutdown cut off ${report.cutOff.length} operation(s)`).pipe(
              Effect.annotateLogs({ policy: how._tag, reason })
            )
          }
          if (options.onShutdown !== undefined) yield* options.onShutdown(report)
          yield* Deferred.succeed(done, report)
        }).pipe(Effect.uninterruptible)
      })

    const stopWith = (reason: Lifecycle.CloseReason, how: ShutdownPolicy.Policy) =>
      Effect.flatMap(
        lifecycle.beginStop(reason),
        (result) => result === "Stopped" ? Effect.as(teardown(reason, how), result) : Effect.succeed(result)
      )

    const fail = (error: Lifecycle.Failure): Effect.Effect<void> =>
      Effect.suspend(() => {
        const state = lifecycle.unsafeState()
        const failed = Lifecycle.isTerminal(state)
          ? Effect.void
          : Effect.ignore(lifecycle.transition(Lifecycle.Failed({ error })))
        return Effect.andThen(failed, teardown("Failed", ShutdownPolicy.FailFast()))
      })

    // Registered after the peer, so it runs before the peer's own finalizer and decides what in-flight work sees.
    yield* Effect.addFinalizer((exit) =>
      Effect.andThen(
        lifecycle.beginStop(Exit.hasInterrupts(exit) ? "Interrupted" : "Stop"),
        teardown(Exit.hasInterrupts(exit) ? "Interrupted" : "Stop", policy)
      )
    )

    // The other side went away or the transport broke: stop under the policy, or fail.
    yield* peer.closed.pipe(
      Effect.flatMap((reason) =>
        reason._tag === "PeerClosed" && reason.reason === "TransportClosed"
          // Already Failed (a refused handshake, say) and nobody tore down yet: this is the moment.
          ? Effect.flatMap(
            stopWith("TransportClosed", policy),
            () =>
              Lifecycle.isTerminal(lifecycle.unsafeState())
                ? teardown("Failed", ShutdownPolicy.FailFast())
                : Effect.void
          )
          : reason._tag === "ShutdownError"
          ? Effect.void
          : fail(reason)
      ),
      Effect.forkScoped
    )

    if (options.gracefulShutdown !== false) {
      // Stops, then waits for the teardown, which a lifecycle already `Failed` without one (a refused handshake waiting
      // for the other side to close) runs now: the program is stopping, nobody else will.
      const stopAndWait = (how: ShutdownPolicy.Policy) =>
        stopWith("Interrupted", how).pipe(
          Effect.andThen(Effect.suspend(() =>
            lifecycle.unsafeState()._tag === "Failed" && !started
              ? teardown("Failed", ShutdownPolicy.FailFast())
              : Effect.void
          )),
          Effect.andThen(Deferred.await(done))
        )
      yield* GracefulShutdown.register({
        name: "connection",
        stop: stopAndWait(policy),
        stopNow: Effect.andThen(Deferred.succeed(force, void 0), stopAndWait(ShutdownPolicy.FailFast()))
      })
    }

    if (handshake === undefined) {
      yield* lifecycle.transition(Lifecycle.Ready())
    } else if (handshake._tag === "Initiate") {
      // The lifecycle's `Failed` holds a `Lifecycle.Failure`; a typed error of the handshake's own is wrapped there,
      // and `make` fails with the error itself.
      let typed: { readonly wrapped: Lifecycle.Failure; readonly error: E } | undefined
      const run = Effect.mapError(
        handshake.run(handshakePeer(exposed, lifecycle, handshake.timeout)),
        (error): Lifecycle.Failure => {
          if (isFailure(error)) return error
          const wrapped = asFailure(error)
          typed = { wrapped, error: error as E }
          return wrapped
        }
      )
      yield* Lifecycle.runHandshake(lifecycle, run, handshake.timeout).pipe(
        Effect.tapError((error) => error._tag === "IllegalTransition" ? Effect.void : fail(error)),
        Effect.mapError((error) => typed !== undefined && error === typed.wrapped ? typed.error : error)
      )
    } else if (handshake.timeout !== undefined) {
      const timeout = handshake.timeout
      yield* Effect.sleep(timeout).pipe(
        Effect.andThen(Effect.suspend(() => {
          const state = lifecycle.unsafeState()._tag
          return state === "Starting" || state === "Initializing"
            ? fail(new Lifecycle.HandshakeTimeout({ timeoutMillis: Duration.toMillis(timeout) }))
            : Effect.void
        })),
        Effect.forkScoped
      )
    }

    return {
      peer: exposed,
      lifecycle,
      policy,
      stop: (reason = "Stop") => stopWith(reason, policy),
      stopNow: (reason = "Stop") =>
        Effect.andThen(
          Deferred.succeed(force, void 0),
          stopWith(reason, ShutdownPolicy.FailFast())
        ),
      awaitShutdown: Deferred.await(done)
    }
  })

// -- Layer-first --------------------------------------------------------------------------------------------------

/**
 * Options of a connection made by a layer: those of {@link make} without the transport, which is the `Transport`
 * service the layer is built over.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Connection, Method, Protocol } from "@lifeline/kernel"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 *
 * const options: Connection.LayerOptions<typeof Add, never, never> = {
 *   protocol: Protocol.make({ serves: [Add] }),
 *   handlers: { add: ([a, b]) => Effect.succeed(a + b) },
 *   requestTimeout: "2 seconds"
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface LayerOptions<Serves extends Method.Any, Calls extends Method.Any, R, E = never>
  extends Omit<Options<Serves, Calls, R, E>, "transport">
{}

/**
 * What a layer can fail with: what {@link make} fails with.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Connection } from "@lifeline/kernel"
 *
 * class Refused extends Schema.TaggedError<Refused>()("Refused", {}) {}
 *
 * // A layer whose handshake may fail with `Refused`, recovered into a fallback.
 * const fallback = (error: Connection.LayerError<Refused>) =>
 *   error._tag === "Refused" ? Effect.succeed("refused") : Effect.fail(error)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type LayerError<E = never> = Lifecycle.Failure | E | Lifecycle.IllegalTransition | Config.ConfigError

/**
 * A connection for the life of the layer, over the `Transport` service, as the service `tag`. Built, it is `Ready`
 * (an `Initiate` handshake has succeeded); released, it stops under its policy. A service built on the connection is
 * tested by providing another `Transport` layer (`TestTransport.layerServe`), or another layer of `tag`.
 *
 * @example
 * ```ts
 * import { Context, Layer, Schema } from "effect"
 * import { Connection, Method, Protocol } from "@lifeline/kernel"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 * const Calc = Protocol.make({ calls: [Add] })
 *
 * class CalcConnection
 *   extends Context.Service<CalcConnection, Connection.Connection<never, typeof Add>>()("app/CalcConnection")
 * {}
 *
 * // Layer<CalcConnection, Lifecycle.Failure | ..., Transport>
 * const CalcConnectionLive = Connection.layer(CalcConnection, { protocol: Calc, handlers: {} })
 * const _check: Layer.Layer<CalcConnection, unknown, unknown> = CalcConnectionLive
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <I, Serves extends Method.Any, Calls extends Method.Any, R = never, E = never>(
  tag: Context.Key<I, Connection<Serves, Calls>>,
  options: LayerOptions<Serves, Calls, R, E>
): Layer.Layer<I, LayerError<E>, Transport.Transport | Exclude<R, Scope.Scope>> =>
  Layer.effect(
    tag,
    Effect.flatMap(Transport.Transport, (transport) => make<Serves, Calls, R, E>({ ...options, transport }))
  )

/**
 * The settings of a connection that can come from `Config` (see {@link layerConfig}).
 *
 * @example
 * ```ts
 * import { Connection, ShutdownPolicy } from "@lifeline/kernel"
 *
 * const settings: Connection.Settings = { policy: ShutdownPolicy.drain("3 seconds"), requestTimeout: "10 seconds" }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  readonly policy?: ShutdownPolicy.Policy | undefined
  readonly requestTimeout?: Duration.Input | undefined
  readonly flushTimeout?: Duration.Input | undefined
  readonly maxConcurrentHandlers?: number | undefined
  readonly outboundCapacity?: number | undefined
}

/**
 * Options of {@link layerConfig}: {@link LayerOptions} whose {@link Settings} are read from `config`.
 *
 * @example
 * ```ts
 * import { Config } from "effect"
 * import { Connection, Protocol } from "@lifeline/kernel"
 *
 * const options: Connection.LayerConfigOptions<never, never, never> = {
 *   protocol: Protocol.make({}),
 *   handlers: {},
 *   config: { maxConcurrentHandlers: Config.Int("MAX_HANDLERS") }
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface LayerConfigOptions<Serves extends Method.Any, Calls extends Method.Any, R, E = never>
  extends Omit<LayerOptions<Serves, Calls, R, E>, keyof Settings>
{
  /** Each setting as a `Config` (a missing one keeps its default), or all of them as one `Config`. */
  readonly config: Config.Wrap<Settings>
}

/**
 * {@link layer} with its settings read from `Config` when the layer is built: a missing or invalid value fails the
 * layer with the `ConfigError` that names it. The policy, when `config` does not give one, follows
 * `ShutdownPolicy.resolve` as in {@link make} (`LIFELINE_SHUTDOWN_POLICY` / `LIFELINE_DRAIN_TIMEOUT`).
 *
 * @example
 * ```ts
 * import { Config, Context, Schema } from "effect"
 * import { Connection, Method, Protocol, ShutdownPolicy } from "@lifeline/kernel"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 * const Calc = Protocol.make({ calls: [Add] })
 *
 * class CalcConnection
 *   extends Context.Service<CalcConnection, Connection.Connection<never, typeof Add>>()("app/CalcConnection")
 * {}
 *
 * const CalcConnectionLive = Connection.layerConfig(CalcConnection, {
 *   protocol: Calc,
 *   handlers: {},
 *   config: {
 *     requestTimeout: Config.Duration("CALC_TIMEOUT").pipe(Config.withDefault("5 seconds")),
 *     policy: ShutdownPolicy.config
 *   }
 * })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = <I, Serves extends Method.Any, Calls extends Method.Any, R = never, E = never>(
  tag: Context.Key<I, Connection<Serves, Calls>>,
  options: LayerConfigOptions<Serves, Calls, R, E>
): Layer.Layer<I, LayerError<E>, Transport.Transport | Exclude<R, Scope.Scope>> =>
  Layer.effect(
    tag,
    Effect.gen(function*() {
      const { config, ...rest } = options
      const settings = yield* Config.unwrap(config)
      const transport = yield* Transport.Transport
      const defined: Record<string, unknown> = {}
      for (const [key, value] of Object.entries(settings)) if (value !== undefined) defined[key] = value
      return yield* make<Serves, Calls, R, E>({ ...rest, ...defined, transport } as Options<Serves, Calls, R, E>)
    })
  )

/**
 * A connection as a service of its own, one per protocol: the class is the service's key, and its statics build it.
 * Made by {@link Service}.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Connection, Method, Protocol } from "@lifeline/kernel"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 *
 * class Calc extends Connection.Service<Calc>()("app/Calc", { protocol: Protocol.make({ calls: [Add] }) }) {}
 *
 * const protocol = Calc.protocol
 * const sum = Effect.flatMap(Calc.client, (client) => client.add([1, 2])) // Effect<number, ..., Calc>
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Service<Self, Id extends string, Serves extends Method.Any, Calls extends Method.Any>
  extends Context.ServiceClass<Self, Id, Connection<Serves, Calls>>
{
  readonly protocol: Protocol.Protocol<Serves, Calls>
  /** {@link layer} for this service and its protocol. */
  readonly layer: <R = never, E = never>(
    options: Omit<LayerOptions<Serves, Calls, R, E>, "protocol">
  ) => Layer.Layer<Self, LayerError<E>, Transport.Transport | Exclude<R, Scope.Scope>>
  /** {@link layerConfig} for this service and its protocol. */
  readonly layerConfig: <R = never, E = never>(
    options: Omit<LayerConfigOptions<Serves, Calls, R, E>, "protocol">
  ) => Layer.Layer<Self, LayerError<E>, Transport.Transport | Exclude<R, Scope.Scope>>
  /** The methods the protocol calls, as `Protocol.client` makes them, on the connection of this service. */
  readonly client: Effect.Effect<Protocol.Client<Calls>, never, Self>
}

/**
 * Declares a connection service for a protocol, the way `Context.Service` declares any service: a class whose
 * instances are `Connection`s of that protocol, with `layer` and `layerConfig` to make one over the `Transport`
 * service, and `client` for its typed calls. A service of the application built on it (`Layer.effect` over the class)
 * runs against a child process, stdio or a socket by providing that `Transport` layer, and in a test against
 * `TestTransport.layerServe(protocol, handlers)`, under `TestClock`.
 *
 * @example
 * ```ts
 * import { Context, Effect, Layer, Schema } from "effect"
 * import { Connection, Method, Peer, Protocol, TestTransport } from "@lifeline/kernel"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 * const CalcProtocol = Protocol.make({ calls: [Add] })
 *
 * class CalcConnection extends Connection.Service<CalcConnection>()("app/CalcConnection", {
 *   protocol: CalcProtocol
 * }) {}
 *
 * class Calculator extends Context.Service<Calculator, {
 *   readonly add: (a: number, b: number) => Effect.Effect<number, Peer.CallError>
 * }>()("app/Calculator") {
 *   static readonly layer = Layer.effect(
 *     Calculator,
 *     Effect.map(CalcConnection.client, (client) => ({ add: (a: number, b: number) => client.add([a, b]) }))
 *   ).pipe(Layer.provide(CalcConnection.layer({ handlers: {} })))
 * }
 *
 * // In a test: the far end serves the protocol in memory.
 * const CalculatorTest = Calculator.layer.pipe(
 *   Layer.provide(TestTransport.layerServe(Protocol.flip(CalcProtocol), { add: ([a, b]) => Effect.succeed(a + b) }))
 * )
 *
 * const program = Effect.gen(function*() {
 *   const calculator = yield* Calculator
 *   return yield* calculator.add(1, 2) // 3
 * }).pipe(Effect.provide(CalculatorTest))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const Service = <Self>() =>
<const Id extends string, Serves extends Method.Any, Calls extends Method.Any>(
  id: Id,
  options: { readonly protocol: Protocol.Protocol<Serves, Calls> }
): Service<Self, Id, Serves, Calls> => {
  const tag = Context.Service<Self, Connection<Serves, Calls>>()(id)
  const protocol = options.protocol
  return Object.assign(tag, {
    protocol,
    layer: <R = never, E = never>(layerOptions: Omit<LayerOptions<Serves, Calls, R, E>, "protocol">) =>
      layer<Self, Serves, Calls, R, E>(tag, { ...layerOptions, protocol } as LayerOptions<Serves, Calls, R, E>),
    layerConfig: <R = never, E = never>(
      layerOptions: Omit<LayerConfigOptions<Serves, Calls, R, E>, "protocol">
    ) =>
      layerConfig<Self, Serves, Calls, R, E>(
        tag,
        { ...layerOptions, protocol } as LayerConfigOptions<Serves, Calls, R, E>
      ),
    client: Effect.map(tag, (connection) => Protocol.client(connection.peer))
  })
}
