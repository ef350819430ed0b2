/**
 * Edge cases of the NDJSON decoder that the broad properties of Framing.test.ts do not pin down: which bytes count as
 * blanks, where a stray line ends, and the details of its typed errors (mutation testing, issue 20).
 */
import { assert, describe, it } from "@effect/vitest"
import { Framing } from "@lifeline/jsonrpc"
import * as fc from "fast-check"
import { bytewise, decodeAll, join, utf8 } from "./utils/decode.js"

describe("ndjson edges", () => {
  it("is tagged Ndjson", () => {
    assert.strictEqual(Framing.ndjson._tag, "Ndjson")
  })

  it("a tab or a CR before the first byte is a blank: the line is still a frame", () => {
    for (const blanks of ["\t", "\r", " \t\r", "\r\r"]) {
      const outcome = decodeAll(Framing.ndjson, [`${blanks}{}\n`])
      assert.deepStrictEqual(outcome.frames, ["{}"], JSON.stringify(blanks))
      assert.strictEqual(outcome.skipped, blanks.length)
    }
  })

  it("a line whose first byte is anything else is stray through its LF, even if a brace follows", () => {
    for (const line of ["x{}\n", "x[1]\n", "\u000b{}\n", "\f{}\n", "-{}\r\n"]) {
      const outcome = decodeAll(Framing.ndjson, [`${line}[2]\n`])
      assert.deepStrictEqual(outcome.frames, ["[2]"], JSON.stringify(line))
      assert.strictEqual(outcome.skipped, utf8(line).length)
    }
  })

  it("errors say which limit and how many bytes", () => {
    const early = Framing.ndjson.unsafeMakeDecoder({ maxBodyBytes: 4 }).push(utf8("{1234"))
    assert.strictEqual(early.error?.reason, "BodyTooLarge")
    assert.strictEqual(early.error?.detail, "A line exceeds the limit of 4 bytes")

    const whole = Framing.ndjson.unsafeMakeDecoder({ maxBodyBytes: 4 }).push(utf8("{123}\n"))
    assert.strictEqual(whole.error?.detail, "A line of 5 bytes exceeds the limit of 4 bytes")

    const d = Framing.ndjson.unsafeMakeDecoder()
    d.push(utf8("{}\n{\"a\""))
    const truncated = d.end()
    assert.strictEqual(truncated?.reason, "TruncatedFrame")
    assert.strictEqual(truncated?.detail, "The input ended inside a line of 4 bytes")
  })

  it("a spent decoder repeats its error, yields nothing, and end returns the same error", () => {
    const d = Framing.ndjson.unsafeMakeDecoder({ maxBodyBytes: 2 })
    const first = d.push(utf8("{}\n{123}\n"))
    assert.strictEqual(first.frames.length, 1)
    const again = d.push(utf8("{}\n"))
    assert.strictEqual(again.error, first.error)
    assert.strictEqual(again.frames.length, 0)
    assert.strictEqual(d.end(), first.error)
  })

  it("a body that spans chunks is exactly its bytes, whatever the chunk boundaries", () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom("{", "}", "[", "]", "a", " ", "\t", "é", ":"), { minLength: 1, maxLength: 30 }),
        fc.array(fc.nat({ max: 60 }), { maxLength: 6 }),
        fc.boolean(),
        (parts, cuts, crlf) => {
          const body = `{${parts.join("")}`
          const bytes = utf8(`${body}${crlf ? "\r\n" : "\n"}`)
          const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
          const chunks: Array<Uint8Array> = []
          let start = 0
          for (const offset of [...at, bytes.length]) {
            if (offset > start) chunks.push(bytes.slice(start, offset))
            start = Math.max(start, offset)
          }
          const outcome = decodeAll(Framing.ndjson, chunks)
          assert.deepStrictEqual(outcome.frames, [body])
          assert.strictEqual(outcome.skipped, 0)
          assert.deepStrictEqual(decodeAll(Framing.ndjson, bytewise(join(chunks))).frames, [body])
        }
      )
    )
  })
})
