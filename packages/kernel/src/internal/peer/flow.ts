/**
 * Flow control of inbound requests: at the answers bound (counted in `writer.ts`) the reader holds the next frame that
 * would be answered until they drain, and a hold (or a wait to queue an answer of its own) that lasts `stallTimeout`
 * ends the connection as unresponsive (docs/peer.md, "Answers the other side does not read").
 *
 * @internal
 */
import type * as Message from "@lifeline/jsonrpc/Message"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { peerClosed } from "./errors.js"
import { lose } from "./outbound.js"
import { answersFull, type State, waitFor } from "./state.js"

/** Whether handling the item may write an answer: a request, or an invalid message (answered -32600 or -32700). */
const answered = (item: Message.Classified): boolean => item._tag === "Request" || item._tag === "Invalid"

/**
 * Whether the reader must hold this frame before handling it. The bound is checked first: on the normal path this is
 * two comparisons per frame.
 *
 * @internal
 */
export const mustHold = (s: State, incoming: Message.Incoming): boolean =>
  answersFull(s) && (incoming._tag === "Single" ? answered(incoming.item) : incoming.items.some(answered))

/**
 * Holds the frame until answers drain below their bound, then handles it with `handle`; past `stallTimeout`, ends the
 * connection as unresponsive instead, and the reader with it.
 *
 * @internal
 */
export const hold = (s: State, handle: () => Effect.Effect<void>): Effect.Effect<void> =>
  Effect.suspend(() => {
    s.stats.readsHeld++
    const drained = waitFor(() => !answersFull(s), (waiter) => s.drainWaiters.push(waiter))
    return drained.pipe(
      Effect.timeoutOrElse({ duration: s.stallTimeout, orElse: () => unresponsive(s, drained) }),
      Effect.andThen(Effect.suspend(handle))
    )
  })

/**
 * The reader's wait for the frame it is handling (a refusal or an invalid message's answer waiting for room, a log
 * line), bounded by `stallTimeout`; a frame handled at once stays `Effect.void`, with nothing added.
 *
 * @internal
 */
export const bounded = (s: State, effect: Effect.Effect<void>): Effect.Effect<void> =>
  effect === Effect.void
    ? effect
    : Effect.timeoutOrElse(effect, { duration: s.stallTimeout, orElse: () => unresponsive(s, Effect.never) })

/**
 * Ends the connection as unresponsive, and the reader with it. While the connection is ending already (a drain or a
 * teardown, each with a bound of its own that ends the reader), it is not ours to end: the reader goes on with
 * `otherwise`, and pending calls keep the reason they will get.
 */
const unresponsive = (s: State, otherwise: Effect.Effect<void>): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (s.disconnect !== undefined) return otherwise
    s.stats.unresponsive++
    const detail = `the reader waited ${Duration.format(s.stallTimeout)} for the other side to read our answers ` +
      `while it sent requests (${s.pendingAnswers} answers, ${s.pendingAnswerBytes} bytes waiting)`
    return Effect.logError(`closing the connection as unresponsive: ${detail}`).pipe(
      Effect.andThen(lose(s, peerClosed("Unresponsive", detail))),
      // The reader ends here: what follows the held frame is never read.
      Effect.andThen(Effect.interrupt)
    )
  })
