/**
 * What the two codecs (`contentLength.ts`, `ndjson.ts`) share: how their limits are read, how a body that spans
 * chunks is joined, and the shared slab their encoders carve frames from.
 *
 * @internal
 */
import type { Limits } from "../Framing.js"

/** The decoders' default bounds (`Framing.defaultLimits` is this object). @internal */
export const defaultLimits: Limits = { maxHeaderBytes: 8 * 1024, maxBodyBytes: 64 * 1024 * 1024 }

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
