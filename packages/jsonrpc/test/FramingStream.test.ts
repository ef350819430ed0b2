/**
 * The decoder loop (`decodeChunks`) and the stream adapters (`decode`, `encode`) of Framing.ts, pinned down beyond
 * the round trips of Framing.test.ts: a decoder is driven exactly as documented (mutation testing, issue 20).
 */
import { assert, describe, it } from "@effect/vitest"
import { Framing } from "@lifeline/jsonrpc"
import { Effect, Result, Stream } from "effect"
import { utf8 } from "./utils/decode.js"

const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes)

/** A decoder that answers each push from a script and records what it was given. */
const scripted = (steps: ReadonlyArray<Framing.DecodeStep>) => {
  const pushed: Array<string> = []
  let next = 0
  const decoder: Framing.Decoder = {
    push: (chunk) => {
      pushed.push(text(chunk))
      return steps[next++]
    },
    end: () => undefined,
    skippedBytes: () => 0
  }
  return { decoder, pushed }
}

const failure = new Framing.FramingError({ reason: "BodyTooLarge", detail: "too large" })

describe("Framing.decodeChunks", () => {
  it("returns a single chunk's step as the decoder made it", () => {
    const step: Framing.DecodeStep = { frames: [utf8("a")], error: undefined }
    const { decoder } = scripted([step])
    assert.strictEqual(Framing.decodeChunks(decoder, [utf8("x")]), step)
  })

  it("feeds the chunks in order, collects their frames in order, and stops at the first error", () => {
    const { decoder, pushed } = scripted([
      { frames: [utf8("1"), utf8("2")], error: undefined },
      { frames: [], error: undefined },
      { frames: [utf8("3")], error: failure },
      { frames: [utf8("never")], error: undefined }
    ])
    const step = Framing.decodeChunks(decoder, [utf8("a"), utf8("b"), utf8("c"), utf8("d")])
    assert.deepStrictEqual(pushed, ["a", "b", "c"])
    assert.deepStrictEqual(step.frames.map(text), ["1", "2", "3"])
    assert.strictEqual(step.error, failure)
  })

  it("no chunks: no frames, no error, nothing pushed", () => {
    const { decoder, pushed } = scripted([])
    assert.deepStrictEqual(Framing.decodeChunks(decoder, []), { frames: [], error: undefined })
    assert.deepStrictEqual(pushed, [])
  })

  it("several chunks without an error: the frames of all, no error", () => {
    const decoder = Framing.ndjson.unsafeMakeDecoder()
    const step = Framing.decodeChunks(decoder, [utf8("{}\n["), utf8("1]\n"), utf8("[2]\n")])
    assert.deepStrictEqual(step.frames.map(text), ["{}", "[1]", "[2]"])
    assert.isUndefined(step.error)
  })
})

describe("Framing.decode", () => {
  const frame = (body: string) => `Content-Length: ${utf8(body).length}\r\n\r\n${body}`

  it.effect("stops reading upstream at the first error", () =>
    Effect.gen(function*() {
      const read: Array<string> = []
      const upstream = Stream.fromIterable([frame("{}"), "Content-Length: 99\r\n", frame("[]"), frame("[1]")]).pipe(
        Stream.rechunk(1),
        Stream.tap((chunk) => Effect.sync(() => read.push(chunk))),
        Stream.map(utf8)
      )
      const items = yield* upstream.pipe(
        Framing.decode(Framing.contentLength, { maxBodyBytes: 10 }),
        Stream.result,
        Stream.runCollect
      )
      assert.deepStrictEqual(items.map(Result.match({ onFailure: (e) => e.reason, onSuccess: text })), [
        "{}",
        "BodyTooLarge"
      ])
      assert.strictEqual(read.length, 2)
    }))

  it.effect("limits reach the decoder in both forms; the end of input inside a frame fails", () =>
    Effect.gen(function*() {
      const input = Stream.make(utf8("{1234}\n"))
      const dataLast = yield* input.pipe(
        Framing.decode(Framing.ndjson, { maxBodyBytes: 5 }),
        Stream.runDrain,
        Effect.flip
      )
      assert.strictEqual(dataLast.reason, "BodyTooLarge")
      const dataFirst = yield* Framing.decode(input, Framing.ndjson, { maxBodyBytes: 5 }).pipe(
        Stream.runDrain,
        Effect.flip
      )
      assert.strictEqual(dataFirst.reason, "BodyTooLarge")
      const truncated = yield* Stream.make(utf8(frame("{}")), utf8("Content-Length: 5\r\n\r\n{")).pipe(
        Framing.decode(Framing.contentLength),
        Stream.result,
        Stream.runCollect
      )
      assert.deepStrictEqual(truncated.map(Result.match({ onFailure: (e) => e.reason, onSuccess: text })), [
        "{}",
        "TruncatedFrame"
      ])
    }))

  it.effect("an input that ends between frames just ends; chunks without a frame emit nothing", () =>
    Effect.gen(function*() {
      const chunks = yield* Stream.fromIterable(["{", "}\n", "\n", "junk\n", "[1]", "\n"]).pipe(
        Stream.rechunk(1),
        Stream.map(utf8),
        Framing.decode(Framing.ndjson),
        Stream.chunks,
        Stream.map((chunk) => chunk.map(text)),
        Stream.runCollect
      )
      assert.deepStrictEqual(chunks, [["{}"], ["[1]"]])
    }))

  it.effect("encode frames each body, in both forms", () =>
    Effect.gen(function*() {
      const bodies = Stream.make(utf8("{}"), utf8("[1]"))
      const dataFirst = yield* Stream.runCollect(Framing.encode(bodies, Framing.ndjson))
      assert.deepStrictEqual(dataFirst.map(text), ["{}\n", "[1]\n"])
      const dataLast = yield* Stream.runCollect(bodies.pipe(Framing.encode(Framing.contentLength)))
      assert.deepStrictEqual(dataLast.map(text), [frame("{}"), frame("[1]")])
    }))
})
