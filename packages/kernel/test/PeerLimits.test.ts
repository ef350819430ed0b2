/**
 * A peer against a hostile other side, over `TestTransport`: a batch over `maxBatchItems` or `maxBatchBytes` and a
 * body nested deeper than `maxDepth` are each answered with exactly one -32600 (id `null`), nothing of them is served,
 * and the peer serves the next request; a flood of invalid frames logs one WARN per `invalidMessageLogInterval`, on
 * the Clock, and says how many it left out.
 */
import { assert, describe, it } from "@effect/vitest"
import { ErrorCode } from "@lifeline/jsonrpc"
import { Method, Peer, Protocol } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Logger, Schema } from "effect"
import { TestClock } from "effect/testing"
import { eventually, makeRaw, yieldTimes } from "./utils.js"

const Echo = Method.request("echo", { params: Schema.Struct({ text: Schema.String }), result: Schema.String })
const Server = Protocol.make({ serves: [Echo] })

const setup = (options: Partial<Pick<Peer.Options<never, never, never>, "limits" | "invalidMessageLogInterval">>) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    let served = 0
    const server = yield* Peer.make({
      protocol: Server,
      transport: pair.left,
      handlers: {
        echo: ({ text }) =>
          Effect.sync(() => {
            served++
            return text
          })
      },
      ...options
    })
    const raw = yield* makeRaw(pair.right)
    return { server, raw, served: () => served }
  })

const echo = (id: number) => ({ jsonrpc: "2.0", id, method: "echo", params: { text: `hi ${id}` } })

/** The one answer to a refused body, then the answer to a request sent after it: nothing else in between. */
const refusedThenServed = (raw: { readonly next: Effect.Effect<any>; readonly received: any }, detail: string) =>
  Effect.gen(function*() {
    const refusal = yield* raw.next
    assert.deepStrictEqual(refusal, {
      jsonrpc: "2.0",
      id: null,
      error: { code: ErrorCode.InvalidRequest, message: "Invalid Request", data: detail }
    })
    const next = yield* raw.next
    assert.deepStrictEqual(next, { jsonrpc: "2.0", id: 999, result: "hi 999" })
  })

describe("Peer limits", () => {
  it.effect("a batch over maxBatchItems is answered with one error, id null, and the peer serves the next request", () =>
    Effect.gen(function*() {
      const { raw, served, server } = yield* setup({ limits: { maxBatchItems: 5 } })
      yield* raw.send(Array.from({ length: 6 }, (_, i) => echo(i)))
      yield* raw.send(echo(999))
      yield* refusedThenServed(raw, "A batch of more than 5 messages (maxBatchItems)")
      assert.strictEqual(served(), 1)
      // Exactly five is a batch, served and answered as one array.
      yield* raw.send(Array.from({ length: 5 }, (_, i) => echo(i)))
      const batch = yield* raw.next
      assert.deepStrictEqual(batch.map((answer: any) => answer.id).sort(), [0, 1, 2, 3, 4])
      assert.strictEqual(served(), 6)
      assert.strictEqual((yield* server.stats).invalidMessages, 1)
    }))

  it.effect("the default item bound: 1,001 requests are one error, not 1,001 answers", () =>
    Effect.gen(function*() {
      const { raw, served } = yield* setup({})
      yield* raw.send(Array.from({ length: 1001 }, (_, i) => echo(i)))
      yield* raw.send(echo(999))
      yield* refusedThenServed(raw, "A batch of more than 1000 messages (maxBatchItems)")
      assert.strictEqual(served(), 1)
    }))

  it.effect("a batch over maxBatchBytes is answered with one error, id null, and the peer serves the next request", () =>
    Effect.gen(function*() {
      const { raw, served } = yield* setup({ limits: { maxBatchBytes: 200 } })
      const batch = Array.from({ length: 4 }, (_, i) => echo(i))
      const bytes = new TextEncoder().encode(JSON.stringify(batch)).length
      assert.isAbove(bytes, 200)
      yield* raw.send(batch)
      yield* raw.send(echo(999))
      yield* refusedThenServed(raw, `A batch of ${bytes} bytes, more than 200 (maxBatchBytes)`)
      assert.strictEqual(served(), 1)
    }))

  it.effect("a body nested deeper than maxDepth is answered as invalid, id null, and the peer serves on", () =>
    Effect.gen(function*() {
      const { raw, served } = yield* setup({ limits: { maxDepth: 8 } })
      // Its id cannot be known without parsing it: the answer has id null.
      yield* raw.sendBytes(
        frame(`{"jsonrpc":"2.0","id":7,"method":"echo","params":{"text":${"[".repeat(8)}${"]".repeat(8)}}}`)
      )
      yield* raw.send(echo(999))
      yield* refusedThenServed(raw, "Nested deeper than 8 levels (maxDepth)")
      assert.strictEqual(served(), 1)
    }))

  it.effect("a 10 MB nested frame under the default bound: one error, no stack overflow, and the peer serves on", () =>
    Effect.gen(function*() {
      const { raw, served } = yield* setup({ limits: { maxBodyBytes: 16 * 1024 * 1024 } })
      const levels = 5 * 1024 * 1024
      yield* raw.sendBytes(frame("[".repeat(levels) + "]".repeat(levels)))
      yield* raw.send(echo(999))
      yield* refusedThenServed(raw, "Nested deeper than 128 levels (maxDepth)")
      assert.strictEqual(served(), 1)
    }))

  describe("invalid-message WARNs are rate-limited", () => {
    const capture = () => {
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (logLevel === "Warn") lines.push(Array.isArray(message) ? String(message[0]) : String(message))
      })
      return { lines, layer: Logger.layer([logger]) }
    }

    it.effect("one line per interval, on the Clock; the next one says how many it left out; every frame answered", () => {
      const { layer, lines } = capture()
      return Effect.gen(function*() {
        const { raw, server } = yield* setup({ invalidMessageLogInterval: "2 seconds" })
        const garbage = (n: number) =>
          Effect.gen(function*() {
            for (let i = 0; i < n; i++) yield* raw.sendBytes(frame("{nope"))
            yield* eventually(Effect.map(server.stats, (s) => s.invalidMessages >= counted + n), "frames read")
            counted += n
          })
        let counted = 0
        yield* garbage(500)
        assert.strictEqual(lines.length, 1)
        assert.match(lines[0], /^invalid message: Parse error$/)
        // Within the interval: counted, not logged.
        yield* TestClock.adjust("1999 millis")
        yield* garbage(10)
        assert.strictEqual(lines.length, 1)
        // After it: one line that says how many were left out since the last one.
        yield* TestClock.adjust("1 millis")
        yield* garbage(10)
        assert.deepStrictEqual(lines.slice(1), [
          "invalid message: Parse error (and 509 more warning(s) about the peer's messages not logged since the last one)"
        ])
        yield* TestClock.adjust("2 seconds")
        yield* garbage(1)
        assert.deepStrictEqual(lines.slice(2), [
          "invalid message: Parse error (and 9 more warning(s) about the peer's messages not logged since the last one)"
        ])
        // Nothing is lost: every frame was counted and answered.
        assert.strictEqual((yield* server.stats).invalidMessages, 521)
        let answers = 0
        while (answers < 521) {
          const answer = yield* raw.next
          assert.strictEqual(answer.error.code, ErrorCode.ParseError)
          answers++
        }
        yield* yieldTimes(5)
      }).pipe(Effect.provide(layer))
    })

    it.effect("answers to ids never sent and notifications whose params do not decode share the limit", () => {
      const { layer, lines } = capture()
      return Effect.gen(function*() {
        const { raw, server } = yield* setup({})
        for (let i = 0; i < 300; i++) yield* raw.send({ jsonrpc: "2.0", id: 5000 + i, result: null })
        yield* eventually(Effect.map(server.stats, (s) => s.unknownResponses === 300))
        yield* raw.sendBytes(frame("{nope"))
        yield* eventually(Effect.map(server.stats, (s) => s.invalidMessages === 1))
        assert.deepStrictEqual(lines, ["response to an id never sent: 5000"])
        yield* TestClock.adjust("1 second")
        yield* raw.send({ jsonrpc: "2.0", id: 1, result: null })
        yield* eventually(Effect.map(server.stats, (s) => s.unknownResponses === 301))
        assert.deepStrictEqual(lines.slice(1), [
          "response to an id never sent: 1 (and 300 more warning(s) about the peer's messages not logged since the last one)"
        ])
      }).pipe(Effect.provide(layer))
    })

    it.effect("the default interval is 1 second", () => {
      const { layer, lines } = capture()
      return Effect.gen(function*() {
        const { raw, server } = yield* setup({})
        for (let i = 0; i < 3; i++) yield* raw.sendBytes(frame("[]"))
        yield* eventually(Effect.map(server.stats, (s) => s.invalidMessages === 3))
        assert.strictEqual(lines.length, 1)
        yield* TestClock.adjust("999 millis")
        yield* raw.sendBytes(frame("[]"))
        yield* eventually(Effect.map(server.stats, (s) => s.invalidMessages === 4))
        assert.strictEqual(lines.length, 1)
        yield* TestClock.adjust("1 millis")
        yield* raw.sendBytes(frame("[]"))
        yield* eventually(Effect.map(server.stats, (s) => s.invalidMessages === 5))
        assert.strictEqual(lines.length, 2)
      }).pipe(Effect.provide(layer))
    })
  })
})

const frame = (body: string): Uint8Array => {
  const bytes = new TextEncoder().encode(body)
  const head = new TextEncoder().encode(`Content-Length: ${bytes.length}\r\n\r\n`)
  const out = new Uint8Array(head.length + bytes.length)
  out.set(head)
  out.set(bytes, head.length)
  return out
}
