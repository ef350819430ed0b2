/**
 * The conformance kit's reader of an extension's stdout: Content-Length frames as docs/protocol.md ("Transport")
 * defines them, read byte by byte so that every departure is counted rather than fatal. Bytes outside any frame are
 * junk; a frame whose `Content-Length` is not its body's UTF-8 byte count is found again at the next header (or once
 * the output has been quiet) and reported with both numbers; a body that is not JSON is kept as such. Pure: no IO.
 */

/** One frame as read: its body parsed when it is JSON. */
export interface FrameRead {
  /** The body's text (UTF-8). */
  readonly text: string
  /** The parsed body, or `undefined` when it is not JSON (`json` false). */
  readonly message: unknown
  readonly json: boolean
  /** The `Content-Length` header's value. */
  readonly declared: number
  /** The body's real length in bytes: differs from `declared` when the header was wrong. */
  readonly actual: number
}

/** What one push (or flush) found: the frames, and the bytes that were not part of any frame. */
export interface Decoded {
  readonly frames: ReadonlyArray<FrameRead>
  /** Runs of bytes outside frames (text decoded as latin1, so that every byte is one character). */
  readonly junk: ReadonlyArray<string>
}

/** A header block longer than this is not one: the bytes are junk. */
const maxHeaderBytes = 1024
/** A body longer than this is refused: its header is junk (the host's own bound is 4 MiB of message). */
const maxBodyBytes = 8 * 1024 * 1024

const headerStart = /^content-(length|type)\s*:/i

const tryJson = (text: string): { readonly ok: boolean; readonly value: unknown } => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    return { ok: false, value: undefined }
  }
}

/**
 * A stateful reader: `push` each chunk of stdout as it comes, `flush` when the output has been quiet for a while or
 * has ended (it settles a frame whose header promised more bytes than were ever written).
 */
export const makeReader = () => {
  let buffer = Buffer.alloc(0)

  /**
   * Where the next header starts at or after `from`, or -1. Found with `indexOf` (native, no copy: an extension may
   * write megabytes), then checked with the pattern. Headers are ASCII, so latin1 keeps the offsets.
   */
  const nextHeader = (from: number): number => {
    let best = -1
    for (const needle of ["ontent-", "ONTENT-"]) {
      for (let i = buffer.indexOf(needle, from + 1, "latin1"); i >= 0; i = buffer.indexOf(needle, i + 1, "latin1")) {
        if (best >= 0 && i - 1 >= best) break
        if (headerStart.test(buffer.toString("latin1", i - 1, i + 24))) {
          best = i - 1
          break
        }
      }
    }
    return best
  }

  const frameOf = (bodyStart: number, end: number, declared: number): FrameRead => {
    const text = buffer.toString("utf8", bodyStart, end)
    const parsed = tryJson(text)
    return { text, message: parsed.value, json: parsed.ok, declared, actual: end - bodyStart }
  }

  /** How many bytes at the end of the buffer could begin a header ("Content-Le" cut by a chunk boundary). */
  const headerPrefixAtEnd = (): number => {
    for (let length = Math.min(15, buffer.length); length > 0; length--) {
      const tail = buffer.toString("latin1", buffer.length - length).toLowerCase()
      if ("content-length:".startsWith(tail) || "content-type:".startsWith(tail)) return length
    }
    return 0
  }

  /** Whether the bytes end with `}` or `]` (whitespace aside): only then is it worth parsing them. */
  const endsLikeJson = (from: number, to: number): boolean => {
    for (let i = to - 1; i >= from; i--) {
      const byte = buffer[i]
      if (byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09) continue
      return byte === 0x7d || byte === 0x5d
    }
    return false
  }

  const decode = (final: boolean): Decoded => {
    const frames: Array<FrameRead> = []
    const junk: Array<string> = []
    const skip = (end: number) => {
      junk.push(buffer.toString("latin1", 0, end))
      buffer = buffer.subarray(end)
    }
    while (buffer.length > 0) {
      const start = nextHeader(0)
      if (start !== 0) {
        // Keep a tail that may be the start of a header cut by the chunk boundary.
        const end = start > 0 ? start : final ? buffer.length : buffer.length - headerPrefixAtEnd()
        if (end === 0) break
        skip(end)
        continue
      }
      const headerEnd = buffer.indexOf("\r\n\r\n")
      if (headerEnd < 0 || headerEnd > maxHeaderBytes) {
        if (buffer.length <= maxHeaderBytes && !final) break
        // No end of header where one must be: this was no header. Skip to the next one.
        const next = nextHeader(1)
        skip(next > 0 ? next : buffer.length)
        continue
      }
      const header = buffer.toString("latin1", 0, headerEnd)
      const length = /content-length\s*:\s*(\d+)\s*(\r\n|$)/i.exec(header)
      const declared = length === null ? NaN : Number(length[1])
      const bodyStart = headerEnd + 4
      if (!Number.isSafeInteger(declared) || declared > maxBodyBytes) {
        skip(bodyStart)
        continue
      }
      const complete = buffer.length >= bodyStart + declared
      const exact = complete ? frameOf(bodyStart, bodyStart + declared, declared) : undefined
      if (exact !== undefined && exact.json) {
        frames.push(exact)
        buffer = buffer.subarray(bodyStart + declared)
        continue
      }
      // The declared length does not end a JSON body: the body is found again as the JSON that runs up to the next
      // header (or to the end of what was written), which is what a count of characters instead of bytes looks like.
      const next = nextHeader(bodyStart)
      const until = next > 0 ? next : buffer.length
      const found = endsLikeJson(bodyStart, until) ? frameOf(bodyStart, until, declared) : undefined
      if (found !== undefined && found.json) {
        frames.push(found)
        buffer = buffer.subarray(until)
        continue
      }
      // More bytes may complete the body; the flush settles it when none come.
      if (!final) break
      if (exact !== undefined) {
        // Not JSON whatever its length: kept as a frame, at its declared length.
        frames.push(exact)
        buffer = buffer.subarray(bodyStart + declared)
        continue
      }
      // A header whose body never came: junk.
      skip(until)
    }
    return { frames, junk }
  }

  return {
    /** Adds a chunk and answers what it completed. */
    push: (chunk: Uint8Array): Decoded => {
      buffer = buffer.length === 0 ? Buffer.from(chunk) : Buffer.concat([buffer, chunk])
      return decode(false)
    },
    /** Settles what is pending, as if no more bytes were coming. */
    flush: (): Decoded => decode(true),
    /** Bytes held, waiting for the rest of a frame. */
    pending: (): number => buffer.length
  }
}
