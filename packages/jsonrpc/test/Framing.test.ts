import { assert, describe, it } from "@effect/vitest"
import { Framing } from "@lifeline/jsonrpc"
import { Effect, Result, Stream } from "effect"
import * as fc from "fast-check"
import { prop } from "./utils/prop.js"

const encoder = new TextEncoder()
const decoder = new TextDecoder("utf-8", { fatal: true })
const utf8 = (text: string): Uint8Array => encoder.encode(text)
const text = (bytes: Uint8Array): string => decoder.decode(bytes)

const join = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0))
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.length
  }
  return out
}

/** Cuts `bytes` at the given offsets (taken modulo its length + 1, sorted, deduplicated). */
const cut = (bytes: Uint8Array, offsets: ReadonlyArray<number>): Array<Uint8Array> => {
  const at = [...new Set(offsets.map((offset) => offset % (bytes.length + 1)))].sort((a, b) => a - b)
  const chunks: Array<Uint8Array> = []
  let start = 0
  for (const offset of [...at, bytes.length]) {
    if (offset > start) chunks.push(bytes.slice(start, offset))
    start = Math.max(start, offset)
  }
  return chunks
}

const bytewise = (bytes: Uint8Array): Array<Uint8Array> => Array.from(bytes, (_, i) => bytes.slice(i, i + 1))

interface Outcome {
  readonly frames: ReadonlyArray<string>
  /** The reason reported by `push`, if any. */
  readonly error: Framing.FramingError["reason"] | undefined
  /** The reason reported by `end`, when `push` reported none. */
  readonly end: Framing.FramingError["reason"] | undefined
  readonly skipped: number
}

/** Feeds every chunk (checking the per-push contract) then ends the input. Frames are decoded as UTF-8 text. */
const run = (
  framing: Framing.Framing,
  chunks: ReadonlyArray<Uint8Array | string>,
  limits?: Partial<Framing.Limits>
): Outcome => {
  const d = framing.unsafeMakeDecoder(limits)
  const frames: Array<string> = []
  let error: Framing.FramingError | undefined
  for (const chunk of chunks) {
    const step = d.push(typeof chunk === "string" ? utf8(chunk) : chunk)
    if (error !== undefined) {
      // A spent decoder repeats its error and yields nothing.
      assert.strictEqual(step.error, error)
      assert.strictEqual(step.frames.length, 0)
      continue
    }
    for (const frame of step.frames) {
      assert.instanceOf(frame, Uint8Array)
      frames.push(new TextDecoder().decode(frame))
    }
    if (step.error !== undefined) {
      assert.instanceOf(step.error, Framing.FramingError)
      // Its message names the reason and the detail: a PeerClosed that carries it on says what went wrong.
      assert.strictEqual(step.error.message, `${step.error.reason}: ${step.error.detail}`)
      error = step.error
    }
  }
  const end = d.end()
  if (error !== undefined) assert.strictEqual(end, error)
  else if (end !== undefined) assert.instanceOf(end, Framing.FramingError)
  return {
    frames,
    error: error?.reason,
    end: error === undefined ? end?.reason : undefined,
    skipped: d.skippedBytes()
  }
}

const ok = (frames: ReadonlyArray<string>, skipped = 0): Outcome => ({
  frames,
  error: undefined,
  end: undefined,
  skipped
})

const byteLength = (s: string): number => utf8(s).length

const frame = (body: string): string => `Content-Length: ${byteLength(body)}\r\n\r\n${body}`

// Arbitraries ---------------------------------------------------------------------------------------------------------

const awkwardString = fc.oneof(
  fc.string({ unit: "binary" }),
  fc.string({ unit: "grapheme" }),
  fc.constantFrom("", "é", "😀", "\u2028", "\r\n", "Content-Length: 5\r\n\r\n", "\n{}\n", "\u0000")
)

const nested = fc.integer({ min: 0, max: 300 }).map((depth) => {
  let value: unknown = "bottom"
  for (let i = 0; i < depth; i++) value = i % 2 === 0 ? [value] : { k: value }
  return value
})

const jsonValue = fc.oneof(fc.jsonValue(), awkwardString, fc.array(awkwardString), nested)

/** What an NDJSON peer sends: objects and arrays (see `internal/ndjson.ts`: other lines are stray output). */
const jsonMessage = fc.oneof(
  jsonValue.map((value) => ({ jsonrpc: "2.0", id: 1, result: value })),
  fc.array(jsonValue)
)

const offsets = fc.array(fc.nat({ max: 1 << 20 }), { maxLength: 40 })

/** Stray output without "content-" (any case), ending with a bare LF, as a `console.log` on stdout would be. */
const garbage = fc
  .oneof(fc.string({ unit: "binary" }).map(utf8), fc.uint8Array({ maxLength: 64 }))
  .map((bytes) => {
    let end = bytes.length
    while (end > 0 && bytes[end - 1] === 13) end--
    return join([bytes.subarray(0, end), utf8("\n")])
  })
  .filter((bytes) => !String.fromCharCode(...bytes).toLowerCase().includes("content-"))

const maybeGarbage = fc.option(garbage, { nil: undefined })

/** A stray NDJSON line: blank, or starting (after blanks) with something other than `{` or `[`. */
const strayLine = fc
  .tuple(
    fc.constantFrom("", " ", "\t", "\r", " \r "),
    fc.oneof(fc.constant(""), fc.string({ unit: "binary" })),
    fc.constantFrom("\n", "\r\n")
  )
  .filter(([, body]) => !body.includes("\n") && !/^[ \t\r]*[{[]/.test(body))
  .map(([blanks, body, end]) => utf8(blanks + body + end))

/** Bytes that reach many decoder states: header fragments, separators, digits, plus arbitrary bytes. */
const headerish = fc
  .array(
    fc.oneof(
      fc.constantFrom(
        "Content-Length:",
        "content-length: ",
        "Content-Type: application/json; charset=utf-8",
        "Content-Type: text/plain; charset=latin1",
        "X-Other: 1",
        "\r\n",
        "\r\n\r\n",
        "\r",
        "\n",
        " ",
        ":",
        "-",
        "0",
        "3",
        "12",
        "99999999999",
        "{}",
        "[1]",
        "é"
      ).map(utf8),
      fc.uint8Array({ maxLength: 8 })
    ),
    { maxLength: 40 }
  )
  .map(join)

const anyBytes = fc.oneof(headerish, fc.uint8Array({ maxLength: 300 }))

const framings = [
  ["contentLength", Framing.contentLength],
  ["ndjson", Framing.ndjson]
] as const

// Tests ---------------------------------------------------------------------------------------------------------------

describe("Framing", () => {
  describe("encode", () => {
    it("writes the header and the body into one buffer", () => {
      const body = "{\"a\":\"é😀\"}"
      assert.deepStrictEqual(Framing.contentLength.encodeString(body), utf8(`Content-Length: 14\r\n\r\n${body}`))
      assert.deepStrictEqual(Framing.contentLength.encode(utf8(body)), utf8(`Content-Length: 14\r\n\r\n${body}`))
      assert.deepStrictEqual(Framing.ndjson.encodeString(body), utf8(`${body}\n`))
      assert.deepStrictEqual(Framing.ndjson.encode(utf8(body)), utf8(`${body}\n`))
      assert.deepStrictEqual(Framing.contentLength.encodeString(""), utf8("Content-Length: 0\r\n\r\n"))
    })

    it("handles bodies larger than the shared slab", () => {
      const body = "é".repeat(100_000)
      const framed = Framing.contentLength.encodeString(body)
      assert.strictEqual(text(framed), `Content-Length: 200000\r\n\r\n${body}`)
      assert.strictEqual(framed.buffer.byteLength, framed.length)
      assert.strictEqual(text(Framing.ndjson.encodeString(body)), `${body}\n`)
    })

    prop("encodeString agrees with encode of the UTF-8 bytes", [jsonValue], ([value]) => {
      const json = JSON.stringify(value)
      for (const [, framing] of framings) {
        assert.deepStrictEqual(framing.encodeString(json), framing.encode(utf8(json)))
      }
    })
  })

  for (const [name, framing] of framings) {
    describe(`${name} properties`, () => {
      prop(
        "decode(encode(values)) is the identity under any chunking",
        [fc.array(jsonMessage, { maxLength: 8 }), offsets, fc.boolean(), fc.boolean()],
        ([values, at, oneByte, fromBytes]) => {
          const jsons = values.map((value) => JSON.stringify(value))
          const stream = join(
            jsons.map((json) => fromBytes ? framing.encode(utf8(json)) : framing.encodeString(json))
          )
          const chunks = oneByte ? bytewise(stream) : cut(stream, at)
          assert.deepStrictEqual(run(framing, chunks), ok(jsons))
        }
      )

      prop(
        "never throws, and the outcome does not depend on the chunking",
        [anyBytes, offsets, fc.integer({ min: 0, max: 64 })],
        ([bytes, at, maxBodyBytes]) => {
          const limits = { maxHeaderBytes: 64, maxBodyBytes }
          const whole = run(framing, [bytes], limits)
          assert.deepStrictEqual(run(framing, cut(bytes, at), limits), whole)
          assert.deepStrictEqual(run(framing, bytewise(bytes), limits), whole)
        },
        { fastCheck: { numRuns: 500 } }
      )
    })
  }

  describe("contentLength resynchronisation", () => {
    prop(
      "recovers every frame after stray output and counts the skipped bytes exactly",
      [fc.array(fc.tuple(maybeGarbage, jsonValue), { maxLength: 8 }), maybeGarbage, offsets],
      ([items, trailing, at]) => {
        const parts: Array<Uint8Array> = []
        let skipped = 0
        for (const [stray, value] of items) {
          if (stray !== undefined) {
            parts.push(stray)
            skipped += stray.length
          }
          parts.push(Framing.contentLength.encodeString(JSON.stringify(value)))
        }
        if (trailing !== undefined) {
          parts.push(trailing)
          skipped += trailing.length
        }
        const expected = ok(items.map(([, value]) => JSON.stringify(value)), skipped)
        assert.deepStrictEqual(run(Framing.contentLength, cut(join(parts), at)), expected)
      }
    )
  })

  describe("ndjson resynchronisation", () => {
    prop(
      "recovers every frame after stray and blank lines and counts the skipped bytes exactly",
      [fc.array(fc.tuple(fc.array(strayLine, { maxLength: 3 }), jsonMessage), { maxLength: 8 }), offsets],
      ([items, at]) => {
        const parts: Array<Uint8Array> = []
        let skipped = 0
        for (const [strays, value] of items) {
          for (const stray of strays) {
            parts.push(stray)
            skipped += stray.length
          }
          parts.push(Framing.ndjson.encodeString(JSON.stringify(value)))
        }
        const expected = ok(items.map(([, value]) => JSON.stringify(value)), skipped)
        assert.deepStrictEqual(run(Framing.ndjson, cut(join(parts), at)), expected)
      }
    )
  })

  describe("contentLength hostile inputs", () => {
    const good = frame("{}")
    const cases: ReadonlyArray<{
      readonly name: string
      readonly chunks: ReadonlyArray<string | Uint8Array>
      readonly limits?: Partial<Framing.Limits>
      readonly expected: Outcome
    }> = [
      { name: "a body without any header is skipped", chunks: ["{\"a\":1}"], expected: ok([], 7) },
      {
        name: "a body without a header, then a frame on the next line",
        chunks: [`{"a":1}\n${good}`],
        expected: ok(["{}"], 8)
      },
      {
        name: "a header block without Content-Length is skipped",
        chunks: [`Content-Type: application/json\r\n\r\n{}\n${good}`],
        expected: ok(["{}"], 37)
      },
      {
        name: "a negative length is malformed",
        chunks: [`Content-Length: -2\r\n\r\n[]\n${good}`],
        expected: ok(["{}"], 25)
      },
      {
        name: "a non-numeric length is malformed; the next line starting with Content-Length: is a new header",
        chunks: [`Content-Length: abc\r\n\r\n${good}`],
        expected: ok(["{}"], 23)
      },
      { name: "a fractional length is malformed", chunks: [`Content-Length: 2.0\r\n\r\n[]`], expected: ok([], 25) },
      { name: "a hexadecimal length is malformed", chunks: [`Content-Length: 0x2\r\n\r\n[]`], expected: ok([], 25) },
      { name: "an empty length is malformed", chunks: [`Content-Length: \r\n\r\n[]`], expected: ok([], 22) },
      { name: "two numbers are malformed", chunks: [`Content-Length: 1 2\r\n\r\n[]`], expected: ok([], 25) },
      {
        name: "a huge length fails at once, before the body",
        chunks: ["Content-Length: 99999999999999999999999999\r\n"],
        expected: { frames: [], error: "BodyTooLarge", end: undefined, skipped: 0 }
      },
      {
        name: "a length just over maxBodyBytes fails",
        chunks: ["Content-Length: 11\r\n"],
        limits: { maxBodyBytes: 10 },
        expected: { frames: [], error: "BodyTooLarge", end: undefined, skipped: 0 }
      },
      {
        name: "a length of exactly maxBodyBytes passes",
        chunks: [frame("0123456789")],
        limits: { maxBodyBytes: 10 },
        expected: ok(["0123456789"])
      },
      {
        name: "a length shorter than the body: the excess is stray output",
        chunks: [`Content-Length: 2\r\n\r\n[]]\n${good}`],
        expected: ok(["[]", "{}"], 2)
      },
      {
        name: "a length shorter than the body, with no newline after: the excess costs its own byte only",
        chunks: [`Content-Length: 2\r\n\r\n[]]${good}`],
        expected: ok(["[]", "{}"], 1)
      },
      {
        name: "a length longer than the body waits, then the end truncates it",
        chunks: ["Content-Length: 10\r\n\r\n[]"],
        expected: { frames: [], error: undefined, end: "TruncatedFrame", skipped: 0 }
      },
      {
        name: "an unsupported charset before the Content-Length line fails at the Content-Length name",
        chunks: ["Content-Type: application/vscode-jsonrpc; charset=latin1\r\n", "Content-Length:"],
        expected: { frames: [], error: "UnsupportedContentType", end: undefined, skipped: 0 }
      },
      {
        name: "an unsupported charset in stray output that no Content-Length line follows is skipped",
        chunks: [`Content-Type: text/plain; charset=latin1\r\n\r\n${good}`],
        expected: ok(["{}"], 44)
      },
      {
        name: "utf-16 is unsupported too",
        chunks: [`Content-Length: 2\r\nContent-Type: application/json; charset="UTF-16"\r\n\r\n[]`],
        expected: { frames: [], error: "UnsupportedContentType", end: undefined, skipped: 0 }
      },
      {
        name: "Content-Type with charset=utf8, UTF-8, quoted, or none is accepted",
        chunks: [
          "Content-Length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf8\r\n\r\n[]",
          "Content-Type: application/json; CHARSET=UTF-8\r\nContent-Length: 2\r\n\r\n[]",
          "content-type: application/json;charset=\"utf-8\"\r\nContent-Length: 2\r\n\r\n[]",
          "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n[]"
        ],
        expected: ok(["[]", "[]", "[]", "[]"])
      },
      {
        name: "a header without the blank line is malformed",
        chunks: [`Content-Length: 2\r\n[]\n${good}`],
        expected: ok(["{}"], 22)
      },
      {
        name: "a header without the blank line at the end of input is truncated",
        chunks: ["Content-Length: 2\r\n"],
        expected: { frames: [], error: undefined, end: "TruncatedFrame", skipped: 0 }
      },
      {
        name: "bare LF line endings are malformed",
        chunks: [`Content-Length: 2\n\n[]\n${good}`],
        expected: ok(["{}"], 22)
      },
      {
        name: "a space before the colon is malformed",
        chunks: [`Content-Length : 2\r\n\r\n[]\n${good}`],
        expected: ok(["{}"], 25)
      },
      {
        name: "identical duplicate Content-Length headers are accepted",
        chunks: ["Content-Length: 2\r\nContent-Length: 02\r\n\r\n[]"],
        expected: ok(["[]"])
      },
      {
        name: "conflicting duplicate Content-Length headers fail",
        chunks: ["Content-Length: 2\r\nContent-Length: 3\r\n\r\n[]]"],
        expected: { frames: [], error: "InvalidContentLength", end: undefined, skipped: 0 }
      },
      {
        name: "header names are case-insensitive and unknown headers are ignored",
        chunks: [
          "content-length: 2\r\n\r\n[]",
          "CONTENT-LENGTH: 2\r\nX-Trace: a:b\r\n\r\n{}",
          "Content-length:2\r\n\r\n[]"
        ],
        expected: ok(["[]", "{}", "[]"])
      },
      {
        name: "spaces and tabs around the length are allowed",
        chunks: ["Content-Length: \t 2 \t\r\n\r\n[]"],
        expected: ok(["[]"])
      },
      { name: "a zero length is an empty frame", chunks: ["Content-Length: 0\r\n\r\n"], expected: ok([""]) },
      {
        name: "a stray CRLF between frames is skipped",
        chunks: [`${good}\r\n${good}`],
        expected: ok(["{}", "{}"], 2)
      },
      {
        name: "a header split across chunks",
        chunks: [
          "Cont",
          "ent-Le",
          "ngth: 1",
          "4\r",
          "\nContent-Type: app",
          "lication/json; charset=ut",
          "f-8\r\n\r",
          "\n",
          "{\"a\":\"é😀\"}"
        ],
        expected: ok(["{\"a\":\"é😀\"}"])
      },
      {
        name: "a multi-byte character split across chunks",
        chunks: [utf8(frame("[\"😀\"]")).subarray(0, 24), utf8(frame("[\"😀\"]")).subarray(24)],
        expected: ok(["[\"😀\"]"])
      },
      {
        name: "a header block at maxHeaderBytes passes",
        chunks: [good],
        limits: { maxHeaderBytes: 21 },
        expected: ok(["{}"])
      },
      {
        name: "a header block over maxHeaderBytes fails",
        chunks: [good],
        limits: { maxHeaderBytes: 20 },
        expected: { frames: [], error: "HeaderTooLarge", end: undefined, skipped: 0 }
      },
      {
        name: "an endless header line after a Content-Length line fails with HeaderTooLarge",
        chunks: ["Content-Length: 2\r\nX-Padding: ", "x".repeat(100)],
        limits: { maxHeaderBytes: 64 },
        expected: { frames: [], error: "HeaderTooLarge", end: undefined, skipped: 0 }
      },
      {
        name: "an endless line before any Content-Length name is stray output, however long",
        chunks: ["X-Padding: ", "x".repeat(100), good, "0123456789abcdef".repeat(1000), good],
        limits: { maxHeaderBytes: 64 },
        expected: ok(["{}", "{}"], 111 + 16_000)
      },
      {
        name: "stray output longer than maxHeaderBytes is skipped, not an error",
        chunks: [`${"garbage ".repeat(100)}\n${good}`],
        limits: { maxHeaderBytes: 64 },
        expected: ok(["{}"], 801)
      },
      {
        name: "frames before an error are returned with it",
        chunks: [`${good}${good}Content-Length: 99999999999\r\n`],
        expected: { frames: ["{}", "{}"], error: "BodyTooLarge", end: undefined, skipped: 0 }
      },
      {
        name: "input ending inside a header is truncated",
        chunks: [`${good}Content-Length:`],
        expected: { frames: ["{}"], error: undefined, end: "TruncatedFrame", skipped: 0 }
      },
      {
        name: "input ending before a whole Content-Length name is stray output",
        chunks: [`${good}Content-Le`],
        expected: ok(["{}"], 10)
      },
      {
        name: "input ending in stray output is not an error",
        chunks: [`${good}oops, sorry`],
        expected: ok(["{}"], 11)
      },
      {
        name: "input ending in something that might have become a header is stray output too",
        chunks: [`${good}oops`],
        expected: ok(["{}"], 4)
      }
    ]
    for (const { chunks, expected, limits, name } of cases) {
      it(name, () => {
        assert.deepStrictEqual(run(Framing.contentLength, chunks, limits), expected)
        // The same outcome one byte at a time.
        const bytes = join(chunks.map((chunk) => typeof chunk === "string" ? utf8(chunk) : chunk))
        assert.deepStrictEqual(run(Framing.contentLength, bytewise(bytes), limits), expected)
      })
    }

    it("skippedBytes counts garbage as it is skipped, except a partial Content-Length: match", () => {
      const d = Framing.contentLength.unsafeMakeDecoder()
      d.push(utf8("hello\nContent-Len"))
      assert.strictEqual(d.skippedBytes(), 6)
      const step = d.push(utf8("gth: 2\r\n\r\n[]"))
      assert.deepStrictEqual(step.frames.map(text), ["[]"])
      assert.strictEqual(d.skippedBytes(), 6)
    })
  })

  describe("ndjson hostile inputs", () => {
    const cases: ReadonlyArray<{
      readonly name: string
      readonly chunks: ReadonlyArray<string | Uint8Array>
      readonly limits?: Partial<Framing.Limits>
      readonly expected: Outcome
    }> = [
      { name: "one message per line", chunks: ["{\"a\":1}\n[2]\n"], expected: ok(["{\"a\":1}", "[2]"]) },
      { name: "CRLF is tolerated", chunks: ["{\"a\":1}\r\n"], expected: ok(["{\"a\":1}"]) },
      { name: "empty lines are skipped and counted", chunks: ["\n\n{}\n\r\n"], expected: ok(["{}"], 4) },
      { name: "blank lines are skipped and counted", chunks: [" \t\r\n{}\n"], expected: ok(["{}"], 4) },
      { name: "leading blanks are skipped and counted", chunks: ["  {}\n"], expected: ok(["{}"], 2) },
      { name: "stray lines are skipped and counted", chunks: ["hello world\n{}\n"], expected: ok(["{}"], 12) },
      { name: "a line that is not JSON still is a frame", chunks: ["{oops\n"], expected: ok(["{oops"]) },
      {
        name: "a line over maxBodyBytes fails",
        chunks: ["{123}\n"],
        limits: { maxBodyBytes: 4 },
        expected: { frames: [], error: "BodyTooLarge", end: undefined, skipped: 0 }
      },
      {
        name: "a line over maxBodyBytes fails before its LF arrives",
        chunks: ["{1234"],
        limits: { maxBodyBytes: 4 },
        expected: { frames: [], error: "BodyTooLarge", end: undefined, skipped: 0 }
      },
      {
        name: "the CR of a CRLF does not count towards maxBodyBytes",
        chunks: ["{12}\r", "\n"],
        limits: { maxBodyBytes: 4 },
        expected: ok(["{12}"])
      },
      {
        name: "stray lines are not bound by maxBodyBytes",
        chunks: ["x".repeat(1000), "\n{}\n"],
        limits: { maxBodyBytes: 4 },
        expected: ok(["{}"], 1001)
      },
      {
        name: "an unterminated last line is truncated",
        chunks: ["{}\n{}"],
        expected: { frames: ["{}"], error: undefined, end: "TruncatedFrame", skipped: 0 }
      },
      { name: "unterminated stray output at the end is skipped", chunks: ["{}\noops"], expected: ok(["{}"], 4) },
      {
        name: "a line split across chunks, CR and LF in different chunks",
        chunks: ["{\"a\":\"é", "😀\"}\r", "\n"],
        expected: ok(["{\"a\":\"é😀\"}"])
      },
      {
        name: "a multi-byte character split across chunks",
        chunks: [utf8("[\"😀\"]\n").subarray(0, 4), utf8("[\"😀\"]\n").subarray(4)],
        expected: ok(["[\"😀\"]"])
      }
    ]
    for (const { chunks, expected, limits, name } of cases) {
      it(name, () => {
        assert.deepStrictEqual(run(Framing.ndjson, chunks, limits), expected)
        const bytes = join(chunks.map((chunk) => typeof chunk === "string" ? utf8(chunk) : chunk))
        assert.deepStrictEqual(run(Framing.ndjson, bytewise(bytes), limits), expected)
      })
    }
  })

  describe("no copy", () => {
    it("a Content-Length body inside one chunk is a view on that chunk", () => {
      const chunk = utf8(`xx${frame("{\"a\":1}")}${frame("[]")}`).subarray(2)
      const [first, second] = Framing.contentLength.unsafeMakeDecoder().push(chunk).frames
      assert.strictEqual(first.buffer, chunk.buffer)
      assert.strictEqual(first.byteOffset, chunk.byteOffset + 21)
      assert.strictEqual(second.buffer, chunk.buffer)
    })

    it("a body whose header came in an earlier chunk is still a view", () => {
      const d = Framing.contentLength.unsafeMakeDecoder()
      d.push(utf8("Content-Length: 2\r\n\r"))
      const chunk = utf8("\n[]")
      const [body] = d.push(chunk).frames
      assert.strictEqual(body.buffer, chunk.buffer)
    })

    it("a body across chunks is copied once into a buffer of its exact length", () => {
      const d = Framing.contentLength.unsafeMakeDecoder()
      d.push(utf8("Content-Length: 7\r\n\r\n{\"a\""))
      const [body] = d.push(utf8(":1}")).frames
      assert.strictEqual(text(body), "{\"a\":1}")
      assert.strictEqual(body.buffer.byteLength, 7)
    })

    it("an NDJSON line inside one chunk is a view, also when its LF comes later", () => {
      const chunk = utf8("{\"a\":1}\n[]\r")
      const d = Framing.ndjson.unsafeMakeDecoder()
      const [first] = d.push(chunk).frames
      assert.strictEqual(first.buffer, chunk.buffer)
      const [second] = d.push(utf8("\n")).frames
      assert.strictEqual(text(second), "[]")
      assert.strictEqual(second.buffer, chunk.buffer)
      const third = utf8("[3]")
      d.push(third)
      d.push(utf8("\r"))
      const [body] = d.push(utf8("\n")).frames
      assert.strictEqual(text(body), "[3]")
      assert.strictEqual(body.buffer, third.buffer)
    })
  })

  describe("decode (Stream)", () => {
    const bytes = (...parts: ReadonlyArray<string>) => Stream.fromIterable(parts.map(utf8))

    it.effect("emits the frames of each chunk", () =>
      Effect.gen(function*() {
        const frames = yield* bytes(frame("{}") + frame("[1]"), "Content-Length: 2\r\n", "\r\n[]").pipe(
          Stream.rechunk(1),
          Framing.decode(Framing.contentLength),
          Stream.chunks,
          Stream.map((chunk) => chunk.map(text)),
          Stream.runCollect
        )
        assert.deepStrictEqual(frames, [["{}", "[1]"], ["[]"]])
      }))

    it.effect("emits the frames before an error, then fails with it", () =>
      Effect.gen(function*() {
        const items = yield* Framing.decode(
          bytes(frame("{}"), `${frame("[]")}Content-Length: 100\r\n\r\n`, frame("{}")),
          Framing.contentLength,
          { maxBodyBytes: 10 }
        ).pipe(Stream.result, Stream.runCollect)
        const shown = items.map(Result.match({ onFailure: (e) => e.reason, onSuccess: text }))
        assert.deepStrictEqual(shown, ["{}", "[]", "BodyTooLarge"])
      }))

    it.effect("fails with TruncatedFrame when the input ends inside a frame", () =>
      Effect.gen(function*() {
        const error = yield* bytes("{}\n{\"a\"").pipe(Framing.decode(Framing.ndjson), Stream.runDrain, Effect.flip)
        assert.strictEqual(error._tag, "FramingError")
        assert.strictEqual(error.reason, "TruncatedFrame")
      }))

    it.effect("passes upstream errors through after the frames before them", () =>
      Effect.gen(function*() {
        const upstream = Stream.concat(bytes(frame("{}")), Stream.fail("boom" as const))
        const items = yield* upstream.pipe(Framing.decode(Framing.contentLength), Stream.result, Stream.runCollect)
        const shown = items.map(Result.match({ onFailure: (e) => e, onSuccess: text }))
        assert.deepStrictEqual(shown, ["{}", "boom"])
      }))

    it.effect("uses a fresh decoder for each run", () =>
      Effect.gen(function*() {
        const stream = bytes("{}\n[", "1]\n").pipe(Framing.decode(Framing.ndjson))
        const first = yield* Stream.runCollect(stream)
        const second = yield* Stream.runCollect(stream)
        assert.deepStrictEqual(first.map(text), ["{}", "[1]"])
        assert.deepStrictEqual(second.map(text), ["{}", "[1]"])
      }))

    it.effect("encode frames each body for decode", () =>
      Effect.gen(function*() {
        for (const [, framing] of framings) {
          const frames = yield* bytes("{}", "[\"é\"]").pipe(
            Framing.encode(framing),
            Framing.decode(framing),
            Stream.runCollect
          )
          assert.deepStrictEqual(frames.map(text), ["{}", "[\"é\"]"])
        }
      }))
  })
})
