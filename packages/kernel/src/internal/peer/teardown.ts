/**
 * How a peer ends: `close` refuses new work, fails what is pending, interrupts handlers, writes what is queued within
 * the flush bound and ends the transport. The Scope's finalizer runs it; `Connection` runs its steps one by one to
 * drain under a policy first.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as PeerError from "../../PeerError.js"
import { shutdownError } from "./errors.js"
import { interruptHandlers } from "./inbound.js"
import { failPending } from "./outbound.js"
import type { State } from "./state.js"

/**
 * Ends the connection with `error` (the first reason given wins). Idempotent and uninterruptible.
 *
 * @internal
 */
export const close = (s: State, flush: Effect.Effect<void>) => (error: PeerError.Disconnect): Effect.Effect<void> =>
  Effect.gen(function*() {
    s.tornDown = true
    if (s.disconnect === undefined) s.disconnect = error
    failPending(s, s.disconnect, false)
    yield* interruptHandlers(s)
    // Answers already queued (a `shutdown` result, say) still go out, within a bound.
    yield* Effect.timeoutOption(Effect.interruptible(flush), s.flushTimeout)
    yield* s.transport.end
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
