/**
 * How a peer ends: `close` refuses new work, takes what is pending off the peer, interrupts handlers, writes what is
 * queued within the flush bound, ends the transport, and only then fails the callers of what was pending, in batches
 * (docs/peer.md, "Teardown"). The Scope's finalizer runs it; `Connection` runs its steps one by one to drain under a
 * policy first.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as PeerError from "../../PeerError.js"
import { detach } from "./detach.js"
import { shutdownError } from "./errors.js"
import { interruptHandlers } from "./inbound.js"
import type { State } from "./state.js"

/**
 * Ends the connection with `error` (the first reason given wins). Idempotent and uninterruptible. `closed` completes
 * once every caller of what was pending has its error.
 *
 * @internal
 */
export const close = (s: State, flush: Effect.Effect<void>) => (error: PeerError.Disconnect): Effect.Effect<void> =>
  Effect.gen(function*() {
    s.tornDown = true
    if (s.disconnect === undefined) s.disconnect = error
    // Off the table now, woken once the transport is ended: the other side starts exiting while they wake.
    const pending = detach(s, s.disconnect, false)
    yield* interruptHandlers(s)
    // Answers already queued (a `shutdown` result, say) still go out, within a bound.
    yield* Effect.timeoutOption(Effect.interruptible(flush), s.flushTimeout)
    yield* s.transport.end
    yield* pending.wake
    yield* Deferred.succeed(s.closed, s.disconnect)
  }).pipe(Effect.uninterruptible)

/**
 * What the Scope's finalizer closes with: a `ShutdownError` of phase `Scope`, `Interrupted` when the Scope closed
 * because of an interruption.
 *
 * @internal
 */
export const onScopeClose = (close: (error: PeerError.Disconnect) => Effect.Effect<void>) =>
(
  exit: Exit.Exit<unknown, unknown>
): Effect.Effect<void> => close(shutdownError(Exit.hasInterrupts(exit) ? "Interrupted" : "Stop", "Scope"))
