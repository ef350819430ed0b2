/**
 * A peer with a lifecycle: the handshake that makes it `Ready`, the gates that refuse traffic in the wrong state, and
 * a synchronous, idempotent `stop` that shuts it down under a `ShutdownPolicy` (fail-fast or timeout-bounded drain).
 * Its lifetime is the Scope it is made in; closing that Scope stops it under the same policy, and so does a request to
 * stop the whole program (`GracefulShutdown`, which `NodeSignals.runMain` provides).
 *
 * @since 0.1.0
 */
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Clock from "effect/Clock"
import type * as Config from "effect/Config"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
import * as Cancellation from "./Cancellation.js"
import * as GracefulShutdown from "./GracefulShutdown.js"
import * as Lifecycle from "./Lifecycle.js"
import type * as Method from "./Method.js"
import * as Peer from "./Peer.js"
import * as PeerError from "./PeerError.js"
import * as ShutdownPolicy from "./ShutdownPolicy.js"

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
 * @since 0.1.0
 * @category models
 */
export type Handshake<Serves extends Method.Any, Calls extends Method.Any> =
  | {
    readonly _tag: "Initiate"
    readonly run: (peer: Peer.Peer<Serves, Calls>) => Effect.Effect<unknown, Lifecycle.Failure>
    readonly timeout: Duration.Duration
  }
  | {
    readonly _tag: "Accept"
    readonly request: string
    readonly notifications: ReadonlyArray<string>
    readonly timeout: Duration.Duration | undefined
  }

// Effect 4 durations may be negative; a negative timeout is a zero one, as it was with Effect 3.
const nonNegative = (input: Duration.Input): Duration.Duration =>
  Duration.max(Duration.fromInputUnsafe(input), Duration.zero)

/**
 * This side starts the handshake. Default timeout 10 seconds (Hermes' `initialize`). The timeout is the handshake's
 * calls' timeout too: while the handshake runs, a call made with the peer `run` gets has no shorter timeout than it
 * (unless the call or its method sets one), so a silent peer gets the full `timeout` and `make` fails with
 * `HandshakeTimeout`, not with the peer's default 5 s `RequestTimeout`.
 *
 * @example
 * ```ts
 * import { Connection } from "@lifeline/kernel"
 *
 * const handshake = Connection.initiate((peer) => peer.callUntyped("initialize", { capabilities: {} }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const initiate = <Serves extends Method.Any, Calls extends Method.Any>(
  run: (peer: Peer.Peer<Serves, Calls>) => Effect.Effect<unknown, Lifecycle.Failure>,
  options?: { readonly timeout?: Duration.Input | undefined }
): Handshake<Serves, Calls> => ({
  _tag: "Initiate",
  run,
  timeout: nonNegative(options?.timeout ?? Duration.seconds(10))
})

/**
 * The other side starts the handshake with `request`; its handler (in `handlers`) does the work.
 *
 * @example
 * ```ts
 * import { Connection } from "@lifeline/kernel"
 *
 * const handshake = Connection.accept("initialize", { notifications: ["initialized"], timeout: "10 seconds" })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const accept = (
  request: string,
  options?: {
    readonly notifications?: ReadonlyArray<string> | undefined
    readonly timeout?: Duration.Input | undefined
  }
): Handshake<any, any> => ({
  _tag: "Accept",
  request,
  notifications: options?.notifications ?? [],
  timeout: options?.timeout === undefined ? undefined : nonNegative(options.timeout)
})

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
export interface Options<Serves extends Method.Any, Calls extends Method.Any, R>
  extends Peer.Options<Serves, Calls, R>
{
  readonly handshake?: Handshake<Serves, Calls> | undefined
  /**
   * Default: `ShutdownPolicy.resolve`'s rule: the `ShutdownPolicy` service when one is provided, else
   * `LIFELINE_SHUTDOWN_POLICY` / `LIFELINE_DRAIN_TIMEOUT`, else fail-fast (seed 003). An invalid environment fails
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
    : RpcError.make(-32000, error instanceof Error ? error.message : "The handshake failed", error)

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
export const make = <Serves extends Method.Any, Calls extends Method.Any, R = never>(
  options: Options<Serves, Calls, R>
): Effect.Effect<
  Connection<Serves, Calls>,
  Lifecycle.Failure | Lifecycle.IllegalTransition | Config.ConfigError,
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
      yield* Lifecycle.runHandshake(
        lifecycle,
        handshake.run(handshakePeer(peer, lifecycle, handshake.timeout)),
        handshake.timeout
      ).pipe(
        Effect.tapError((error) => error._tag === "IllegalTransition" ? Effect.void : fail(error))
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
      peer,
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
