/**
 * `Content-Length` framing (docs/protocol.md, identical to LSP base protocol): an incremental byte-level decoder and a
 * one-buffer encoder.
 *
 * Accepted header block: one or more lines `name ":" value CRLF`, then an empty line (CRLF). `name` is an RFC 9110
 * token, compared case-insensitively; `value` is any bytes but CR and LF. The block must carry `Content-Length`: one
 * or more ASCII digits between optional spaces / tabs, the body length in bytes. It may carry `Content-Type`, whose
 * `charset` parameter, if present, must be `utf-8` or `utf8` (case-insensitive, optionally quoted). Every other header
 * is ignored. The whole block, blank line included, may be at most `maxHeaderBytes` long.
 *
 * Outcomes, decided as soon as the deciding byte arrives, so they do not depend on how the input is chunked:
 *
 * - A body wholly inside one chunk is returned as a view on that chunk (also when its header came in earlier
 *   chunks); a body that spans chunks is kept as a list of views and copied once, at its last byte, into a buffer of
 *   exactly its length.
 * - Fatal `FramingError`s, for a peer that speaks the protocol in a way we refuse (resynchronising would land inside
 *   its body): `BodyTooLarge` at the end of a `Content-Length` line whose number exceeds `maxBodyBytes`, however many
 *   digits it has, before any of the body is buffered; `InvalidContentLength` when two `Content-Length` lines of one
 *   block disagree (identical duplicates are accepted); `UnsupportedContentType` at the end of a `Content-Type` line
 *   with another charset; `HeaderTooLarge` when a block that is well-formed so far reaches `maxHeaderBytes` bytes
 *   without its blank line.
 * - Malformed header blocks are skipped, never fatal. A block is malformed at the first byte that cannot continue it:
 *   a byte that is not a token character in a name (a space, a bare LF, a missing colon), an LF in a value, a CR not
 *   followed by LF, a `Content-Length` value that is empty, negative, fractional, hexadecimal or otherwise not digits,
 *   or a blank line ending a block that has no `Content-Length` (a stray CRLF between frames is such a block).
 *
 * Resynchronisation: from the byte that made the block malformed, the decoder discards input until it has read
 * `Content-Length:` (ASCII, case-insensitive) at the start of a line, that is right after an LF. It never looks
 * back, so the bytes of the malformed block are never reused, and it buffers nothing while skipping, so garbage of any
 * length costs no memory and is not bound by `maxHeaderBytes`. The new header block starts at that `C`. Everything
 * from the first byte of the malformed block up to the `C` is added to `skippedBytes`: bytes count as soon as they are
 * known to be skipped, except a partial `Content-Length:` match at a line start, which counts once it fails; at
 * `end()` the trailing garbage counts too. So stray output such as a console log call ("hello\n") before a frame is
 * skipped exactly. Two limits follow from reading forward only: text without a trailing newline glues onto the next
 * header name and costs that frame, and a stray line that happens to be a well-formed header line ("X: y\r\n") is
 * not stray at all, it joins the next header block.
 *
 * `end()`: input that stops inside a body, or inside a header block that is well-formed so far (even a lone "oops"),
 * is a `TruncatedFrame`; input that stops while skipping is not an error.
 *
 * @internal
 */
import type { Decoder, DecodeStep, Framing, Limits } from "../Framing.js"
import { defaultLimits, FramingError } from "../Framing.js"

const LF = 10
const CR = 13
const SP = 32
const HT = 9
const COLON = 58

const asciiBytes = (s: string): Uint8Array => {
  const out = new Uint8Array(s.length)
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i)
  return out
}

/** Token characters (RFC 9110 `tchar`) mapped to their lower case; 0 for every other byte. */
const TOKEN_LOWER = ((): Uint8Array => {
  const table = new Uint8Array(256)
  const specials = "!#$%&'*+-.^_`|~"
  for (let b = 48; b <= 57; b++) table[b] = b
  for (let b = 97; b <= 122; b++) table[b] = b
  for (let b = 65; b <= 90; b++) table[b] = b + 32
  for (let i = 0; i < specials.length; i++) table[specials.charCodeAt(i)] = specials.charCodeAt(i)
  return table
})()

const CONTENT_LENGTH = asciiBytes("content-length")
const CONTENT_TYPE = asciiBytes("content-type")
const PREFIX = asciiBytes("Content-Length: ")

// Decoder states. Header states come first so `state <= LAST_HEADER_STATE` tests for "inside a header block".
const LINE_START = 0
const NAME = 1
const LENGTH_VALUE = 2
const TYPE_VALUE = 3
const OTHER_VALUE = 4
const LINE_LF = 5
const BLANK_LF = 6
const LAST_HEADER_STATE = 6
const BODY = 7
const SKIP_LINE = 8
const SKIP_MATCH = 9
const FAILED = 10

// Which header a name turned out to be, and the candidate bits while it is being read.
const IS_LENGTH = 1
const IS_TYPE = 2

const EMPTY: ReadonlyArray<Uint8Array> = []

/** @internal */
export const concat = (pieces: ReadonlyArray<Uint8Array>, length: number): Uint8Array => {
  const out = new Uint8Array(length)
  let offset = 0
  for (let i = 0; i < pieces.length && offset < length; i++) {
    const piece = pieces[i]
    const take = Math.min(piece.length, length - offset)
    out.set(take === piece.length ? piece : piece.subarray(0, take), offset)
    offset += take
  }
  return out
}

/** @internal */
export const resolveLimits = (limits: Partial<Limits> | undefined): Limits => {
  const maxHeaderBytes = limits?.maxHeaderBytes ?? defaultLimits.maxHeaderBytes
  const maxBodyBytes = limits?.maxBodyBytes ?? defaultLimits.maxBodyBytes
  return {
    maxHeaderBytes: Math.max(0, Math.floor(maxHeaderBytes)),
    maxBodyBytes: Math.max(0, Math.floor(maxBodyBytes))
  }
}

/** `charset` of a `Content-Type` value, lower-cased and unquoted, or `undefined` when it has none. */
const charsetOf = (value: string): string | undefined => {
  const params = value.split(";")
  let charset: string | undefined
  for (let i = 1; i < params.length; i++) {
    const param = params[i]
    const eq = param.indexOf("=")
    if (eq === -1 || param.slice(0, eq).trim().toLowerCase() !== "charset") continue
    let v = param.slice(eq + 1).trim()
    if (v.length >= 2 && v.startsWith("\"") && v.endsWith("\"")) v = v.slice(1, -1)
    v = v.toLowerCase()
    if (charset === undefined || charset === "utf-8" || charset === "utf8") charset = v
  }
  return charset
}

class ContentLengthDecoder implements Decoder {
  readonly maxHeaderBytes: number
  readonly maxBodyBytes: number
  state = LINE_START
  error: FramingError | undefined = undefined
  /** Bytes pushed before the current chunk: absolute position = `consumed + index`. */
  consumed = 0
  skipped = 0
  /** Absolute position of the first byte of the current (or malformed) header block. */
  blockStart = 0
  contentLength = -1
  // Per header line.
  nameLength = 0
  candidates = 0
  kind = 0
  /** 0 before the digits of a `Content-Length` value, 1 inside them, 2 after them. */
  phase = 0
  /** The value read so far, clamped to `maxBodyBytes + 1`. */
  value = 0
  contentType = ""
  /** While skipping: how many bytes of `content-length:` have matched at the current line start. */
  matched = 0
  // Body.
  remaining = 0
  pieces: Array<Uint8Array> = []

  constructor(limits: Limits) {
    this.maxHeaderBytes = limits.maxHeaderBytes
    this.maxBodyBytes = limits.maxBodyBytes
  }

  push(chunk: Uint8Array): DecodeStep {
    if (this.error !== undefined) return { frames: EMPTY, error: this.error }
    const n = chunk.length
    const base = this.consumed
    this.consumed = base + n
    let frames: Array<Uint8Array> | undefined
    let i = 0
    for (;;) {
      const state = this.state
      if (state === BODY) {
        const remaining = this.remaining
        const available = n - i
        if (remaining <= available) {
          let body: Uint8Array
          if (this.pieces.length === 0) {
            body = chunk.subarray(i, i + remaining)
          } else {
            this.pieces.push(chunk.subarray(i, i + remaining))
            body = concat(this.pieces, this.contentLength)
            this.pieces = []
          }
          if (frames === undefined) frames = [body]
          else frames.push(body)
          i += remaining
          this.state = LINE_START
          this.blockStart = base + i
          this.contentLength = -1
          continue
        }
        if (available > 0) this.pieces.push(i === 0 ? chunk : chunk.subarray(i))
        this.remaining = remaining - available
        break
      }
      if (i >= n) break
      if (state <= LAST_HEADER_STATE) {
        const limit = this.blockStart + this.maxHeaderBytes - base
        if (limit <= i) {
          this.fail("HeaderTooLarge", `The header block exceeds ${this.maxHeaderBytes} bytes`)
          break
        }
        i = this.header(chunk, i, limit < n ? limit : n)
        if (this.state === FAILED) break
      } else if (state === SKIP_LINE) {
        const lf = chunk.indexOf(LF, i)
        if (lf === -1) break
        i = lf + 1
        this.state = SKIP_MATCH
        this.matched = 0
      } else if (state === SKIP_MATCH) {
        i = this.skipMatch(chunk, i, n, base)
      } else {
        break
      }
    }
    return { frames: frames ?? EMPTY, error: this.error }
  }

  /** Reads header bytes in `[i, end)`; returns where it stopped (at `end`, or after the blank line, or at a trigger). */
  header(c: Uint8Array, i: number, end: number): number {
    let state = this.state
    while (i < end) {
      switch (state) {
        case LINE_START: {
          const b = c[i]
          if (b === CR) {
            state = BLANK_LF
            i++
          } else if (TOKEN_LOWER[b] !== 0) {
            this.nameLength = 0
            this.candidates = IS_LENGTH | IS_TYPE
            state = NAME
          } else {
            return this.malformed(i)
          }
          break
        }
        case NAME: {
          let nameLength = this.nameLength
          let candidates = this.candidates
          if ((candidates & IS_LENGTH) !== 0) {
            // Nearly every name is Content-Length: match it without tracking Content-Type. Before their ninth byte
            // the two names agree, so a mismatch there leaves Content-Type a candidate.
            while (i < end && nameLength < CONTENT_LENGTH.length && TOKEN_LOWER[c[i]] === CONTENT_LENGTH[nameLength]) {
              nameLength++
              i++
            }
            if (nameLength > 8) candidates = IS_LENGTH
          }
          while (i < end) {
            const b = c[i]
            const lower = TOKEN_LOWER[b]
            if (lower === 0) {
              if (b !== COLON) return this.malformed(i)
              i++
              if ((candidates & IS_LENGTH) !== 0 && nameLength === CONTENT_LENGTH.length) {
                this.phase = 0
                this.value = 0
                state = LENGTH_VALUE
              } else if ((candidates & IS_TYPE) !== 0 && nameLength === CONTENT_TYPE.length) {
                this.contentType = ""
                state = TYPE_VALUE
              } else {
                state = OTHER_VALUE
              }
              break
            }
            if (candidates !== 0) {
              if (CONTENT_LENGTH[nameLength] !== lower) candidates &= ~IS_LENGTH
              if (CONTENT_TYPE[nameLength] !== lower) candidates &= ~IS_TYPE
            }
            nameLength++
            i++
          }
          this.nameLength = nameLength
          this.candidates = candidates
          break
        }
        case LENGTH_VALUE: {
          let phase = this.phase
          let value = this.value
          const cap = this.maxBodyBytes + 1
          while (i < end) {
            const b = c[i]
            const digit = b - 48
            if (digit >= 0 && digit <= 9) {
              if (phase === 2) return this.malformed(i)
              phase = 1
              value = value * 10 + digit
              if (value > cap) value = cap
            } else if (b === SP || b === HT) {
              if (phase === 1) phase = 2
            } else if (b === CR && phase !== 0) {
              this.kind = IS_LENGTH
              state = LINE_LF
              i++
              break
            } else {
              return this.malformed(i)
            }
            i++
          }
          this.phase = phase
          this.value = value
          break
        }
        case TYPE_VALUE: {
          let value = this.contentType
          while (i < end) {
            const b = c[i]
            if (b === CR) {
              this.kind = IS_TYPE
              state = LINE_LF
              i++
              break
            }
            if (b === LF) return this.malformed(i)
            value += String.fromCharCode(b)
            i++
          }
          this.contentType = value
          break
        }
        case OTHER_VALUE: {
          while (i < end) {
            const b = c[i]
            if (b === CR) {
              this.kind = 0
              state = LINE_LF
              i++
              break
            }
            if (b === LF) return this.malformed(i)
            i++
          }
          break
        }
        case LINE_LF: {
          if (c[i] !== LF) return this.malformed(i)
          i++
          if (this.kind === IS_LENGTH) {
            const value = this.value
            if (value > this.maxBodyBytes) {
              this.fail("BodyTooLarge", `Content-Length exceeds the limit of ${this.maxBodyBytes} bytes`)
              return i
            }
            if (this.contentLength !== -1 && this.contentLength !== value) {
              this.fail(
                "InvalidContentLength",
                `Conflicting Content-Length headers: ${this.contentLength} and ${value}`
              )
              return i
            }
            this.contentLength = value
          } else if (this.kind === IS_TYPE) {
            const charset = charsetOf(this.contentType)
            if (charset !== undefined && charset !== "utf-8" && charset !== "utf8") {
              this.fail("UnsupportedContentType", `Unsupported Content-Type: ${this.contentType.trim()}`)
              return i
            }
          }
          state = LINE_START
          break
        }
        default: {
          // BLANK_LF
          if (c[i] !== LF || this.contentLength === -1) return this.malformed(i)
          this.state = BODY
          this.remaining = this.contentLength
          return i + 1
        }
      }
    }
    this.state = state
    return i
  }

  /** Matches `content-length:` at line starts; on a match the header block restarts at its `C`. */
  skipMatch(c: Uint8Array, i: number, n: number, base: number): number {
    let matched = this.matched
    while (i < n) {
      const b = c[i]
      if (matched === CONTENT_LENGTH.length ? b === COLON : TOKEN_LOWER[b] === CONTENT_LENGTH[matched]) {
        matched++
        i++
        if (matched > CONTENT_LENGTH.length) {
          const start = base + i - matched
          this.skipped += start - this.blockStart
          this.blockStart = start
          this.contentLength = -1
          this.phase = 0
          this.value = 0
          this.state = LENGTH_VALUE
          return i
        }
      } else if (b === LF) {
        matched = 0
        i++
      } else {
        this.state = SKIP_LINE
        return i + 1
      }
    }
    this.matched = matched
    return i
  }

  /** Abandons the current block; `i` (the trigger) is read again by `SKIP_LINE`, so an LF there starts a line. */
  malformed(i: number): number {
    this.state = SKIP_LINE
    this.contentLength = -1
    this.contentType = ""
    return i
  }

  fail(reason: FramingError["reason"], detail: string): void {
    this.state = FAILED
    this.pieces = []
    this.error = new FramingError({ reason, detail })
  }

  end(): FramingError | undefined {
    if (this.error !== undefined) return this.error
    const state = this.state
    if (state === BODY) {
      const got = this.contentLength - this.remaining
      this.fail("TruncatedFrame", `The input ended ${got} bytes into a body of ${this.contentLength} bytes`)
      return this.error
    }
    if (state <= LAST_HEADER_STATE) {
      if (this.consumed > this.blockStart) {
        this.fail("TruncatedFrame", `The input ended inside a header block`)
      }
      return this.error
    }
    // Skipping: the trailing garbage, including a partial `Content-Length:`, is skipped for good.
    this.skipped += this.consumed - this.blockStart
    this.blockStart = this.consumed
    this.state = LINE_START
    return undefined
  }

  skippedBytes(): number {
    const state = this.state
    if (state === SKIP_LINE) return this.skipped + this.consumed - this.blockStart
    if (state === SKIP_MATCH) return this.skipped + this.consumed - this.blockStart - this.matched
    return this.skipped
  }
}

/** @internal */
export const unsafeMakeDecoder = (limits?: Partial<Limits>): Decoder => {
  // A plain object of closures, so `const { push } = decoder` works; the extra call measured as free.
  const decoder = new ContentLengthDecoder(resolveLimits(limits))
  return {
    push: (chunk) => decoder.push(chunk),
    end: () => decoder.end(),
    skippedBytes: () => decoder.skippedBytes()
  }
}

// Small frames are carved out of a shared slab: a fresh typed array above 64 bytes lives off the V8 heap and costs
// about half a microsecond to allocate, more than encoding a 200-byte message. Views retain their slab (64 KiB).
const SLAB_BYTES = 64 * 1024
const SLAB_MAX_FRAME = 8 * 1024
let slab = new Uint8Array(SLAB_BYTES)
let slabOffset = 0

/** @internal */
export const allocate = (length: number): Uint8Array => {
  if (length > SLAB_MAX_FRAME) return new Uint8Array(length)
  if (slabOffset + length > SLAB_BYTES) {
    slab = new Uint8Array(SLAB_BYTES)
    slabOffset = 0
  }
  const out = new Uint8Array(slab.buffer, slabOffset, length)
  slabOffset = (slabOffset + length + 7) & ~7
  return out
}

const textEncoder = new TextEncoder()
let scratch = new Uint8Array(SLAB_BYTES)

/**
 * Encodes `json` as UTF-8 after `headerRoom` free bytes and calls `frame` to write the header (ending right before the
 * body) and the trailer; `frame` returns where the frame starts. The byte length is unknown until the string is
 * encoded, so it is encoded once into room for the worst case (3 bytes per UTF-16 unit): in the slab for small frames,
 * whose unused room goes to the next frame, and in a reused scratch buffer, copied once, for large ones. The encode
 * rows of bench/framing.ts compare this with
 * counting the UTF-8 bytes first to allocate exactly (3-4x slower for 200 B, 2x for 64 KiB) and with
 * `TextEncoder.encode` plus a copy (about 10x slower for 200 B, 1.5x for 64 KiB).
 *
 * @internal
 */
export const encodeJson = (
  json: string,
  headerRoom: number,
  trailer: number,
  frame: (target: Uint8Array, bodyStart: number, bodyLength: number) => number
): Uint8Array => {
  const worst = headerRoom + json.length * 3 + trailer
  if (worst <= SLAB_MAX_FRAME) {
    if (slabOffset + worst > SLAB_BYTES) {
      slab = new Uint8Array(SLAB_BYTES)
      slabOffset = 0
    }
    const bodyStart = slabOffset + headerRoom
    const written = textEncoder.encodeInto(json, slab.subarray(bodyStart, bodyStart + json.length * 3)).written
    const start = frame(slab, bodyStart, written)
    const end = bodyStart + written + trailer
    slabOffset = (end + 7) & ~7
    return new Uint8Array(slab.buffer, start, end - start)
  }
  if (scratch.length < worst) scratch = new Uint8Array(Math.max(worst, scratch.length * 2))
  const written = textEncoder.encodeInto(json, scratch.subarray(headerRoom, headerRoom + json.length * 3)).written
  const start = frame(scratch, headerRoom, written)
  return scratch.slice(start, headerRoom + written + trailer)
}

const digitCount = (n: number): number => {
  let digits = 1
  while (n >= 10) {
    n = Math.floor(n / 10)
    digits++
  }
  return digits
}

/** Writes `Content-Length: <length>\r\n\r\n` ending right before `bodyStart`; returns where it starts. */
const writeHeader = (target: Uint8Array, bodyStart: number, length: number): number => {
  const start = bodyStart - PREFIX.length - digitCount(length) - 4
  for (let k = 0; k < PREFIX.length; k++) target[start + k] = PREFIX[k]
  let p = bodyStart - 4
  target[p] = CR
  target[p + 1] = LF
  target[p + 2] = CR
  target[p + 3] = LF
  let v = length
  do {
    const q = Math.floor(v / 10)
    target[--p] = 48 + v - q * 10
    v = q
  } while (v > 0)
  return start
}

const HEADER_ROOM = PREFIX.length + 16 + 4

/** @internal */
export const encode = (body: Uint8Array): Uint8Array => {
  const headerLength = PREFIX.length + digitCount(body.length) + 4
  const out = allocate(headerLength + body.length)
  writeHeader(out, headerLength, body.length)
  out.set(body, headerLength)
  return out
}

const layout = (target: Uint8Array, bodyStart: number, bodyLength: number): number =>
  writeHeader(target, bodyStart, bodyLength)

/** @internal */
export const encodeString = (json: string): Uint8Array => encodeJson(json, HEADER_ROOM, 0, layout)

/** @internal */
export const framing: Framing = {
  _tag: "ContentLength",
  encode,
  encodeString,
  unsafeMakeDecoder
}
