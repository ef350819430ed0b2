/**
 * Message framing behind one interface, with two codecs: `Content-Length` headers (seed 002, identical to LSP) and
 * newline-delimited JSON (what MCP uses over stdio). Pure: the decoders are incremental state machines over bytes.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * A framing problem the decoder cannot step over. Malformed headers are *not* errors: the decoder resynchronises at
 * the next `Content-Length:` and counts the skipped bytes (see `Decoder.skippedBytes`).
 *
 * @since 0.1.0
 * @category errors
 */
export class FramingError extends Schema.TaggedError<FramingError>("@lifeline/jsonrpc/FramingError")("FramingError", {
  reason: Schema.Literal(
    "HeaderTooLarge",
    "BodyTooLarge",
    "InvalidContentLength",
    "UnsupportedContentType",
    "TruncatedFrame"
  ),
  detail: Schema.String
}) {}

/**
 * Bounds that keep a hostile or broken peer from making the decoder buffer without limit.
 *
 * @since 0.1.0
 * @category models
 */
export interface Limits {
  /** Largest header block (or, for NDJSON, nothing: the body limit bounds a line). Default 8 KiB. */
  readonly maxHeaderBytes: number
  /** Largest message body. Default 64 MiB. */
  readonly maxBodyBytes: number
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const defaultLimits: Limits = { maxHeaderBytes: 8 * 1024, maxBodyBytes: 64 * 1024 * 1024 }

/**
 * What one `push` produced: every complete body in arrival order, then the error that stopped the decoder, if any.
 * Once an error is reported the decoder is spent: every later `push` reports it again and yields no frames.
 *
 * @since 0.1.0
 * @category models
 */
export interface DecodeStep {
  readonly frames: ReadonlyArray<Uint8Array>
  readonly error: FramingError | undefined
}

/**
 * An incremental decoder. Not thread-safe, not an Effect: the stream adapter owns one per run.
 *
 * @since 0.1.0
 * @category models
 */
export interface Decoder {
  /** Feeds the next chunk. Bodies that lie wholly inside `chunk` are returned as views on it, not copies. */
  readonly push: (chunk: Uint8Array) => DecodeStep
  /** The input ended: a `TruncatedFrame` error if a frame was cut off (bytes outside a frame are just skipped). */
  readonly end: () => FramingError | undefined
  /** Bytes skipped outside of any frame so far (garbage, stray output, blank lines). */
  readonly skippedBytes: () => number
}

/**
 * A framing codec.
 *
 * @since 0.1.0
 * @category models
 */
export interface Framing {
  readonly _tag: "ContentLength" | "Ndjson"
  /** Header and body in one buffer, so one write per message and messages never interleave. */
  readonly encode: (body: Uint8Array) => Uint8Array
  /** Same as `encode` for a JSON string, encoding UTF-8 straight into the frame buffer (no intermediate copy). */
  readonly encodeString: (json: string) => Uint8Array
  readonly unsafeMakeDecoder: (limits?: Partial<Limits>) => Decoder
}
