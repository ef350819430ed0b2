/**
 * Edge cases of the Content-Length decoder and encoder that the broad properties of Framing.test.ts do not pin down:
 * the exact byte classes of the header grammar, the bounds of each limit and how they are read, the charset rule, the
 * details of each typed error, and the encoder's shared buffers (mutation testing, issue 20).
 */
import { assert, describe, it } from "@effect/vitest"
import { Framing } from "@lifeline/jsonrpc"
import * as fc from "fast-check"
import { bytewise, decodeAll, join, utf8 } from "./utils/decode.js"

const good = "Content-Length: 2\r\n\r\n{}"
const cl = Framing.contentLength

/** Decodes `chunks` whole and one byte at a time, and checks that both agree. */
const decodeBoth = (chunks: ReadonlyArray<Uint8Array | string>, limits?: Partial<Framing.Limits>) => {
  const whole = decodeAll(cl, chunks, limits)
  const bytes = join(chunks.map((chunk) => typeof chunk === "string" ? utf8(chunk) : chunk))
  const single = decodeAll(cl, bytewise(bytes), limits)
  assert.deepStrictEqual(
    { frames: single.frames, reason: single.error?.reason, skipped: single.skipped },
    { frames: whole.frames, reason: whole.error?.reason, skipped: whole.skipped }
  )
  return whole
}

const isTchar = (b: number): boolean =>
  (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) || "!#$%&'*+-.^_`|~".includes(
    String.fromCharCode(b)
  )

describe("contentLength edges", () => {
  it("is tagged ContentLength", () => {
    assert.strictEqual(cl._tag, "ContentLength")
  })

  describe("header names", () => {
    it("a name is made of RFC 9110 token bytes, and of nothing else", () => {
      for (let b = 0; b < 256; b++) {
        for (const name of [[b, 88], [88, b]]) {
          // `<name>: 1` is an unknown header when the name is a token; else the block is malformed up to its LF.
          const line = join([new Uint8Array(name), utf8(": 1\r\n")])
          const outcome = decodeBoth([line, "Content-Length: 2\r\n\r\n[]"])
          assert.deepStrictEqual(outcome.frames, ["[]"], `byte ${b} in ${JSON.stringify(name)}`)
          // "X:: 1" is the header X with the value ": 1".
          const skipped = isTchar(b) || (b === 58 && name[0] === 88) ? 0 : line.length
          assert.strictEqual(outcome.skipped, skipped, `byte ${b} in ${JSON.stringify(name)}`)
          assert.isUndefined(outcome.error)
        }
      }
    })

    it("Content-Length and Content-Type are recognised in any case, and only with their exact spelling", () => {
      const variants = ["content-length", "CONTENT-LENGTH", "cOnTeNt-LeNgTh", "Content-Length"]
      for (const name of variants) {
        assert.deepStrictEqual(decodeBoth([`${name}: 2\r\n\r\n[]`]).frames, ["[]"], name)
      }
      // Near misses are other headers: the block has no Content-Length and is skipped.
      for (const name of ["Content-Lengt", "Content-Lengths", "Content_Length", "Content-", "Contentlength", "X"]) {
        const block = `${name}: 2\r\n\r\n`
        const outcome = decodeBoth([block, `[]\n${good}`])
        assert.deepStrictEqual(outcome.frames, ["{}"], name)
        assert.strictEqual(outcome.skipped, block.length + 3, name)
      }
      // A Content-Type with another charset fails only under that exact name (once the block has its length).
      for (const name of ["content-type", "CONTENT-TYPE", "Content-Type"]) {
        assert.strictEqual(
          decodeBoth([`${name}: text/plain; charset=latin1\r\n`, good]).error?.reason,
          "UnsupportedContentType"
        )
      }
      for (const name of ["Content-Typ", "Content-Types", "Content-Tipe", "Content-Length-Type", "Content-Lype"]) {
        const outcome = decodeBoth([`${name}: text/plain; charset=latin1\r\n${good}`])
        assert.deepStrictEqual(outcome.frames, ["{}"], name)
        assert.isUndefined(outcome.error, name)
      }
    })
  })

  describe("the Content-Length value", () => {
    it("one byte as the value: a digit is the length, anything else makes the block malformed", () => {
      for (let b = 0; b < 256; b++) {
        const head = join([utf8("Content-Length: "), new Uint8Array([b]), utf8("\r\n\r\n")])
        if (b >= 48 && b <= 57) {
          const body = "x".repeat(b - 48)
          const outcome = decodeBoth([head, `${body}\n${good}`])
          assert.deepStrictEqual(outcome.frames, [body, "{}"], `byte ${b}`)
          assert.strictEqual(outcome.skipped, 1)
        } else {
          const outcome = decodeBoth([head, good])
          assert.deepStrictEqual(outcome.frames, ["{}"], `byte ${b}`)
          assert.strictEqual(outcome.skipped, head.length, `byte ${b}`)
        }
      }
    })

    it("digits between optional spaces and tabs; leading zeros are fine; anything else is malformed", () => {
      const valid: ReadonlyArray<readonly [string, number]> = [
        ["0", 0],
        ["007", 7],
        ["10", 10],
        [" 3", 3],
        ["3 ", 3],
        ["\t3\t", 3],
        [" \t 12 \t ", 12],
        ["90", 90]
      ]
      for (const [value, length] of valid) {
        const body = "y".repeat(length)
        assert.deepStrictEqual(decodeBoth([`Content-Length:${value}\r\n\r\n${body}`]).frames, [body], value)
      }
      for (const value of ["", " ", "\t", "+2", "2a", "a2", "2 2", "1e1", "2\u000b", "２", "2\n"]) {
        const head = utf8(`Content-Length: ${value}\r\n\r\n`)
        const outcome = decodeBoth([head, good])
        assert.deepStrictEqual(outcome.frames, ["{}"], JSON.stringify(value))
        assert.strictEqual(outcome.skipped, head.length, JSON.stringify(value))
      }
    })

    it("a CR in a header must be followed by LF", () => {
      for (const block of ["Content-Length: 2\rX\r\n\r\n", "X-A: b\rc\r\n", "Content-Length: 2\r\n\rX"]) {
        const outcome = decodeBoth([block, `\n${good}`])
        assert.deepStrictEqual(outcome.frames, ["{}"], JSON.stringify(block))
        assert.strictEqual(outcome.skipped, utf8(block).length + 1, JSON.stringify(block))
      }
    })

    it("a bare LF inside a Content-Type or another value makes the block malformed", () => {
      for (const line of ["Content-Type: a\n", "X-Other: a\n"]) {
        const outcome = decodeBoth([line, good])
        assert.deepStrictEqual(outcome.frames, ["{}"])
        assert.strictEqual(outcome.skipped, line.length)
      }
    })
  })

  describe("limits", () => {
    it("maxBodyBytes: a length up to the limit is read, one more fails at once with BodyTooLarge", () => {
      fc.assert(
        fc.property(fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 0, max: 3 }), (max, zeros) => {
          const limits = { maxBodyBytes: max }
          const at = cl.unsafeMakeDecoder(limits).push(utf8(`Content-Length: ${"0".repeat(zeros)}${max}\r\n`))
          assert.isUndefined(at.error)
          const over = cl.unsafeMakeDecoder(limits).push(utf8(`Content-Length: ${"0".repeat(zeros)}${max + 1}\r\n`))
          assert.strictEqual(over.error?.reason, "BodyTooLarge")
          assert.strictEqual(over.error?.detail, `Content-Length exceeds the limit of ${max} bytes`)
        })
      )
    })

    it("a length of any number of digits is clamped, never wrapped: still BodyTooLarge", () => {
      for (const digits of [17, 20, 400]) {
        const outcome = decodeBoth([`Content-Length: ${"9".repeat(digits)}\r\n`], { maxBodyBytes: 100 })
        assert.strictEqual(outcome.error?.reason, "BodyTooLarge")
      }
    })

    it("the defaults: 64 MiB of body, 8 KiB of header block", () => {
      assert.deepStrictEqual(Framing.defaultLimits, { maxHeaderBytes: 8192, maxBodyBytes: 64 * 1024 * 1024 })
      for (const limits of [undefined, {}, { maxHeaderBytes: 8192 }]) {
        const atMost = cl.unsafeMakeDecoder(limits)
        assert.isUndefined(atMost.push(utf8(`Content-Length: ${64 * 1024 * 1024}\r\n`)).error)
        assert.strictEqual(atMost.end()?.reason, "TruncatedFrame")
        const over = cl.unsafeMakeDecoder(limits).push(utf8(`Content-Length: ${64 * 1024 * 1024 + 1}\r\n`))
        assert.strictEqual(over.error?.reason, "BodyTooLarge")
      }
      for (const limits of [undefined, {}, { maxBodyBytes: 10 }]) {
        // `Content-Length: 2\r\n` (19 bytes), one padding line, the blank line (2 bytes): 8192 bytes in all.
        const pad = (n: number) => `X-Pad: ${"p".repeat(n - 9)}\r\n`
        const exact = decodeAll(cl, [`Content-Length: 2\r\n${pad(8192 - 21)}\r\n{}`], limits)
        assert.deepStrictEqual(exact.frames, ["{}"])
        const over = decodeAll(cl, [`Content-Length: 2\r\n${pad(8193 - 21)}\r\n{}`], limits)
        assert.strictEqual(over.error?.reason, "HeaderTooLarge")
        assert.strictEqual(over.error?.detail, "The header block exceeds 8192 bytes")
      }
    })

    it("limits are whole numbers of at least 0: fractions are rounded down, negatives are 0", () => {
      // 10.9 reads as 10.
      assert.isUndefined(cl.unsafeMakeDecoder({ maxBodyBytes: 10.9 }).push(utf8("Content-Length: 10\r\n")).error)
      assert.strictEqual(
        decodeAll(cl, ["Content-Length: 11\r\n"], { maxBodyBytes: 10.9 }).error?.reason,
        "BodyTooLarge"
      )
      // -5 reads as 0: only empty bodies.
      assert.deepStrictEqual(decodeAll(cl, ["Content-Length: 0\r\n\r\n"], { maxBodyBytes: -5 }).frames, [""])
      const one = decodeAll(cl, ["Content-Length: 1\r\n"], { maxBodyBytes: -5 }).error
      assert.strictEqual(one?.detail, "Content-Length exceeds the limit of 0 bytes")
      // The 21-byte header block of `good` against 21.7 and 20.7.
      assert.deepStrictEqual(decodeAll(cl, [good], { maxHeaderBytes: 21.7 }).frames, ["{}"])
      const header = decodeAll(cl, [good], { maxHeaderBytes: 20.7 }).error
      assert.strictEqual(header?.detail, "The header block exceeds 20 bytes")
      // A header limit of 0 (or less) refuses every block at its `Content-Length` name; before it, bytes are stray.
      for (const maxHeaderBytes of [0, -1]) {
        const d = cl.unsafeMakeDecoder({ maxHeaderBytes })
        assert.isUndefined(d.push(utf8("Content-Length")).error)
        assert.strictEqual(d.push(utf8(":")).error?.detail, "The header block exceeds 0 bytes")
      }
    })

    it("maxHeaderBytes is counted from the start of each block, in every chunk", () => {
      const limits = { maxHeaderBytes: 21 }
      const five = good.repeat(5)
      assert.deepStrictEqual(decodeBoth([five], limits).frames, ["{}", "{}", "{}", "{}", "{}"])
      // After a skipped block, the limit counts from the new block's `C`, not from the garbage.
      const after = decodeBoth([`${"junk ".repeat(10)}\n${good}`], limits)
      assert.deepStrictEqual(after.frames, ["{}"])
      // A block that starts late in one chunk and ends in the next.
      assert.deepStrictEqual(decodeBoth([`${good}Content-Len`, "gth: 2\r\n\r\n[]"], limits).frames, ["{}", "[]"])
    })
  })

  describe("Content-Type charsets", () => {
    const accepted = [
      "application/json",
      "application/json; charset=utf-8",
      "application/json;charset=UTF8",
      "application/json; CharSet = \"Utf-8\" ",
      "application/json; foo=bar; charset=utf-8",
      "application/json; charset",
      "application/json; x=latin1",
      "charset=latin1",
      "application/json; charset=utf-8; charset=utf8",
      "application/json; charsetX",
      "application/json; charset8",
      ""
    ]
    for (const value of accepted) {
      it(`accepts ${JSON.stringify(value)}`, () => {
        const outcome = decodeBoth([`Content-Type: ${value}\r\n${good}`])
        assert.deepStrictEqual(outcome.frames, ["{}"])
        assert.isUndefined(outcome.error)
      })
    }
    const refused = [
      "application/json; charset=latin1",
      "application/json; charset=\"latin1\"",
      "application/json; charset=",
      "application/json; charset=\"",
      "application/json; charset=\"\"",
      "application/json; charset=\"utf-8",
      "application/json; charset=utf-8\"",
      "application/json; charset=utf-16",
      "application/json; charset=utf-8; charset=latin1",
      "application/json; charset=latin1; charset=utf-8",
      "application/json; charset=latin1; charset=utf8",
      "application/json; charset=utf8; charset=latin1",
      "application/json; charset=xutf-8\"",
      "application/json; charset=\"utf-8x"
    ]
    for (const value of refused) {
      it(`refuses ${JSON.stringify(value)}, naming it`, () => {
        const outcome = decodeBoth([`Content-Type:  ${value} \r\n${good}`])
        assert.deepStrictEqual(outcome.frames, [])
        assert.strictEqual(outcome.error?.reason, "UnsupportedContentType")
        assert.strictEqual(outcome.error?.detail, `Unsupported Content-Type: ${value}`)
      })
    }
    it("reads the value's bytes one for one (Latin-1), across chunks", () => {
      const step = decodeAll(cl, ["Content-Type: a; charset=", new Uint8Array([0xe9]), "\r\n", good])
      assert.strictEqual(step.error?.detail, "Unsupported Content-Type: a; charset=\u00e9")
    })
  })

  describe("errors", () => {
    it("conflicting lengths name both", () => {
      const error = decodeAll(cl, ["Content-Length: 2\r\nContent-Length: 3\r\n"]).error
      assert.strictEqual(error?.reason, "InvalidContentLength")
      assert.strictEqual(error?.detail, "Conflicting Content-Length headers: 2 and 3")
    })

    it("a body cut off by the end of input says how far it got", () => {
      const outcome = decodeAll(cl, ["Content-Length: 10\r\n\r\n", "ab"])
      assert.isTrue(outcome.atEnd)
      assert.strictEqual(outcome.error?.detail, "The input ended 2 bytes into a body of 10 bytes")
      const header = decodeAll(cl, [`${good}Content-Length: 1`])
      assert.strictEqual(header.error?.detail, "The input ended inside a header block")
    })

    it("the end of input after the CR of the blank line is inside the header block", () => {
      const outcome = decodeAll(cl, [`${good}Content-Length: 2\r\n\r`])
      assert.strictEqual(outcome.error?.detail, "The input ended inside a header block")
    })

    it("the end of input right after a frame, or of an empty input, is no error", () => {
      assert.deepStrictEqual(decodeAll(cl, []), { frames: [], error: undefined, atEnd: false, skipped: 0 })
      assert.deepStrictEqual(decodeAll(cl, [good, good]).error, undefined)
      assert.deepStrictEqual(decodeAll(cl, [new Uint8Array(0)]).error, undefined)
    })

    it("a spent decoder repeats its error, yields nothing, and end returns it", () => {
      const d = cl.unsafeMakeDecoder({ maxBodyBytes: 5 })
      const first = d.push(utf8(`${good}Content-Length: 6\r\n\r\n123456${good}`))
      assert.strictEqual(first.frames.length, 1)
      const again = d.push(utf8(good))
      assert.strictEqual(again.error, first.error)
      assert.deepStrictEqual(again.frames, [])
      assert.strictEqual(d.end(), first.error)
    })
  })

  describe("skippedBytes while skipping", () => {
    it("counts a malformed line as soon as it is known to be skipped, and a partial match once it fails", () => {
      const d = cl.unsafeMakeDecoder()
      d.push(utf8("garb age"))
      assert.strictEqual(d.skippedBytes(), 8)
      d.push(utf8("\nCont"))
      assert.strictEqual(d.skippedBytes(), 9)
      d.push(utf8("ent-Length"))
      assert.strictEqual(d.skippedBytes(), 9)
      d.push(utf8("!"))
      assert.strictEqual(d.skippedBytes(), 24)
      d.push(utf8("\n\nContent-Length:"))
      assert.strictEqual(d.skippedBytes(), 26)
      assert.deepStrictEqual(d.push(utf8(" 1\r\n\r\nz")).frames.map((f) => new TextDecoder().decode(f)), ["z"])
      assert.strictEqual(d.skippedBytes(), 26)
      d.push(utf8("Content-Length: 1"))
      assert.strictEqual(d.end()?.reason, "TruncatedFrame")
    })

    it("counts from the end of the last frame, not from the start of the input", () => {
      const d = cl.unsafeMakeDecoder()
      d.push(utf8(`${good}x y`))
      assert.strictEqual(d.skippedBytes(), 3)
      d.push(utf8("z"))
      assert.strictEqual(d.skippedBytes(), 4)
    })

    it("at end, trailing garbage and a partial match count as skipped", () => {
      const d = cl.unsafeMakeDecoder()
      d.push(utf8(`${good}x y\nContent-Le`))
      assert.strictEqual(d.skippedBytes(), 4)
      assert.isUndefined(d.end())
      assert.strictEqual(d.skippedBytes(), 14)
    })
  })

  describe("bodies are views when they can be", () => {
    it("a header that ends with its chunk: the body in the next chunk is a view on that chunk", () => {
      const d = cl.unsafeMakeDecoder()
      d.push(utf8("Content-Length: 2\r\n\r\n"))
      // An empty chunk while waiting for the body changes nothing.
      assert.deepStrictEqual(d.push(new Uint8Array(0)).frames, [])
      const chunk = utf8("[]")
      const [body] = d.push(chunk).frames
      assert.strictEqual(body.buffer, chunk.buffer)
      assert.strictEqual(new TextDecoder().decode(body), "[]")
    })
  })

  describe("encode", () => {
    it("a frame that fills the shared slab to its last byte is whole", () => {
      // Start a fresh slab: 8 KiB allocations until one lands in a new buffer, which then holds exactly one.
      let previous = Framing.ndjson.encode(new Uint8Array(8191)).buffer
      for (let i = 0; i < 16; i++) {
        const next = Framing.ndjson.encode(new Uint8Array(8191)).buffer
        if (next !== previous) break
        previous = next
      }
      // Six more, then 8 bytes: 57,352 of 65,536 bytes used, 8,184 left.
      for (let i = 0; i < 6; i++) Framing.ndjson.encode(new Uint8Array(8191))
      Framing.ndjson.encode(new Uint8Array(7))
      // 2,728 three-byte characters: 8,184 bytes of body and an LF, one more than the slab has left.
      const body = "\u20ac".repeat(2728)
      assert.strictEqual(new TextDecoder().decode(Framing.ndjson.encodeString(body)), `${body}\n`)
    })

    it("writes the exact length at every number of digits", () => {
      for (const length of [0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 8191, 8192, 8193, 9999, 10000, 70000]) {
        const body = "a".repeat(length)
        const expected = `Content-Length: ${length}\r\n\r\n${body}`
        assert.strictEqual(new TextDecoder().decode(cl.encode(utf8(body))), expected, `encode ${length}`)
        assert.strictEqual(new TextDecoder().decode(cl.encodeString(body)), expected, `encodeString ${length}`)
      }
    })

    it("frames encoded one after another never share bytes: each one stays intact", () => {
      fc.assert(
        fc.property(
          fc.array(
            fc.tuple(
              fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 2700, max: 2800 }), fc.constant(8192)),
              fc.constantFrom("a", "é", "😀"),
              fc.constantFrom("contentLength", "ndjson"),
              fc.boolean()
            ),
            { minLength: 1, maxLength: 60 }
          ),
          (specs) => {
            const made = specs.map(([length, unit, name, fromBytes]) => {
              const framing = name === "contentLength" ? cl : Framing.ndjson
              const body = unit.repeat(length)
              const framed = fromBytes ? framing.encode(utf8(body)) : framing.encodeString(body)
              return { framing, body, framed }
            })
            for (const { body, framed, framing } of made) {
              const expected = framing === cl ? `Content-Length: ${utf8(body).length}\r\n\r\n${body}` : `${body}\n`
              assert.strictEqual(new TextDecoder().decode(framed), expected)
            }
          }
        ),
        { numRuns: 60 }
      )
    })
  })
})
