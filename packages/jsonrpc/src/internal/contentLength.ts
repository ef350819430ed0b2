/**
 * `Content-Length` framing (docs/protocol.md, identical to LSP base protocol): an incremental byte-level decoder and a
 * one-buffer encoder.
 *
 * Accepted header block: one or more lines `name ":" value CRLF`, then an empty line (CRLF). `name` is an RFC 9110
 * token, compared case-insensitively; `value` is any bytes but CR and LF. The block must carry `Content-Length`: one
 * or more ASCII digits between optional spaces / tabs, the body length in bytes. It may carry `Content-Type`, whose
 * `charset` parameter, if present, must be `utf-8` or `utf8` (case-insensitive, optionally quoted). Every other header
 * is ignored.
 *
 * A block commits at its `Content-Length` name: from there on it is a frame the peer meant to send, and only a
 * committed block can be fatal. Lines before that name (a `Content-Type`, others) belong to the block if it commits
 * and are stray output if it does not. Outcomes are decided as soon as the deciding byte arrives, so they do not
 * depend on how the input is chunked:
 *
 * - A body wholly inside one chunk is returned as a view on that chunk (also when its header came in earlier
 *   chunks); a body that spans chunks is kept as a list of views and copied once, at its last byte, into a buffer of
 *   exactly its length.
 * - Fatal `FramingError`s, for a peer that speaks the protocol in a way we refuse (resynchronising would land inside
 *   its body): `BodyTooLarge` at the end of a `Content-Length` line whose number exceeds `maxBodyBytes`, however many
 *   digits it has, before any of the body is buffered; `InvalidContentLength` when two `Content-Length` lines of one
 *   block disagree (identical duplicates are accepted); `UnsupportedContentType` for another charset, at the end of
 *   the `Content-Type` line or, when that line came first, at the `Content-Length` name; `HeaderTooLarge` when a
 *   committed block, counted from its `Content-Length` line, reaches `maxHeaderBytes` bytes without its blank line.
 * - Everything else is skipped, never fatal. A block is malformed at the first byte that cannot continue it: a byte
 *   that is not a token character in a name (a space, a bare LF, a missing colon), an LF in a value, a CR not followed
 *   by LF, a `Content-Length` value that is empty, negative, fractional, hexadecimal or otherwise not digits, or a
 *   blank line ending a block that has no `Content-Length` (a stray CRLF between frames is such a block). A block
 *   that reaches `maxHeaderBytes` bytes before its `Content-Length` name is stray output as well (a hex dump).
 *
 * Resynchronisation: outside a committed block (while skipping, and inside a block before it commits) the decoder
 * looks for `Content-Length:` (ASCII, case-insensitive) wherever it starts, not only at a line start. When it is
 * found, everything from the first byte of the malformed or uncommitted block up to its `C` is skipped, and a block
 * that commits at once starts at that `C`. So text without a trailing newline (a progress line "50%") that glues onto
 * the next header costs its own bytes only, also when it looks like the start of a header ("note: 50%"). The search
 * is a rolling match over every byte, carried across chunks (`content-length` has no prefix that is also its suffix,
 * so a failed match restarts at 0, or at 1 on a `c`): one table look-up per byte, no look-back, nothing buffered, so
 * stray output of any length costs O(n) time and no memory. It never looks back: a committed block that turns out
 * malformed is not searched again, the search starts at the byte that made it malformed. Bytes count in
 * `skippedBytes` as soon as they are known to be skipped, except a partial match, which counts once it fails; at
 * `end()` the trailing stray output counts too. What reading forward implies: a stray line that is a well-formed
 * header line ("X: y\r\n") is not stray at all, it joins the next header block (a stray `Content-Type` line with
 * another charset fails that block); and in a block before its `Content-Length` line, a header whose name ends in
 * `content-length` (`X-Content-Length:`) is read as stray text glued to a `Content-Length` header.
 *
 * The tables it reads bytes with (token characters, the names it looks for) are in `contentLengthTables.ts`, the
 * encoder in `contentLengthEncoder.ts`, the byte helpers it shares with `ndjson.ts` in `buffers.ts`.
 *
 * `end()`: input that stops inside a body or a committed header block is a `TruncatedFrame`; anywhere else (while
 * skipping, or in a block before its `Content-Length` name, even a lone "oops") the rest is skipped, not an error.
 *
 * @internal
 */
import type { Decoder, DecodeStep, Framing, Limits } from "../Framing.js"
import { concat, resolveLimits } from "./buffers.js"
import { encode, encodeString } from "./contentLengthEncoder.js"
import { charsetOf, CONTENT_LENGTH, CONTENT_TYPE, NAME_LENGTH, SEARCH, TOKEN_LOWER } from "./contentLengthTables.js"
import { FramingError } from "./framingError.js"

const LF = 10
const CR = 13
const SP = 32
const HT = 9
const COLON = 58
const LOWER_C = 99

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
const SKIP = 8
const FAILED = 9

// Which header a name turned out to be, and the candidate bits while it is being read.
const IS_LENGTH = 1
const IS_TYPE = 2

const EMPTY: ReadonlyArray<Uint8Array> = []

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
  /** Whether the current block has its `Content-Length` name, and where `maxHeaderBytes` counts from. */
  committed = false
  limitStart = 0
  contentLength = -1
  /** The detail of an unsupported `Content-Type` read before the block committed; fatal once it does. */
  badType = ""
  // Per header line.
  nameLength = 0
  candidates = 0
  kind = 0
  /** 0 before the digits of a `Content-Length` value, 1 inside them, 2 after them. */
  phase = 0
  /** The value read so far, clamped to `maxBodyBytes + 1`. */
  value = 0
  contentType = ""
  /** The rolling search outside a committed block: how many bytes of `content-length:` end at the last byte read. */
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
          this.blockStart = this.limitStart = base + i
          this.committed = false
          this.contentLength = -1
          continue
        }
        if (available > 0) this.pieces.push(i === 0 ? chunk : chunk.subarray(i))
        this.remaining = remaining - available
        break
      }
      if (i >= n) break
      if (state <= LAST_HEADER_STATE) {
        const limit = this.limitStart + this.maxHeaderBytes - base
        if (limit <= i) {
          if (this.committed) {
            this.fail("HeaderTooLarge", `The header block exceeds ${this.maxHeaderBytes} bytes`)
            break
          }
          // No `Content-Length` name yet: stray output, however long (a hex dump). The search goes on from here.
          this.malformed(i, this.searchState())
          continue
        }
        i = this.header(chunk, i, limit < n ? limit : n, base)
        if (this.state === FAILED) break
      } else if (state === SKIP) {
        i = this.skip(chunk, i, n, base)
      } else {
        break
      }
    }
    return { frames: frames ?? EMPTY, error: this.error }
  }

  /** Reads header bytes in `[i, end)`; returns where it stopped (at `end`, or after the blank line, or at a trigger). */
  header(c: Uint8Array, i: number, end: number, base: number): number {
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
            return this.malformed(i, 0)
          }
          break
        }
        case NAME: {
          let nameLength = this.nameLength
          let candidates = this.candidates
          if ((candidates & IS_LENGTH) !== 0) {
            // Nearly every name is Content-Length: match it without tracking Content-Type. Before their ninth byte
            // the two names agree, so a mismatch there leaves Content-Type a candidate.
            while (i < end && nameLength < NAME_LENGTH && TOKEN_LOWER[c[i]] === CONTENT_LENGTH[nameLength]) {
              nameLength++
              i++
            }
            if (nameLength > 8) candidates = IS_LENGTH
          }
          // The search state: while the name still matches `content-length` from its start, that is its length.
          let matched = (candidates & IS_LENGTH) !== 0 ? nameLength : this.matched
          while (i < end) {
            const b = c[i]
            const lower = TOKEN_LOWER[b]
            if (lower === 0) {
              if (b !== COLON) return this.malformed(i, matched)
              i++
              if ((candidates & IS_LENGTH) !== 0 && nameLength === NAME_LENGTH) {
                if (!this.committed && this.commit(base + i - NAME_LENGTH - 1)) return i
                this.phase = 0
                this.value = 0
                state = LENGTH_VALUE
              } else if (!this.committed && matched === NAME_LENGTH) {
                // Stray text glued to a `Content-Length` name: the block starts again at its `C`.
                return this.restart(base, i - NAME_LENGTH - 1, i)
              } else if ((candidates & IS_TYPE) !== 0 && nameLength === CONTENT_TYPE.length) {
                this.contentType = ""
                this.matched = 0
                state = TYPE_VALUE
              } else {
                this.matched = 0
                state = OTHER_VALUE
              }
              break
            }
            if (candidates !== 0) {
              if (CONTENT_LENGTH[nameLength] !== lower) candidates &= ~IS_LENGTH
              if (CONTENT_TYPE[nameLength] !== lower) candidates &= ~IS_TYPE
            }
            matched = lower === SEARCH[matched] ? matched + 1 : lower === LOWER_C ? 1 : 0
            nameLength++
            i++
          }
          this.nameLength = nameLength
          this.candidates = candidates
          this.matched = matched
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
              if (phase === 2) return this.malformed(i, 0)
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
              return this.malformed(i, 0)
            }
            i++
          }
          this.phase = phase
          this.value = value
          break
        }
        case TYPE_VALUE: {
          let value = this.contentType
          let matched = this.matched
          const searching = !this.committed
          while (i < end) {
            const b = c[i]
            if (b === CR) {
              this.kind = IS_TYPE
              state = LINE_LF
              i++
              break
            }
            if (b === LF) return this.malformed(i, 0)
            if (searching) {
              if (b === COLON && matched === NAME_LENGTH) return this.restart(base, i - NAME_LENGTH, i + 1)
              const lower = TOKEN_LOWER[b]
              matched = lower === SEARCH[matched] ? matched + 1 : lower === LOWER_C ? 1 : 0
            }
            value += String.fromCharCode(b)
            i++
          }
          this.contentType = value
          this.matched = matched
          break
        }
        case OTHER_VALUE: {
          if (this.committed) {
            while (i < end) {
              const b = c[i]
              if (b === CR) break
              if (b === LF) return this.malformed(i, 0)
              i++
            }
          } else {
            let matched = this.matched
            while (i < end) {
              const b = c[i]
              if (b === CR) break
              if (b === LF) return this.malformed(i, 0)
              if (b === COLON && matched === NAME_LENGTH) return this.restart(base, i - NAME_LENGTH, i + 1)
              const lower = TOKEN_LOWER[b]
              matched = lower === SEARCH[matched] ? matched + 1 : lower === LOWER_C ? 1 : 0
              i++
            }
            this.matched = matched
          }
          if (i < end) {
            this.kind = 0
            state = LINE_LF
            i++
          }
          break
        }
        case LINE_LF: {
          if (c[i] !== LF) return this.malformed(i, 0)
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
              const detail = `Unsupported Content-Type: ${this.contentType.trim()}`
              // Before the block commits, the line may yet be stray output: refused only if a frame follows.
              if (!this.committed) {
                this.badType = detail
              } else {
                this.fail("UnsupportedContentType", detail)
                return i
              }
            }
          }
          state = LINE_START
          break
        }
        default: {
          // BLANK_LF
          if (c[i] !== LF || this.contentLength === -1) return this.malformed(i, 0)
          this.state = BODY
          this.remaining = this.contentLength
          return i + 1
        }
      }
    }
    this.state = state
    return i
  }

  /** The search state where the block is now (only meaningful before it commits). */
  searchState(): number {
    const state = this.state
    if (state === NAME) return (this.candidates & IS_LENGTH) !== 0 ? this.nameLength : this.matched
    return state === TYPE_VALUE || state === OTHER_VALUE ? this.matched : 0
  }

  /**
   * The block gets its `Content-Length` name at `start`: `maxHeaderBytes` counts from there. Returns true when that
   * fails the block (an unsupported `Content-Type` came before).
   */
  commit(start: number): boolean {
    this.committed = true
    this.limitStart = start
    if (this.badType === "") return false
    this.fail("UnsupportedContentType", this.badType)
    return true
  }

  /**
   * Skips everything before `c`, the `C` of a `Content-Length:` found by the search (relative to the chunk that starts
   * at `base`, so possibly negative); reading goes on at `i`.
   */
  restart(base: number, c: number, i: number): number {
    const start = base + c
    if (i - c > this.maxHeaderBytes) {
      this.fail("HeaderTooLarge", `The header block exceeds ${this.maxHeaderBytes} bytes`)
      return i
    }
    this.skipped += start - this.blockStart
    this.blockStart = start
    this.committed = true
    this.limitStart = start
    this.badType = ""
    this.contentLength = -1
    this.phase = 0
    this.value = 0
    this.state = LENGTH_VALUE
    return i
  }

  /** Skips until the search finds `content-length:`; a match can span any number of chunks. */
  skip(c: Uint8Array, i: number, n: number, base: number): number {
    let matched = this.matched
    while (i < n) {
      if (matched === 0) {
        // Nothing matched: only a `c` or `C` can start a match.
        while (i < n && (c[i] | 0x20) !== LOWER_C) i++
        if (i === n) break
      }
      const b = c[i]
      i++
      if (b === COLON && matched === NAME_LENGTH) return this.restart(base, i - NAME_LENGTH - 1, i)
      const lower = TOKEN_LOWER[b]
      matched = lower === SEARCH[matched] ? matched + 1 : lower === LOWER_C ? 1 : 0
    }
    this.matched = matched
    return i
  }

  /**
   * Abandons the current block at `i` (the trigger), which the search reads next, so a `Content-Length:` may start
   * there; `matched` is the search state before it (0 in a committed block: the search starts afresh at the trigger).
   */
  malformed(i: number, matched: number): number {
    this.state = SKIP
    this.matched = this.committed ? 0 : matched
    this.committed = false
    this.badType = ""
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
    if (state <= LAST_HEADER_STATE && this.committed) {
      this.fail("TruncatedFrame", `The input ended inside a header block`)
      return this.error
    }
    // Skipping, or a block that never got its `Content-Length` name: the rest, a partial match included, is skipped.
    this.skipped += this.consumed - this.blockStart
    this.blockStart = this.limitStart = this.consumed
    this.committed = false
    this.badType = ""
    this.contentLength = -1
    this.state = LINE_START
    return undefined
  }

  skippedBytes(): number {
    return this.state === SKIP ? this.skipped + this.consumed - this.blockStart - this.matched : this.skipped
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

/** @internal */
export const framing: Framing = {
  _tag: "ContentLength",
  encode,
  encodeString,
  unsafeMakeDecoder
}
