/**
 * Stray output from the other side (issue 25, item 2): text without a line break before a frame (`50%`) costs its own
 * bytes only, every later request is served, and what the reader skipped is logged once per burst, not per chunk.
 */
import { assert, describe, it } from "@effect/vitest"
import { Method, Peer, Protocol } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Logger, Schema } from "effect"
import { eventually, makeRaw } from "./utils.js"

const Echo = Method.request("echo", { params: Schema.Struct({ text: Schema.String }), result: Schema.String })

const withWarnings = <A, E, R>(body: (warnings: Array<string>) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const warnings: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      if (logLevel === "Warn") warnings.push(Array.isArray(message) ? String(message[0]) : String(message))
    })
    return yield* body(warnings).pipe(Effect.provide(Logger.layer([logger])))
  })

const serve = Effect.gen(function*() {
  const pair = yield* TestTransport.makePair()
  const raw = yield* makeRaw(pair.right)
  yield* Peer.make({
    protocol: Protocol.make({ serves: [Echo] }),
    transport: pair.left,
    handlers: { echo: ({ text }) => Effect.succeed(text) }
  })
  const request = (id: number) => JSON.stringify({ jsonrpc: "2.0", id, method: "echo", params: { text: `t${id}` } })
  const frame = (id: number) => `Content-Length: ${request(id).length}\r\n\r\n${request(id)}`
  return { pair, raw, frame }
})

describe("Peer and stray output", () => {
  it.effect("`50%` before every frame: every request is answered, each burst logged once", () =>
    withWarnings((warnings) =>
      Effect.gen(function*() {
        const { frame, raw } = yield* serve
        for (let id = 1; id <= 20; id++) yield* raw.sendBytes(`50%${frame(id)}`)
        for (let id = 1; id <= 20; id++) {
          assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", id, result: `t${id}` })
        }
        assert.deepStrictEqual(
          warnings,
          Array.from({ length: 20 }, () => "skipped 3 bytes from the peer that were not frames")
        )
      })
    ))

  it.effect("a burst over many chunks is one line, logged when the next frame comes; trailing output at the end", () =>
    withWarnings((warnings) =>
      Effect.gen(function*() {
        const { frame, pair, raw } = yield* serve
        for (let k = 0; k < 100; k++) yield* raw.sendBytes("0123456789abcdef".repeat(64)) // 100 KiB, no line break
        assert.deepStrictEqual(warnings, [])
        yield* raw.sendBytes(frame(1))
        assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", id: 1, result: "t1" })
        assert.deepStrictEqual(warnings, ["skipped 102400 bytes from the peer that were not frames"])
        yield* raw.sendBytes("progress: 99%")
        yield* pair.rightToLeft.close
        yield* eventually(Effect.sync(() => warnings.length === 2), "the trailing burst logged")
        assert.strictEqual(warnings[1], "skipped 13 bytes from the peer that were not frames")
      })
    ))
})
