/**
 * The bounds on what one frame body may hold (`Message.Limits`), judged without recursion: before `JSON.parse` by a
 * scan of the text for a large body, after it by a walk of the value for a small one (see `scanAbove` for why both).
 * Each answers the detail of the -32600 that refuses the body, or `undefined`.
 *
 * @internal
 */
import type { Limits } from "../Message.js"

/** JSON's four whitespace characters, which may precede a batch's `[`. */
const isJsonSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09

/**
 * The first bound `text` breaks, as the detail of its -32600, or `undefined`: the check before `JSON.parse` of a large
 * body. An iterative scan, never recursive (what it guards against is nesting deep enough to overflow a stack): it
 * counts `[` and `{` outside strings, and at depth 1 of a batch the commas between its items. A string is skipped with
 * `indexOf`, which V8 runs natively, and its closing quote is the first one after an even run of backslashes. It stops
 * at the first bound broken, so a 40 MB nested body costs 129 characters. Text that is not JSON is not judged here:
 * `JSON.parse` reports it.
 */
const breaks = (text: string, limits: Limits): string | undefined => {
  const n = text.length
  let i = 0
  while (i < n && isJsonSpace(text.charCodeAt(i))) i++
  const batch = text.charCodeAt(i) === 0x5b
  const { maxBatchItems, maxDepth } = limits
  let depth = 0
  let items = 1
  while (i < n) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      let close = i
      for (;;) {
        close = text.indexOf("\"", close + 1)
        if (close < 0) return undefined // an unterminated string: not JSON
        let backslash = close - 1
        while (text.charCodeAt(backslash) === 0x5c) backslash--
        if (((close - 1 - backslash) & 1) === 0) break
      }
      i = close + 1
      continue
    }
    if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return tooDeep(maxDepth)
    } else if (c === 0x5d || c === 0x7d) {
      depth--
    } else if (c === 0x2c && depth === 1 && batch && ++items > maxBatchItems) {
      return tooManyItems(maxBatchItems)
    }
    i++
  }
  return undefined
}

const tooDeep = (maxDepth: number) => `Nested deeper than ${maxDepth} levels (maxDepth)`
const tooManyItems = (maxBatchItems: number) => `A batch of more than ${maxBatchItems} messages (maxBatchItems)`

/**
 * Whether a parsed value nests deeper than `maxDepth`: the check after `JSON.parse` of a body up to `scanAbove`.
 * Iterative, with a stack of its own (pairs of a container and its depth), and it visits containers only (a string or
 * a number is never pushed). `for ... in` rather than `Object.values`: 31 against 44 µs on a 60 KB body of 1,700 small
 * objects, whose `JSON.parse` takes ~375 µs.
 */
const deeperThan = (value: unknown, maxDepth: number): boolean => {
  if (typeof value !== "object" || value === null) return false
  const stack: Array<unknown> = [value, 1]
  let top = 2
  while (top > 0) {
    const depth = stack[--top] as number
    const container = stack[--top] as object
    if (depth > maxDepth) return true
    if (Array.isArray(container)) {
      for (let i = 0; i < container.length; i++) {
        const child = container[i]
        if (typeof child === "object" && child !== null) {
          stack[top++] = child
          stack[top++] = depth + 1
        }
      }
    } else {
      for (const key in container) {
        const child = (container as Record<string, unknown>)[key]
        if (typeof child === "object" && child !== null) {
          stack[top++] = child
          stack[top++] = depth + 1
        }
      }
    }
  }
  return false
}

/**
 * Bodies up to this size are checked after `JSON.parse`, larger ones before it. Neither check is cheap on every
 * shape, so each is used where it is (measured with node 22 on a busy 2-core machine):
 * - After: the walk costs ≤ 3% of parsing a body that is mostly strings (the bench's 200 B and 64 KiB frames: within
 *   ±3%, run-to-run noise) and ~8% on one of many small objects, but `JSON.parse` has run first. On the worst body of
 *   this size (131,072 nested arrays) that is ~30 ms and a few MB; a 64 KiB one ~5 ms, a 1 MiB one ~100 ms, a 10 MB
 *   one seconds and hundreds of MB (issue 25: 6.4 s, 680 MB).
 * - Before: the scan bounds what `JSON.parse` ever sees, but costs ~10–25% of it (30–60% measured under load) on
 *   bodies of many small strings or objects (JS reads characters slower than V8's parser does), ~1–2% on bodies that
 *   are mostly one long string.
 * 256 KiB keeps a hostile frame's stall of the reader to tens of milliseconds, and leaves nearly every ordinary body
 * (requests, LSP results, HL7 messages) to the cheap walk.
 */
const scanAbove = 256 * 1024

const isBatch = (body: Uint8Array): boolean => {
  let i = 0
  while (i < body.length && isJsonSpace(body[i])) i++
  return body[i] === 0x5b
}

/**
 * What refuses the body before it is even decoded: its bytes, for a batch (a 30 MB one costs nothing more to refuse,
 * not even its text).
 *
 * @internal
 */
export const beforeDecode = (body: Uint8Array, limits: Limits): string | undefined =>
  body.length > limits.maxBatchBytes && isBatch(body)
    ? `A batch of ${body.length} bytes, more than ${limits.maxBatchBytes} (maxBatchBytes)`
    : undefined

/**
 * A body of n characters cannot nest deeper than n / 2 levels (each level takes a bracket and its closing one), nor
 * hold more than (n - 1) / 2 items (`[1,1]`): a short one needs neither check.
 */
const mayBreak = (length: number, limits: Limits): boolean =>
  length > 2 * limits.maxDepth + 1 || length > 2 * limits.maxBatchItems + 1

/**
 * What refuses the body before it is parsed: its depth and items, above `scanAbove`. The decoded text is scanned
 * (`JSON.parse` reads it anyway); a UTF-8 character is 1 to 4 bytes, so `text.length` is at most `bytes`, and the
 * thresholds hold for either.
 *
 * @internal
 */
export const beforeParse = (text: string, bytes: number, limits: Limits): string | undefined =>
  bytes > scanAbove && mayBreak(text.length, limits) ? breaks(text, limits) : undefined

/**
 * What refuses the parsed value of a body up to `scanAbove`: its items, if it is a batch, and its depth.
 *
 * @internal
 */
export const afterParse = (value: unknown, text: string, bytes: number, limits: Limits): string | undefined => {
  if (bytes > scanAbove || !mayBreak(text.length, limits)) return undefined
  if (Array.isArray(value) && value.length > limits.maxBatchItems) return tooManyItems(limits.maxBatchItems)
  return deeperThan(value, limits.maxDepth) ? tooDeep(limits.maxDepth) : undefined
}
