/**
 * `Message.parse`'s bounds on one body (`Message.Limits`): batch items, batch bytes and nesting depth, found by a scan
 * before `JSON.parse` runs. What the scan must get right: brackets and commas inside strings (with escapes) do not
 * count, the exact limit passes and one more is refused, and a hostile body is refused without a stack overflow.
 */
import { assert, describe, it } from "@effect/vitest"
import { ErrorCode, Message } from "@lifeline/jsonrpc"
import * as fc from "fast-check"

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text)

/** The one -32600 of a refused body, as its detail, or `undefined` when the body was parsed. */
const refusal = (text: string, limits?: Partial<Message.Limits>): string | undefined => {
  const incoming = Message.parse(utf8(text), Message.resolveLimits(limits))
  if (incoming._tag !== "Single" || incoming.item._tag !== "Invalid") return undefined
  if (incoming.item.error.code !== ErrorCode.InvalidRequest) return undefined
  assert.strictEqual(incoming.item.id, null)
  assert.isTrue(incoming.item.respond)
  const detail = incoming.item.error.data
  return typeof detail === "string" && /maxDepth|maxBatchItems|maxBatchBytes/.test(detail) ? detail : undefined
}

/** A request whose params nest `levels` arrays, so the body is `levels + 1` deep, and long enough to be scanned. */
const nested = (levels: number, padding = 300) =>
  `{"jsonrpc":"2.0","id":1,"method":"${"m".repeat(padding)}","params":${"[".repeat(levels)}${"]".repeat(levels)}}`

const batchOf = (items: number) =>
  `[${Array.from({ length: items }, (_, i) => `{"jsonrpc":"2.0","id":${i},"method":"ping"}`).join(",")}]`

describe("Message.parse limits", () => {
  it("the defaults are documented numbers", () => {
    assert.deepStrictEqual(Message.defaultLimits, {
      maxBatchItems: 1000,
      maxBatchBytes: 16 * 1024 * 1024,
      maxDepth: 128
    })
  })

  describe("depth", () => {
    // Up to 256 KiB a body is checked after JSON.parse (a walk), above before it (a scan): both tiers, alike.
    for (const [tier, padding] of [["walked", 300], ["scanned", 300_000]] as const) {
      it(`the exact limit is parsed, one level more is one -32600 with id null (${tier})`, () => {
        assert.isUndefined(refusal(nested(127, padding)))
        assert.strictEqual(refusal(nested(128, padding)), "Nested deeper than 128 levels (maxDepth)")
        assert.isUndefined(refusal(nested(9, padding), { maxDepth: 10 }))
        assert.strictEqual(refusal(nested(10, padding), { maxDepth: 10 }), "Nested deeper than 10 levels (maxDepth)")
      })
    }

    it("brackets inside strings do not count, escaped quotes do not end a string", () => {
      const inString = `{"jsonrpc":"2.0","id":1,"method":"m","params":["${"[{".repeat(500)}"]}`
      assert.isUndefined(refusal(inString, { maxDepth: 3 }))
      // An escaped quote, then brackets still inside the string; then an escaped backslash ends it for real.
      const escaped = `{"jsonrpc":"2.0","id":1,"method":"m","params":["a\\"[[[[[[","b\\\\",[[[]]]]}`
      assert.isUndefined(refusal(escaped, { maxDepth: 5 }))
      assert.strictEqual(refusal(escaped, { maxDepth: 4 }), "Nested deeper than 4 levels (maxDepth)")
      // `\\"` is an escaped backslash and a closing quote: the `[[[` after it is outside the string.
      const closing = `{"jsonrpc":"2.0","id":1,"method":"m","params":["x\\\\",[[[1]]]]}`
      assert.strictEqual(refusal(closing, { maxDepth: 4 }), "Nested deeper than 4 levels (maxDepth)")
      // `\\\"` is an escaped backslash and an escaped quote: still inside.
      const inside = `{"jsonrpc":"2.0","id":1,"method":"m","params":["x\\\\\\"[[[[[[[[", 1]}`
      assert.isUndefined(refusal(inside, { maxDepth: 2 }))
      assert.strictEqual(Message.parse(utf8(inside))._tag, "Single")
    })

    it("a body too short to break the bound is not scanned, and parses as before", () => {
      // 2 × maxDepth + 1 characters cannot nest deeper than maxDepth: the scan is skipped, and JSON.parse judges it.
      const incoming = Message.parse(utf8("[".repeat(10) + "]".repeat(10)), Message.resolveLimits({ maxDepth: 10 }))
      assert.strictEqual(incoming._tag, "Batch")
    })

    it("a 10 MB nested body is refused at once, without RangeError or stack overflow", () => {
      const levels = 5 * 1024 * 1024
      const body = utf8("[".repeat(levels) + "]".repeat(levels))
      const started = performance.now()
      const incoming = Message.parse(body)
      const millis = performance.now() - started
      assert.strictEqual(incoming._tag, "Single")
      if (incoming._tag === "Single" && incoming.item._tag === "Invalid") {
        assert.strictEqual(incoming.item.error.code, ErrorCode.InvalidRequest)
        assert.strictEqual(incoming.item.error.data, "Nested deeper than 128 levels (maxDepth)")
      } else assert.fail("expected Invalid")
      // The scan stops at level 129; what is left is decoding the text (JSON.parse alone takes seconds).
      assert.isBelow(millis, 1000)
    })

    it("deep objects, deep mixed, and whitespace count alike", () => {
      const objects = `{"jsonrpc":"2.0","id":1,"method":"m","params":${`{"a": `.repeat(40)}1${"}".repeat(40)}}`
      assert.isUndefined(refusal(objects, { maxDepth: 41 }))
      assert.strictEqual(refusal(objects, { maxDepth: 40 }), "Nested deeper than 40 levels (maxDepth)")
    })

    it("both checks refuse exactly the bodies deeper than maxDepth (property)", () => {
      // Random values of known depth, in a body with strings full of brackets, quotes and backslashes.
      const text = fc.string({ unit: fc.constantFrom("[", "]", "{", "}", "\"", "\\", ",", "a", "é") })
      const value: fc.Arbitrary<unknown> = fc.letrec<{ v: unknown }>((tie) => ({
        v: fc.oneof(
          { depthSize: "small", withCrossShrink: true },
          text,
          fc.integer(),
          fc.array(tie("v"), { maxLength: 3 }),
          fc.dictionary(text, tie("v"), { maxKeys: 3 })
        )
      })).v
      const depthOf = (u: unknown): number => {
        if (typeof u !== "object" || u === null) return 0
        const children = Object.values(u as object)
        return 1 + (children.length === 0 ? 0 : Math.max(...children.map(depthOf)))
      }
      fc.assert(
        fc.property(
          value,
          fc.integer({ min: 1, max: 8 }),
          fc.constantFrom(40, 300_000),
          (params, maxDepth, padding) => {
            const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "x".repeat(padding), params: [params] })
            const depth = 1 + depthOf([params])
            const refused = refusal(body, { maxDepth }) !== undefined
            // Bodies too short to be scanned are never refused; scanned ones are refused exactly when too deep.
            return refused === (depth > maxDepth && body.length > 2 * maxDepth + 1)
          }
        ),
        { numRuns: 500 }
      )
    })
  })

  describe("batches", () => {
    it("the exact item limit is a batch, one more is one -32600 with id null", () => {
      const exact = Message.parse(utf8(batchOf(1000)))
      assert.strictEqual(exact._tag, "Batch")
      assert.strictEqual(exact._tag === "Batch" ? exact.items.length : 0, 1000)
      assert.strictEqual(refusal(batchOf(1001)), "A batch of more than 1000 messages (maxBatchItems)")
      assert.strictEqual(refusal(batchOf(4), { maxBatchItems: 3 }), "A batch of more than 3 messages (maxBatchItems)")
    })

    it("the item limit holds in the scanned tier too (a batch over 256 KiB)", () => {
      const item = `{"jsonrpc":"2.0","id":1,"method":"${"m".repeat(150_000)}"}`
      assert.strictEqual(
        Message.parse(utf8(`[${item},${item}]`), Message.resolveLimits({ maxBatchItems: 2 }))._tag,
        "Batch"
      )
      assert.strictEqual(
        refusal(`[${item},${item},${item}]`, { maxBatchItems: 2 }),
        "A batch of more than 2 messages (maxBatchItems)"
      )
    })

    it("commas inside strings and nested values are not items", () => {
      const item = `{"jsonrpc":"2.0","id":1,"method":"${"a,b,c".padEnd(150_000, ",")}","params":[1,2,3,{"x":1,"y":2}]}`
      const body = ` \n[${item},${item}]`.padEnd(400, " ")
      assert.isUndefined(refusal(body, { maxBatchItems: 2 }))
      assert.strictEqual(
        refusal(`[${item},${item},${item}]`.padEnd(400, " "), { maxBatchItems: 2 }),
        "A batch of more than 2 messages (maxBatchItems)"
      )
      // A single message's commas are never counted as items.
      assert.isUndefined(
        refusal(`{"jsonrpc":"2.0","id":1,"method":"m","params":[${"1,".repeat(500)}1]}`, { maxBatchItems: 2 })
      )
    })

    it("a batch over the byte limit is refused before it is scanned or parsed", () => {
      const body = batchOf(100)
      assert.isUndefined(refusal(body, { maxBatchBytes: body.length }))
      assert.strictEqual(
        refusal(body, { maxBatchBytes: body.length - 1 }),
        `A batch of ${body.length} bytes, more than ${body.length - 1} (maxBatchBytes)`
      )
      // A single message of that size is bounded by the framing's maxBodyBytes only.
      const single = `{"jsonrpc":"2.0","id":1,"method":"m","params":["${"x".repeat(body.length)}"]}`
      assert.strictEqual(Message.parse(utf8(single), Message.resolveLimits({ maxBatchBytes: 10 }))._tag, "Single")
      const parsed = Message.parse(utf8(single), Message.resolveLimits({ maxBatchBytes: 10 }))
      assert.strictEqual(parsed._tag === "Single" ? parsed.item._tag : "", "Request")
    })

    it("600,000 requests are refused without building them", () => {
      const text = batchOf(600_000)
      const started = performance.now()
      // With the byte bound lifted, the item count refuses it: the scan stops at the 1,001st item.
      const byItems = refusal(text, { maxBatchBytes: 1024 * 1024 * 1024 })
      assert.isBelow(performance.now() - started, 2000)
      assert.strictEqual(byItems, "A batch of more than 1000 messages (maxBatchItems)")
      const bytes = utf8(text).length
      assert.strictEqual(refusal(text), `A batch of ${bytes} bytes, more than ${16 * 1024 * 1024} (maxBatchBytes)`)
    })
  })
})
