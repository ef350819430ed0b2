/**
 * The reader fiber: bytes from `Transport.incoming` through the framing decoder (the loop `Framing.decode` uses too),
 * each frame parsed and classified, and handed to `inbound.ts`. It handles frames in plain code for as long as each is
 * done at once, and ends the connection when the input ends or fails.
 *
 * @internal
 */
import * as Framing from "@lifeline/jsonrpc/Framing"
import * as Message from "@lifeline/jsonrpc/Message"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { messageOf } from "./codecs.js"
import { peerClosed } from "./errors.js"
import { bounded, hold, mustHold } from "./flow.js"
import { onBatch, onItem } from "./inbound.js"
import { lose } from "./outbound.js"
import type { State } from "./state.js"

const onFrame = (s: State, body: Uint8Array): Effect.Effect<void> => {
  const incoming = Message.parse(body, s.messageLimits)
  // Answers over their bound: this frame waits, and so does the rest of the input (flow.ts).
  if (mustHold(s, incoming)) return hold(s, () => onIncoming(s, incoming))
  return onIncoming(s, incoming)
}

const onIncoming = (s: State, incoming: Message.Incoming): Effect.Effect<void> =>
  bounded(s, incoming._tag === "Single" ? onItem(s, incoming.item) : onBatch(s, incoming.items))

/**
 * Handles frames in order, in plain code for as long as each one is done at once (an answer matched, a handler
 * started, a frame queued), stepping into the Effect only for the frame that has to wait.
 */
const onFrames = (
  s: State,
  frames: ReadonlyArray<Uint8Array>,
  from: number,
  error: Framing.FramingError | undefined
): Effect.Effect<void, Framing.FramingError> => {
  for (let i = from; i < frames.length; i++) {
    const effect = onFrame(s, frames[i])
    if (effect !== Effect.void) {
      return i + 1 === frames.length && error === undefined
        ? effect
        : Effect.andThen(effect, Effect.suspend(() => onFrames(s, frames, i + 1, error)))
    }
  }
  return error === undefined ? Effect.void : Effect.fail(error)
}

/**
 * The reader fiber's loop. The framing decoder is driven here rather than through `Framing.decode`'s Channel: one
 * stage less per chunk.
 *
 * @internal
 */
export const run = (s: State): Effect.Effect<void> =>
  Effect.suspend(() => {
    const decoder = s.framing.unsafeMakeDecoder(s.limits)
    // Bytes the decoder skipped (stray output, a malformed header) are logged once per burst: when the frame after
    // them arrives, or the input ends. Never per byte or per chunk, so a peer that prints a lot costs one line.
    let reported = 0
    const skippedSince = (): number => decoder.skippedBytes() - reported
    const reportSkipped = (): Effect.Effect<void> => {
      const burst = skippedSince()
      reported += burst
      return Effect.logWarning(`skipped ${burst} bytes from the peer that were not frames`)
    }
    return s.transport.incoming.pipe(
      Stream.runForEachArray((chunks) =>
        Effect.suspend(() => {
          const step = Framing.decodeChunks(decoder, chunks)
          const handle = onFrames(s, step.frames, 0, step.error)
          return (step.frames.length > 0 || step.error !== undefined) && skippedSince() > 0
            ? Effect.andThen(reportSkipped(), handle) :
            handle
        })
      ),
      Effect.andThen(Effect.suspend(() => {
        const error = decoder.end()
        const end = error === undefined ? Effect.void : Effect.fail(error)
        return skippedSince() > 0 ? Effect.andThen(reportSkipped(), end) : end
      }))
    )
  }).pipe(
    Effect.matchCauseEffect({
      onSuccess: () => lose(s, peerClosed("TransportClosed")),
      onFailure: (cause) =>
        Cause.hasInterruptsOnly(cause) ? Effect.void : Effect.andThen(
          Effect.logWarning("the connection to the peer failed", cause),
          lose(s, peerClosed("TransportFailed", messageOf(Cause.squash(cause))))
        )
    })
  )
