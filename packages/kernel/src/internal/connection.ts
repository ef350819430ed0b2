/**
 * The body of `Connection.make`: the peer behind its lifecycle gates, the one teardown every way of stopping runs,
 * and the handshake that makes it `Ready`.
 *
 * @internal
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
import * as Bounds from "../Bounds.js"
import * as Cancellation from "../Cancellation.js"
import type * as Connection from "../Connection.js"
import * as GracefulShutdown from "../GracefulShutdown.js"
import * as Lifecycle from "../Lifecycle.js"
import type * as Method from "../Method.js"
import * as Peer from "../Peer.js"
import * as PeerError from "../PeerError.js"
import * as PeerMetrics from "../PeerMetrics.js"
import * as ShutdownPolicy from "../ShutdownPolicy.js"
import { asFailure, handshakePeer, isFailure, nonNegative } from "./connectionHandshake.js"
import { detachPeer } from "./peer/detach.js"

/** @internal */
export const make = <Serves extends Method.Any, Calls extends Method.Any, R = never, E = never>(
  options: Connection.Options<Serves, Calls, R, E>
): Effect.Effect<
  Connection.Connection<Serves, Calls>,
  Lifecycle.Failure | E | Lifecycle.IllegalTransition | Config.ConfigError,
  Scope.Scope | R
> =>
  Effect.gen(function*() {
    const policy = yield* ShutdownPolicy.resolve(options.policy)
    const cancellation = Cancellation.spelling(options.cancellation ?? options.protocol.cancellation)
    const flushTimeout = Duration.fromInputUnsafe(options.flushTimeout ?? Bounds.flushTimeout)
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
            // The gate admits handshake requests until Ready: only the one that moves Starting on may run. A second
            // one is refused and leaves the running handshake alone (only the handshake's own outcome moves on).
            Effect.mapError(() =>
              RpcError.RpcError.invalidRequest(`${handshake.request}: the handshake is already running`)
            ),
            Effect.andThen(
              serve(params, context).pipe(
                Effect.tap(() => Effect.ignore(lifecycle.transition(Lifecycle.Ready(), { from: "Initializing" }))),
                Effect.tapError((error) =>
                  Effect.ignore(
                    lifecycle.transition(Lifecycle.Failed({ error: asFailure(error) }), { from: "Initializing" })
                  )
                )
              )
            )
          )
      }
    }

    const userGate = options.gate
    const peer = yield* Peer.make<Serves, Calls, R>({
      ...options,
      handlers: handlers as Peer.Handlers<Serves, R>,
      // The caller's own gate, when it gives one, is asked first: it refuses what the lifecycle would admit (an
      // application that drains while its lifecycle is still `Ready`, as a Hermes extension serving `shutdown` does).
      gate: {
        inbound: (method) => {
          const refused = userGate?.inbound(method)
          if (refused !== undefined) return refused
          const isHandshake = handshakeMessages.has(method)
          const state = lifecycle.unsafeState()
          // The side that initiates serves what the other side asks while the handshake runs.
          if (!accepting && !Lifecycle.isShuttingDown(state)) return undefined
          return Lifecycle.inboundGate(state, method, isHandshake)
        },
        inboundNotification: (method) => {
          if (userGate?.inboundNotification?.(method) === false) return false
          const state = lifecycle.unsafeState()
          if (Lifecycle.isShuttingDown(state)) return false
          return !accepting || state._tag === "Ready" || handshakeMessages.has(method)
        },
        // Open for the cancellations of what a teardown cut off, and only for them (see `cancelOnWire`).
        outbound: () => cancelling ? undefined : userGate?.outbound() ?? lifecycle.outboundGate()
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
     * Tells the other side, in the protocol's cancellation if it has one, that the calls a teardown cut off are
     * abandoned. In a fiber of its own, as the drain is, bounded by the flush timeout.
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

    const done = yield* Deferred.make<Connection.ShutdownReport>()
    const force = yield* Deferred.make<void>()
    let started = false

    /** The one teardown. Whoever calls it first runs it; everybody else waits for its report. */
    const teardown = (reason: Lifecycle.CloseReason | "Failed", how: ShutdownPolicy.Policy): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (started) return Effect.asVoid(Deferred.await(done))
        started = true
        return Effect.gen(function*() {
          const startedAt = yield* Clock.currentTimeMillis
          // How the drain ended: everything finished, its deadline passed, or a forced stop cut it short first.
          let drain: "Drained" | "DrainTimeout" | "Forced" = "Drained"
          if (how._tag === "Drain") {
            // In a fiber of its own: the teardown often runs in a finalizer of an interrupted fiber (SIGTERM through
            // runMain), where an interruptible wait would end at once. Joined uninterruptibly, the drain gets its
            // full deadline; `stopNow` (a second signal) is what cuts it short.
            const waited = yield* peer.awaitIdle.pipe(
              Effect.as("Drained" as const),
              Effect.raceFirst(Effect.as(Deferred.await(force), "Forced" as const)),
              Effect.timeoutOrElse({ duration: how.timeout, orElse: () => Effect.succeed("DrainTimeout" as const) }),
              Effect.interruptible,
              Effect.forkDetach,
              Effect.flatMap(Fiber.join),
              Effect.exit
            )
            drain = Exit.isSuccess(waited) ? waited.value : "DrainTimeout"
          }
          const drained = drain === "Drained"
          const phase = lifecycle.unsafeState()._tag
          const error = new PeerError.ShutdownError({
            reason: reason === "Failed"
              ? "Failed"
              : drain !== "Drained"
              ? drain
              : reason === "Interrupted"
              ? "Interrupted"
              : "Stop",
            phase
          })
          // Callers are woken only once the peer is closed, so the other side starts exiting while they wake
          // (docs/peer.md, "Teardown"); a forced stop wakes them at once, before their own fibers are interrupted.
          const pending = yield* detachPeer(peer, error)
          const forced = yield* Deferred.isDone(force)
          if (forced) yield* pending.wakeNow
          const cutOut = pending.cutOff
          yield* cancelOnWire(
            cutOut,
            error.reason === "DrainTimeout"
              ? `the drain deadline (${Duration.format(how._tag === "Drain" ? how.timeout : Duration.zero)}) passed`
              : error.reason === "Forced"
              ? "the stop was forced before the drain finished"
              : "the connection is shutting down"
          )
          const cutIn = yield* peer.interruptHandlers
          yield* peer.close(error)
          if (!forced) yield* pending.wake
          yield* Effect.ignore(lifecycle.transition(Lifecycle.Closed(), { from: "Closing" }))
          const report: Connection.ShutdownReport = {
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

    // A caller with a timeout moves the lifecycle itself (a later caller gets `AlreadyClosing` at once, whatever its
    // timeout), then waits for a detached teardown: on expiry only the wait ends (the teardown is uninterruptible, so
    // a plain timeout around it would wait for it anyway), and the stop goes on to its end.
    const stopFor = (
      reason: Lifecycle.CloseReason,
      stopOptions?: Connection.StopOptions
    ): Effect.Effect<Lifecycle.StopResult, PeerError.StopTimeout> => {
      if (stopOptions === undefined) return stopWith(reason, policy)
      const timeout = nonNegative(stopOptions.timeout)
      const begun = Effect.flatMap(
        lifecycle.beginStop(reason),
        (result): Effect.Effect<{ result: Lifecycle.StopResult; fiber: Fiber.Fiber<void> | undefined }> =>
          result === "Stopped"
            ? Effect.map(Effect.forkDetach(teardown(reason, policy)), (fiber) => ({ result, fiber }))
            : Effect.succeed({ result, fiber: undefined })
      )
      return Effect.flatMap(Effect.uninterruptible(begun), ({ fiber, result }) =>
        fiber === undefined
          ? Effect.succeed(result)
          : Effect.timeoutOrElse(Effect.as(Fiber.join(fiber), result), {
            duration: timeout,
            orElse: () => Effect.fail(new PeerError.StopTimeout({ timeoutMillis: Duration.toMillis(timeout) }))
          }))
    }

    return {
      peer: exposed,
      lifecycle,
      policy,
      stop: ((reason?: Lifecycle.CloseReason, stopOptions?: Connection.StopOptions) =>
        stopFor(reason ?? "Stop", stopOptions)) as Connection.Connection<Serves, Calls>["stop"],
      stopNow: (reason = "Stop") =>
        Effect.andThen(
          Deferred.succeed(force, void 0),
          stopWith(reason, ShutdownPolicy.FailFast())
        ),
      awaitShutdown: Deferred.await(done)
    }
  })
