import type { Framing } from "@lifeline/jsonrpc"

const encoder = new TextEncoder()

export const utf8 = (text: string): Uint8Array => encoder.encode(text)

export const join = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0))
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.length
  }
  return out
}

export const bytewise = (bytes: Uint8Array): Array<Uint8Array> => Array.from(bytes, (_, i) => bytes.slice(i, i + 1))

export interface Decoded {
  readonly frames: ReadonlyArray<string>
  /** The error reported by `push`, or else by `end`. */
  readonly error: Framing.FramingError | undefined
  /** Whether the error came from `end` rather than from a `push`. */
  readonly atEnd: boolean
  readonly skipped: number
}

/** Feeds every chunk to a fresh decoder, then ends the input. Frames are decoded as UTF-8 text. */
export const decodeAll = (
  framing: Framing.Framing,
  chunks: ReadonlyArray<Uint8Array | string>,
  limits?: Partial<Framing.Limits>
): Decoded => {
  const d = framing.unsafeMakeDecoder(limits)
  const frames: Array<string> = []
  let error: Framing.FramingError | undefined
  for (const chunk of chunks) {
    const step = d.push(typeof chunk === "string" ? utf8(chunk) : chunk)
    if (error !== undefined) continue
    for (const frame of step.frames) frames.push(new TextDecoder().decode(frame))
    error = step.error
  }
  const end = d.end()
  return { frames, error: error ?? end, atEnd: error === undefined && end !== undefined, skipped: d.skippedBytes() }
}
