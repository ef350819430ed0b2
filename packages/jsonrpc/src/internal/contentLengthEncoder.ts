/**
 * The `Content-Length` encoder: header and body in one buffer, so that one write sends one whole message. The decoder
 * and the header grammar are in `contentLength.ts`.
 *
 * @internal
 */
import { allocate, encodeJson } from "./buffers.js"

const LF = 10
const CR = 13

const PREFIX = ((): Uint8Array => {
  const text = "Content-Length: "
  const out = new Uint8Array(text.length)
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i)
  return out
})()

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
