/**
 * Resynchronisation of the Content-Length decoder (issue 25, item 2): stray output without a line break before a
 * frame costs its own bytes only, stray output is never fatal whatever its length, the search for `Content-Length:`
 * works across chunk boundaries and reads each byte a bounded number of times. What stays fatal is in
 * docs/protocol.md ("Framing: what the reader skips").
 */
import { assert, describe, it } from "@effect/vitest"
import { Framing } from "@lifeline/jsonrpc"
import * as fc from "fast-check"
import { bytewise, decodeAll, join, utf8 } from "./utils/decode.js"

const cl = Framing.contentLength
const good = "Content-Length: 2\r\n\r\n{}"

/** Decodes `input` whole, one byte at a time, and cut in two at every position; all must agree. */
const everyCut = (input: string, limits?: Partial<Framing.Limits>) => {
  const bytes = utf8(input)
  const whole = decodeAll(cl, [bytes], limits)
  const outcome = (d: ReturnType<typeof decodeAll>) => ({
    frames: d.frames,
    error: d.error?.reason,
    skipped: d.skipped
  })
  assert.deepStrictEqual(outcome(decodeAll(cl, bytewise(bytes), limits)), outcome(whole), "byte by byte")
  for (let cut = 1; cut < bytes.length; cut++) {
    const split = decodeAll(cl, [bytes.subarray(0, cut), bytes.subarray(cut)], limits)
    assert.deepStrictEqual(outcome(split), outcome(whole), `cut at ${cut}`)
  }
  return whole
}

describe("contentLength resynchronisation", () => {
  it("text without a line break glued to the next header costs its own bytes only, in every chunking", () => {
    for (const stray of ["50%", "}", "x", "progress: 50%", "note: 50%\r", "Content-Type: a\r\nX", "Content-Length"]) {
      const outcome = everyCut(`${good}${stray}${good}${stray}${good}`)
      assert.deepStrictEqual(outcome.frames, ["{}", "{}", "{}"], JSON.stringify(stray))
      assert.strictEqual(outcome.skipped, 2 * utf8(stray).length, JSON.stringify(stray))
      assert.isUndefined(outcome.error, JSON.stringify(stray))
    }
  })

  it("after `50%` every later frame is delivered, not only the next one", () => {
    const frames = Array.from({ length: 21 }, (_, id) => `{"id":${id}}`)
    const input = "50%" + frames.map((body) => `Content-Length: ${body.length}\r\n\r\n${body}`).join("")
    const outcome = decodeAll(cl, [input])
    assert.deepStrictEqual(outcome.frames, frames)
    assert.strictEqual(outcome.skipped, 3)
  })

  it("the header name is found in any case, also when a chunk boundary cuts it", () => {
    for (const name of ["content-length", "CONTENT-LENGTH", "cOnTeNt-LeNgTh"]) {
      const outcome = everyCut(`junk, no newline;${name}: 2\r\n\r\n[]`)
      assert.deepStrictEqual(outcome.frames, ["[]"], name)
      assert.strictEqual(outcome.skipped, 17, name)
    }
    // Partial matches that fail, then the name: "content-lengtcontent-length:" holds a whole match.
    const outcome = everyCut(`ccontent-lengtContent-LengthContent-Length: 2\r\n\r\n[]`)
    assert.deepStrictEqual(outcome.frames, ["[]"])
    assert.strictEqual(outcome.skipped, 28)
  })

  it("stray output with no header name is never fatal, however long, with or without line breaks", () => {
    const hex = "0123456789abcdef".repeat(512) // 8 KiB of token characters, no line break: a hex dump.
    for (
      const junk of [hex, hex.repeat(128), `x: ${hex}`, `${hex}\n`.repeat(20), "{}".repeat(10_000), ":".repeat(9000)]
    ) {
      const outcome = decodeAll(cl, [good, junk, good, junk])
      assert.deepStrictEqual(outcome.frames, ["{}", "{}"])
      assert.isUndefined(outcome.error)
      assert.strictEqual(outcome.skipped, 2 * junk.length)
    }
  })

  it("once a block has its Content-Length name, its limits are fatal", () => {
    const limits = { maxHeaderBytes: 64, maxBodyBytes: 100 }
    const cases: ReadonlyArray<readonly [string, string]> = [
      [`50%Content-Length: 2\r\nX: ${"x".repeat(64)}`, "HeaderTooLarge"],
      [`50%Content-Length: 101\r\n`, "BodyTooLarge"],
      [`note: Content-Length: 2\r\nContent-Length: 3\r\n`, "InvalidContentLength"],
      [`50%Content-Length: 2\r\nContent-Type: a; charset=latin1\r\n`, "UnsupportedContentType"]
    ]
    for (const [input, reason] of cases) {
      assert.strictEqual(everyCut(input, limits).error?.reason, reason, JSON.stringify(input))
    }
    // The header limit counts from the Content-Length name, not from the header lines before it (48 bytes here)...
    const before = everyCut(`${"X-Stray: y\r\n".repeat(4)}Content-Length: 2\r\n\r\n{}`, limits)
    assert.deepStrictEqual([before.frames, before.skipped], [["{}"], 0])
    // ...which, once they reach the limit with no Content-Length name, are stray output, skipped.
    const long = everyCut(`${"X-Stray: y\r\n".repeat(10)}Content-Length: 2\r\n\r\n{}`, limits)
    assert.deepStrictEqual([long.frames, long.skipped], [["{}"], 120])
  })

  it("the search reads each byte a bounded number of times: 1 MiB of stray output byte by byte", () => {
    // The 1 MiB run is the worst case for the search (every byte extends or restarts a partial match); the shorter
    // runs go through the other states stray output can be read in (a name, a value, lines), each past the limit.
    const runs: ReadonlyArray<readonly [string, number]> = [
      ["content-lengt", 1024 * 1024],
      ...["c", "Content-Length", "x: Content-Lengt", "0123456789abcdef", "a:b\r\n"].map((p) => [p, 64 * 1024] as const)
    ]
    for (const [pattern, size] of runs) {
      const junk = utf8(pattern.repeat(Math.ceil(size / pattern.length)).slice(0, size))
      let reads = 0
      // Every element read of every chunk goes through the proxy; methods run on the real array (not counted, and
      // the search uses none of them).
      const handler: ProxyHandler<Uint8Array> = {
        get: (target, key) => {
          if (typeof key === "string" && key.charCodeAt(0) >= 48 && key.charCodeAt(0) <= 57) reads++
          const value = Reflect.get(target, key, target)
          return typeof value === "function" ? value.bind(target) : value
        }
      }
      const d = cl.unsafeMakeDecoder()
      assert.strictEqual(d.push(utf8(good)).frames.length, 1)
      for (let i = 0; i < size; i++) {
        const step = d.push(new Proxy(junk.subarray(i, i + 1), handler))
        if (step.error !== undefined || step.frames.length > 0) assert.fail(`at byte ${i} of ${pattern}`)
      }
      assert.strictEqual(d.push(utf8(good)).frames.length, 1, pattern)
      assert.isAtMost(reads, 2 * size, pattern)
      assert.isAtLeast(reads, size / 2, pattern) // The proxy does see the reads.
      assert.strictEqual(d.skippedBytes(), size, pattern)
    }
  }, 30_000)

  describe("property: junk without a Content-Length name between valid frames", () => {
    const NAME = utf8("content-length:")
    const TYPE = utf8("content-type:")
    const lower = (b: number) => (b >= 65 && b <= 90 ? b + 32 : b)
    /**
     * Breaks every `content-length:` (and `content-type:`: a stray Content-Type line with another charset, right
     * before a frame, joins that frame's block and fails it, as docs/protocol.md says) by replacing its colon.
     */
    const sanitise = (bytes: Uint8Array): Uint8Array => {
      for (const name of [NAME, TYPE]) {
        let matched = 0
        for (let i = 0; i < bytes.length; i++) {
          const b = lower(bytes[i])
          if (matched === name.length - 1 && b === 58) {
            bytes[i] = 59
            matched = 0
          } else if (b === name[matched]) matched++
          else matched = b === name[0] ? 1 : 0
        }
      }
      return bytes
    }

    const pieces = fc.oneof(
      fc.constantFrom("50%", "\n", "\r\n", "\r", ":", " ", "}", "{", "c", "C", "Content-", "content-lengt", "Length"),
      fc.constantFrom("Content-Length", "Content-Type: a; charset=latin1\r\n", "X-A: b\r\n", "\r\n\r\n", "ab12"),
      fc.string({ maxLength: 20 }),
      fc.uint8Array({ maxLength: 40 }).map((bytes) => new TextDecoder("latin1").decode(bytes))
    )
    /** Junk: a few pieces, and sometimes the whole repeated up to 1 MiB. */
    const junk = fc.tuple(
      fc.array(pieces, { maxLength: 6 }),
      fc.oneof(
        { arbitrary: fc.constant(1), weight: 12 },
        { arbitrary: fc.integer({ min: 1, max: 1 << 20 }), weight: 1 }
      )
    )
      .map(([parts, repeat]) => {
        const unit = utf8(parts.join(""))
        const length = Math.min(unit.length * repeat, 1 << 20)
        const bytes = new Uint8Array(length)
        bytes.set(unit.subarray(0, length))
        for (let filled = unit.length; filled > 0 && filled < length; filled *= 2) bytes.copyWithin(filled, 0, filled)
        return sanitise(bytes)
      })
    /** A valid frame, in the spellings the decoder accepts: any case, a Content-Type first or after, spaces. */
    const frame = fc.record({
      body: fc.oneof(fc.uint8Array({ maxLength: 200 }), fc.constant(utf8(good))),
      name: fc.constantFrom("Content-Length", "content-length", "CONTENT-LENGTH"),
      space: fc.constantFrom("", " ", " \t"),
      type: fc.constantFrom("", "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"),
      typeFirst: fc.boolean()
    }).map(({ body, name, space, type, typeFirst }) => {
      const length = `${name}:${space}${body.length}${space}\r\n`
      const head = typeFirst ? type + length : length + type
      // A Content-Type line that comes first, glued to junk, is read as part of the junk (and skipped).
      return { body, bytes: join([utf8(`${head}\r\n`), body]), typeFirst: typeFirst ? utf8(type).length : 0 }
    })
    const chunkSizes = fc.array(fc.oneof(fc.integer({ min: 1, max: 16 }), fc.integer({ min: 1, max: 70_000 })), {
      minLength: 1,
      maxLength: 12
    })

    it("every valid frame is delivered in order, the one glued to the junk included", () => {
      fc.assert(
        fc.property(
          fc.array(fc.tuple(junk, frame), { minLength: 1, maxLength: 4 }),
          junk,
          chunkSizes,
          (pairs, tail, sizes) => {
            const stream = join([...pairs.flatMap(([j, f]) => [j, f.bytes]), tail])
            const chunks: Array<Uint8Array> = []
            for (let offset = 0, k = 0; offset < stream.length; k++) {
              const size = sizes[k % sizes.length]
              chunks.push(stream.subarray(offset, offset + size))
              offset += size
            }
            const d = cl.unsafeMakeDecoder()
            const frames: Array<Uint8Array> = []
            for (const chunk of chunks) {
              const step = d.push(chunk)
              frames.push(...step.frames)
              // Not `assert.isUndefined`: chai's assertions cost microseconds, and there are up to millions of chunks.
              if (step.error !== undefined) assert.fail(step.error.detail)
            }
            assert.isUndefined(d.end())
            assert.deepStrictEqual(frames.map((f) => Array.from(f)), pairs.map(([, f]) => Array.from(f.body)))
            const junkBytes = pairs.reduce((n, [j, f]) => n + j.length + f.typeFirst, tail.length)
            assert.isAtMost(d.skippedBytes(), junkBytes)
          }
        ),
        { numRuns: 80 }
      )
    }, 30_000)
  })
})
