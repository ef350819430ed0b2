/**
 * The codecs' one error, in a module of its own so `contentLength.ts` and `ndjson.ts` can raise it without importing
 * `Framing.ts` (which imports them: a value cycle). `Framing.ts` re-exports the class itself.
 *
 * @internal
 */
import * as Schema from "effect/Schema"

/**
 * A framing problem the decoder cannot step over, in a frame the peer meant to send (a header block that has its
 * `Content-Length` name). Stray output and malformed headers are *not* errors, whatever their length: the decoder
 * resynchronises at the next `Content-Length:`, wherever it starts, and counts the skipped bytes (see
 * `Decoder.skippedBytes`). The list is in docs/protocol.md ("Framing: what the reader skips").
 *
 * @since 0.1.0
 * @category errors
 */
export class FramingError extends Schema.TaggedError<FramingError>("@lifeline/jsonrpc/FramingError")("FramingError", {
  reason: Schema.Literals([
    "HeaderTooLarge",
    "BodyTooLarge",
    "InvalidContentLength",
    "UnsupportedContentType",
    "TruncatedFrame"
  ]),
  detail: Schema.String
}) {
  /** What went wrong, for a log line or a `PeerClosed` that carries it on (the fields alone leave `message` empty). */
  override get message(): string {
    return `${this.reason}: ${this.detail}`
  }
}
