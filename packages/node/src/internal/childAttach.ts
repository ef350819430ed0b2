/**
 * What talks to the child (a peer, a connection) attached to it: started in a Scope of its own that the stop sequence
 * closes, told when the child exits, and closed under its policy by the stop.
 *
 * @internal
 */
import type * as Connection from "@lifeline/kernel/Connection"
import type * as Lifecycle from "@lifeline/kernel/Lifecycle"
import type * as Method from "@lifeline/kernel/Method"
import * as Peer from "@lifeline/kernel/Peer"
import type * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import * as StopSequence from "@lifeline/process/StopSequence"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import type { Internal } from "./childProcess.js"
import { stopOptionsOf } from "./childStop.js"

/**
 * How the stop sequence closes what talks to the child: under its policy, and fail-fast. A plain peer closes the same
 * way both times (it has no policy): its pending calls fail, queued frames are flushed, stdin ends.
 *
 * @internal
 */
export interface Closing {
  readonly close: Effect.Effect<unknown>
  readonly closeNow: Effect.Effect<unknown>
  readonly policy: ShutdownPolicy.Policy | undefined
}

/**
 * How the stop sequence closes a connection: `stop` under its policy, `stopNow` when forced, each until the end of its
 * teardown. The reason is `Interrupted` when the stop comes from an interruption (a signal to the host, a Scope closed
 * by one: {@link Internal.isInterrupted}), `Stop` otherwise, as the connection's lifecycle and its `ShutdownError`s
 * tell it.
 *
 * @internal
 */
export const closingOf = (self: Internal) => (connection: Connection.Connection<any, any>): Closing => {
  const reason = (): Lifecycle.CloseReason => self.isInterrupted() ? "Interrupted" : "Stop"
  return {
    close: Effect.andThen(Effect.suspend(() => connection.stop(reason())), connection.awaitShutdown),
    closeNow: Effect.andThen(Effect.suspend(() => connection.stopNow(reason())), connection.awaitShutdown),
    policy: connection.policy
  }
}

/**
 * Starts what talks to the child (a peer, a connection) on its transport, in a Scope of its own that the stop
 * sequence closes in its close step: after the protocol shutdown request (which needs it), before the end of input and
 * the signals. When the child exits on its own, the connection is over: pending calls fail with `PeerExited`, and the
 * peer closes with it (a connection on top moves to `Failed`). An exit during the stop is expected: pending calls
 * still fail with `PeerExited`, and the stop closes the rest.
 *
 * @internal
 */
export const attach = <A, E, R>(
  self: Internal,
  start: Effect.Effect<A, E, R | Scope.Scope>,
  peerOf: (started: A) => Pick<Peer.Peer<any, any>, "failPending" | "close" | "refuseNew" | "closed">,
  shutdown: ((started: A) => Effect.Effect<unknown, unknown>) | undefined,
  closing?: ((started: A) => Closing) | undefined,
  flushTimeout?: Duration.Input | undefined
): Effect.Effect<A, E, Exclude<R, Scope.Scope>> =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    // With the exit the child's own Scope closed with: an interruption there is one here, for the peer's finalizer.
    const closeScope = Effect.suspend(() => Scope.close(scope, self.isInterrupted() ? Exit.interrupt() : Exit.void))
    self.steps.close = closeScope
    self.steps.closeNow = closeScope
    self.steps.flushTimeout = flushTimeout
    const started = yield* start.pipe(
      Scope.provide(scope),
      Effect.onError(() => closeScope)
    )
    if (shutdown !== undefined) self.steps.shutdown = shutdown(started)
    if (closing !== undefined) {
      const how = closing(started)
      // The Scope is closed after the close under the policy: its finalizers find the connection closed already.
      self.steps.close = Effect.andThen(how.close, closeScope)
      self.steps.closeNow = Effect.andThen(how.closeNow, closeScope)
      self.steps.policy = how.policy
    }
    const peer = peerOf(started)
    yield* self.onExit((error) => {
      if (self.isStopping()) return Effect.asVoid(peer.failPending(error))
      if (closing === undefined) return peer.close(error)
      // A connection closes itself once the transport ends (stdout ends at the exit), with `error`, and its teardown
      // interrupts the handlers still running and reports them as cut off; closing the peer here would interrupt them
      // first, unreported. A descendant that holds stdout open must not keep it open: closed after the grace at the
      // latest. Forked: the transport's end waits for these hooks.
      return Effect.andThen(
        Effect.andThen(peer.refuseNew(error), peer.failPending(error)),
        Effect.forkDetach(
          Effect.flatMap(
            Effect.timeoutOption(peer.closed, StopSequence.bounds(stopOptionsOf(self.settings.stop)).exitGrace),
            (closed) => Option.isNone(closed) ? peer.close(error) : Effect.void
          )
        )
      )
    })
    return started
  })

/**
 * @internal
 */
export const attachPeer = <Serves extends Method.Any, Calls extends Method.Any, R = never>(
  self: Internal,
  options: Peer.Options<Serves, Calls, R>,
  shutdown: ((peer: Peer.Peer<Serves, Calls>) => Effect.Effect<unknown, unknown>) | undefined
): Effect.Effect<Peer.Peer<Serves, Calls>, never, R> =>
  attach(self, Peer.make<Serves, Calls, R>(options), (peer) => peer, shutdown, undefined, options.flushTimeout)
