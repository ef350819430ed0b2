/**
 * Newline-delimited JSON framing, as MCP uses over stdio: one message per line, each line ended by LF (CRLF is
 * tolerated: a CR right before the LF is not part of the body).
 *
 * Lines are sorted by their first byte that is not a space, tab or CR (a "blank"), so only that byte is inspected:
 *
 * - none (an empty or blank line): skipped;
 * - `{` or `[`: a frame (an object, or a batch) whose body runs from that byte to the terminator, returned even if it
 *   is not valid JSON — the message layer answers that with a parse error;
 * - anything else: a stray line (a `console.log` on stdout, a banner), skipped up to and including its LF.
 *
 * Every byte outside a body and its terminator (blank lines, leading blanks, stray lines with their LF) is counted in
 * `skippedBytes` as soon as it is read; skipping buffers nothing, so a stray line may be of any length. A frame line
 * fails with `BodyTooLarge` as soon as more than `maxBodyBytes` of its body are pending, without waiting for its LF (a
 * pending last CR is given the benefit of the doubt until the next byte); `maxHeaderBytes` is unused. A body inside
 * one chunk is a view on it, also when only its LF or CRLF comes later; one that spans chunks is copied once, when its
 * LF arrives, into an exact-size buffer. At `end()`, an unterminated frame line is a `TruncatedFrame` (a message is
 * complete only with its LF); unterminated blanks or stray text are just skipped.
 *
 * `encode` does not look inside the body: it must not contain a raw LF, which `JSON.stringify` never produces.
 *
 * @internal
 */
import type { Decoder, DecodeStep, Framing, Limits } from "../Framing.js"
import { allocate, concat, encodeJson, resolveLimits } from "./buffers.js"
import { FramingError } from "./framingError.js"

const LF = 10
const CR = 13
const SP = 32
const HT = 9
const OPEN_BRACE = 123
const OPEN_BRACKET = 91

/** At a line start, or after blanks only. */
const LINE_START = 0
/** Inside a frame line. */
const FRAME = 1
/** Inside a stray line. */
const STRAY = 2
const FAILED = 3

const EMPTY: ReadonlyArray<Uint8Array> = []

class NdjsonDecoder implements Decoder {
  readonly maxBodyBytes: number
  state = LINE_START
  error: FramingError | undefined = undefined
  skipped = 0
  pieces: Array<Uint8Array> = []
  pending = 0

  constructor(limits: Limits) {
    this.maxBodyBytes = limits.maxBodyBytes
  }

  push(chunk: Uint8Array): DecodeStep {
    if (this.error !== undefined) return { frames: EMPTY, error: this.error }
    const n = chunk.length
    let frames: Array<Uint8Array> | undefined
    let i = 0
    while (i < n) {
      const state = this.state
      if (state === FRAME) {
        const lf = chunk.indexOf(LF, i)
        if (lf === -1) {
          this.keep(chunk, i, n)
          this.checkPending(chunk[n - 1])
          break
        }
        const body = this.body(chunk, i, lf)
        if (body === undefined) break
        if (frames === undefined) frames = [body]
        else frames.push(body)
        i = lf + 1
        this.state = LINE_START
      } else if (state === LINE_START) {
        let k = i
        while (k < n) {
          const b = chunk[k]
          if (b !== SP && b !== HT && b !== CR) break
          k++
        }
        this.skipped += k - i
        if (k === n) break
        const b = chunk[k]
        if (b === OPEN_BRACE || b === OPEN_BRACKET) {
          this.state = FRAME
          i = k
        } else if (b === LF) {
          this.skipped++
          i = k + 1
        } else {
          this.state = STRAY
          i = k
        }
      } else if (state === STRAY) {
        const lf = chunk.indexOf(LF, i)
        const stop = lf === -1 ? n : lf + 1
        this.skipped += stop - i
        i = stop
        if (lf !== -1) this.state = LINE_START
      } else {
        break
      }
    }
    return { frames: frames ?? EMPTY, error: this.error }
  }

  keep(chunk: Uint8Array, from: number, to: number): void {
    this.pieces.push(from === 0 && to === chunk.length ? chunk : chunk.subarray(from, to))
    this.pending += to - from
  }

  /** Fails once the pending body cannot fit any more (a last CR may still turn out to be part of a CRLF). */
  checkPending(last: number): void {
    const excess = this.pending - this.maxBodyBytes
    if (excess > 1 || (excess === 1 && last !== CR)) {
      this.fail("BodyTooLarge", `A line exceeds the limit of ${this.maxBodyBytes} bytes`)
    }
  }

  /** The body of the line ending at `lf`, whose bytes before `from` are in `pieces`. */
  body(chunk: Uint8Array, from: number, lf: number): Uint8Array | undefined {
    const pieces = this.pieces
    let length = this.pending + lf - from
    if (lf > from) {
      if (chunk[lf - 1] === CR) length--
    } else {
      const piece = pieces[pieces.length - 1]
      if (piece[piece.length - 1] === CR) length--
    }
    if (length > this.maxBodyBytes) {
      this.fail("BodyTooLarge", `A line of ${length} bytes exceeds the limit of ${this.maxBodyBytes} bytes`)
      return undefined
    }
    if (pieces.length === 0) return chunk.subarray(from, from + length)
    this.pieces = []
    this.pending = 0
    // The body ended within its first chunk and only the terminator came later: still a view.
    if (pieces[0].length >= length) return pieces[0].subarray(0, length)
    if (lf > from) pieces.push(chunk.subarray(from, lf))
    return concat(pieces, length)
  }

  fail(reason: FramingError["reason"], detail: string): void {
    this.state = FAILED
    this.pieces = []
    this.pending = 0
    this.error = new FramingError({ reason, detail })
  }

  end(): FramingError | undefined {
    if (this.error !== undefined) return this.error
    if (this.state === FRAME) {
      this.fail("TruncatedFrame", `The input ended inside a line of ${this.pending} bytes`)
      return this.error
    }
    return undefined
  }

  skippedBytes(): number {
    return this.skipped
  }
}

/** @internal */
export const unsafeMakeDecoder = (limits?: Partial<Limits>): Decoder => {
  // A plain object of closures, so `const { push } = decoder` works.
  const decoder = new NdjsonDecoder(resolveLimits(limits))
  return {
    push: (chunk) => decoder.push(chunk),
    end: () => decoder.end(),
    skippedBytes: () => decoder.skippedBytes()
  }
}

/** @internal */
export const encode = (body: Uint8Array): Uint8Array => {
  const out = allocate(body.length + 1)
  out.set(body)
  out[body.length] = LF
  return out
}

const layout = (target: Uint8Array, bodyStart: number, bodyLength: number): number => {
  target[bodyStart + bodyLength] = LF
  return bodyStart
}

/** @internal */
export const encodeString = (json: string): Uint8Array => encodeJson(json, 0, 1, layout)

/** @internal */
export const framing: Framing = {
  _tag: "Ndjson",
  encode,
  encodeString,
  unsafeMakeDecoder
}
