/**
 * The byte channel a peer talks over: a stream of incoming chunks, a way to send bytes, and a half-close. Acquired in
 * a Scope; its finalizer releases whatever it holds (pipes, child processes, in-memory queues).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Stream from "effect/Stream"

/**
 * A transport failed: it was already closed, a read or a write failed, or the framing on top of it broke.
 *
 * @since 0.1.0
 * @category errors
 */
export class TransportError extends Schema.TaggedError<TransportError>("@lifeline/kernel/TransportError")(
  "TransportError",
  {
    reason: Schema.Literals(["Closed", "Read", "Write", "Framing"]),
    message: Schema.String,
    cause: Schema.optional(Schema.Defect())
  }
) {}

/**
 * The transport a peer uses. Framing is not the transport's business: the peer encodes each message into one buffer
 * (header and body together) and sends it whole, and decodes `incoming` with the framing it was given.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Transport } from "@lifeline/kernel"
 *
 * const hello = Effect.gen(function*() {
 *   const transport = yield* Transport.Transport
 *   yield* transport.send([new TextEncoder().encode("Content-Length: 2\r\n\r\n{}")])
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class Transport extends Context.Service<Transport, Transport.Service>()("@lifeline/kernel/Transport") {}

/**
 * @since 0.1.0
 */
export declare namespace Transport {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /** Byte chunks as they arrive; it ends when the other side closes its end. Run it at most once. */
    readonly incoming: Stream.Stream<Uint8Array, TransportError>
    /**
     * Writes the buffers in order, as one write where the transport can. It completes when the bytes are handed to
     * the operating system (or the other side's buffer), which is how a slow reader applies backpressure.
     */
    readonly send: (chunks: ReadonlyArray<Uint8Array>) => Effect.Effect<void, TransportError>
    /** Half-close: no more sends; `incoming` keeps flowing until the other side closes. Idempotent. */
    readonly end: Effect.Effect<void>
    /**
     * Optional fast path: hands `chunk` over at once when that needs no waiting, and says whether it did (`false`: use
     * `send`). The peer calls it only while nothing of its own is queued, so frames keep their order.
     */
    readonly unsafeTrySend?: ((chunk: Uint8Array) => boolean) | undefined
  }
}
