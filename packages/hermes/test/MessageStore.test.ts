import { assert, describe, it } from "@effect/vitest"
import { Hl7, MessageStore } from "@lifeline/hermes"
import { Effect, Fiber, Result, Stream } from "effect"
import * as fc from "fast-check"

const message = "MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|42|P|2.5\rPID|1||123||DOE^JOHN||19800101"

/**
 * What `patch` answered before `Hl7.patch`: `Hl7.set` after `Hl7.set`, then `formatChecked` once; the index of a
 * `BreaksMessage` found by applying and checking again after each patch.
 */
const referencePatch = (
  text: string,
  patches: ReadonlyArray<{ readonly path: string; readonly value: string | null }>
) => {
  const rejected = (index: number, error: Hl7.Hl7Error) => ({
    index,
    path: patches[index]?.path ?? "",
    reason: error.reason,
    detail: error.detail
  })
  const parsed = Hl7.parse(text)
  if (Result.isFailure(parsed)) return rejected(0, parsed.failure)
  if (patches.length === 0) return text
  let current = parsed.success
  for (let i = 0; i < patches.length; i++) {
    const next = Hl7.set(current, patches[i].path, patches[i].value)
    if (Result.isFailure(next)) return rejected(i, next.failure)
    current = next.success
  }
  const checked = Hl7.formatChecked(current)
  if (Result.isSuccess(checked)) return checked.success
  let at = parsed.success
  for (let i = 0; i < patches.length; i++) {
    const next = Hl7.set(at, patches[i].path, patches[i].value)
    if (Result.isFailure(next) || Result.isFailure(Hl7.formatChecked(next.success))) return rejected(i, checked.failure)
    at = next.success
  }
  return rejected(patches.length - 1, checked.failure)
}

describe("MessageStore", () => {
  it.effect("serves the message raw and as JSON", () =>
    Effect.gen(function*() {
      const store = yield* MessageStore.make(message)
      assert.strictEqual(yield* store.get("raw"), message)
      const json = JSON.parse(yield* store.get("json"))
      assert.deepStrictEqual(json.PID["5"], { "1": "DOE", "2": "JOHN" })
    }))

  it.effect("applies all patches or none", () =>
    Effect.gen(function*() {
      const store = yield* MessageStore.make(message)
      const applied = yield* store.patch([{ path: "PID-5.1", value: "ANON" }, { path: "PID-7", value: null }])
      assert.strictEqual(applied, 2)
      const after = yield* store.current
      assert.isTrue(after.endsWith("PID|1||123||ANON^JOHN"))
      const error = yield* Effect.flip(store.patch([{ path: "PID-5.2", value: "X" }, { path: "PID-5..1", value: "Y" }]))
      assert.strictEqual(error._tag, "PatchRejected")
      assert.strictEqual(error.index, 1)
      assert.strictEqual(error.reason, "InvalidPath")
      assert.strictEqual(yield* store.current, after)
    }))

  it.effect("refuses patches when the message is not HL7, and setMessage with text that is not HL7", () =>
    Effect.gen(function*() {
      const store = yield* MessageStore.make("hello")
      const rejected = yield* Effect.flip(store.patch([{ path: "PID-5", value: "X" }]))
      assert.strictEqual(rejected.reason, "NotHl7")
      assert.strictEqual((yield* Effect.flip(store.get("json")))._tag, "Hl7Error")
      const refused = yield* Effect.flip(store.set("not hl7"))
      assert.instanceOf(refused, Hl7.Hl7Error)
      assert.strictEqual(yield* store.current, "hello")
      yield* store.set(message)
      assert.strictEqual(yield* store.current, message)
    }))

  it.effect("publishes every change", () =>
    Effect.gen(function*() {
      const store = yield* MessageStore.make(message)
      const seen = yield* store.changes.pipe(
        Stream.takeUntil((text) => text.includes("B^JOHN")),
        Stream.runCollect,
        Effect.forkChild
      )
      yield* store.patch([{ path: "PID-5.1", value: "A" }])
      yield* store.patch([{ path: "PID-5.1", value: "B" }])
      const all = yield* Fiber.join(seen)
      assert.include(all[all.length - 1], "B^JOHN")
    }))

  it.effect("a value with CR or LF adds no segment, and the message stays readable (the issue's payloads)", () =>
    Effect.gen(function*() {
      const store = yield* MessageStore.make(message + "\rOBX|1|ST|GLU||5.4|mmol/L")
      assert.strictEqual(yield* store.patch([{ path: "OBX-12", value: "x\rZZ1" }]), 1)
      assert.strictEqual(yield* store.patch([{ path: "PID-2", value: "y\nMSH" }]), 1)
      const raw = yield* store.get("raw")
      assert.deepStrictEqual(raw.split("\r").map((segment) => segment.slice(0, 3)), ["MSH", "PID", "OBX"])
      assert.notInclude(raw, "\n")
      const json = JSON.parse(yield* store.get("json"))
      assert.strictEqual(json.OBX["12"], "x\rZZ1")
      assert.strictEqual(json.PID["2"], "y\nMSH")
      assert.deepStrictEqual(Object.keys(json), ["MSH", "PID", "OBX"])
      // Later patches still apply.
      assert.strictEqual(yield* store.patch([{ path: "PID-5.1", value: "ANON" }]), 1)
      assert.strictEqual(JSON.parse(yield* store.get("json")).PID["5"]["1"], "ANON")
    }))

  it.effect("setMessage refuses text with a second MSH segment: the store holds one message", () =>
    Effect.gen(function*() {
      const store = yield* MessageStore.make(message)
      for (const text of [message + "\r" + message, message + "\n" + message, message + "\r\n\r\nMSH|^~\\&|B"]) {
        const refused = yield* Effect.flip(store.set(text))
        assert.strictEqual(refused.reason, "NotHl7")
        assert.include(refused.detail, "second MSH")
      }
      assert.strictEqual(yield* store.current, message)
    }))

  it("a batch of patches with any values keeps one message, and getMessage json reads each value back", () => {
    const paths = ["MSH-3", "PID-2", "PID-3.4", "PID-5.1", "PID-5.2", "PID-7", "PID-3[2].1", "PID-20.2.1", "OBX-12"]
    const value = fc.oneof(
      fc.string({ unit: "binary" }),
      fc.string({ unit: fc.constantFrom("\r", "\n", "|", "^", "~", "\\", "&", "\\X0D\\", "MSH", "ZZ1", "\u0000", "a") })
    )
    const patch = fc.record({ path: fc.constantFrom(...paths), value: fc.option(value, { nil: null }) })
    fc.assert(
      fc.property(fc.array(patch, { maxLength: 8 }), (patches) =>
        Effect.runSync(Effect.gen(function*() {
          const store = yield* MessageStore.make(message + "\rOBX|1|ST|GLU||5.4|mmol/L")
          assert.strictEqual(yield* store.patch(patches), patches.length)
          const raw = yield* store.get("raw")
          assert.deepStrictEqual(raw.split("\r").map((segment) => segment.slice(0, 3)), ["MSH", "PID", "OBX"])
          assert.notInclude(raw, "\n")
          const json = JSON.parse(yield* store.get("json"))
          const last = new Map(patches.map((p) => [p.path, p.value]))
          for (const [path, written] of last) {
            const p = Result.getOrThrow(Hl7.parsePath(path))
            const field = json[p.segment]?.[String(p.field)]
            let at = Array.isArray(field)
              ? field[(p.repetition ?? 1) - 1]
              : (p.repetition ?? 1) === 1
              ? field
              : undefined
            for (const index of [p.component, p.subcomponent]) {
              if (index !== undefined) {
                at = typeof at === "string"
                  ? (index === 1 ? at : undefined)
                  : at?.[String(index)]
              }
            }
            // An empty value is left out, or kept as "" where it holds a place among repetitions.
            assert.strictEqual(at ?? "", written ?? "", path)
          }
        }))),
      { numRuns: 500 }
    )
  }, 30_000) // 500 runs of a whole store each: over 4 s on a loaded 2-core machine, against the 5 s default

  it.effect("a refused patch names the first patch refused, whatever its reason, and nothing is applied", () =>
    Effect.gen(function*() {
      const store = yield* MessageStore.make(message)
      const ok = { path: "PID-5.1", value: "X" }
      const cases: ReadonlyArray<readonly [ReadonlyArray<{ path: string; value: string | null }>, number, string]> = [
        [[ok, ok, { path: "PID5", value: "Y" }, { path: "ZZZ-1", value: "Y" }], 2, "InvalidPath"],
        [[ok, { path: "OBX-5", value: "Y" }, { path: "PID5", value: "Y" }], 1, "NoSuchSegment"],
        [[ok, { path: "PID[2]-5", value: "Y" }], 1, "NoSuchSegment"],
        [[ok, ok, ok, { path: "MSH-1", value: null }], 3, "ReadOnly"]
      ]
      for (const [patches, index, reason] of cases) {
        const error = yield* Effect.flip(store.patch(patches))
        assert.deepStrictEqual([error.index, error.path, error.reason], [index, patches[index].path, reason])
      }
      assert.strictEqual(yield* store.current, message)
    }))

  it("patch answers what set after set answered: the same text, or the same refusal", () => {
    const texts = [
      message,
      message + "\rOBX|1|ST|GLU||5.4|mmol/L\rOBX|2|ST|HGB||13.2|g/dL",
      message.replaceAll("\r", "\n")
    ]
    const path = fc.oneof(
      {
        weight: 20,
        arbitrary: fc.constantFrom("MSH-3", "MSH-9.2", "PID-3", "PID-3[2].1", "PID-5", "PID-5.1", "PID-5.3.2")
      },
      { weight: 20, arbitrary: fc.constantFrom("PID-7", "PID-12[2]", "OBX-5", "OBX[2]-6.1", "PID-5.2", "PID-3.4") },
      { weight: 1, arbitrary: fc.constantFrom("PID5", "MSH-2", "OBX[3]-5", "ZZZ-1") }
    )
    const value = fc.oneof(fc.string(), fc.string({ unit: fc.constantFrom("\r", "\n", "|", "^", "~", "\\", "&", "a") }))
    const patch = fc.record({ path, value: fc.option(value, { nil: null, freq: 3 }) })
    fc.assert(
      fc.property(
        fc.constantFrom(...texts),
        fc.array(patch, { maxLength: 12 }),
        (text, patches) =>
          Effect.runSync(Effect.gen(function*() {
            const store = yield* MessageStore.make(text)
            const expected = referencePatch(text, patches)
            const answer = yield* Effect.result(store.patch(patches))
            if (typeof expected === "string") {
              assert.strictEqual(Result.getOrThrow(answer), patches.length)
              assert.strictEqual(yield* store.current, expected)
            } else {
              const error = Result.getOrThrow(Result.flip(answer))
              assert.deepStrictEqual(
                { index: error.index, path: error.path, reason: error.reason, detail: error.detail },
                expected
              )
              assert.strictEqual(yield* store.current, text)
            }
          }))
      ),
      { numRuns: 500 }
    )
  })

  it.effect("setMessage refuses text over maxMessageBytes of UTF-8, and leaves the message unchanged", () =>
    Effect.gen(function*() {
      // "é" is 2 bytes of UTF-8, "😀" 4 (2 UTF-16 units), a lone surrogate 3 (sent as U+FFFD).
      const text = message + "\rZZ1|é😀\ud800"
      const bytes = message.length + 5 + 2 + 4 + 3
      const store = yield* MessageStore.make(message, { maxMessageBytes: bytes - 1 })
      const refused = yield* Effect.flip(store.set(text))
      assert.instanceOf(refused, MessageStore.MessageTooLarge)
      assert.strictEqual(refused._tag, "MessageTooLarge")
      if (refused._tag === "MessageTooLarge") {
        assert.deepStrictEqual([refused.reason, refused.limit, refused.actual], ["MessageTooLarge", bytes - 1, bytes])
        assert.include(refused.detail, `${bytes} bytes`)
      }
      assert.strictEqual(yield* store.current, message)
      const exact = yield* MessageStore.make(message, { maxMessageBytes: bytes })
      yield* exact.set(text)
      assert.strictEqual(yield* exact.current, text)
      // The bound is checked before the text is read: text over it is refused as too large, HL7 or not.
      const small = yield* MessageStore.make(message, { maxMessageBytes: 10 })
      assert.strictEqual((yield* Effect.flip(small.set("not hl7 at all"))).reason, "MessageTooLarge")
      assert.strictEqual((yield* Effect.flip(small.set("hello"))).reason, "NotHl7")
    }))

  it.effect("setMessage refuses text with more than maxSegments segments; empty lines are not segments", () =>
    Effect.gen(function*() {
      const store = yield* MessageStore.make(message, { maxSegments: 3 })
      const refused = yield* Effect.flip(store.set(message + "\rOBX|1\nOBX|2"))
      assert.strictEqual(refused._tag, "MessageTooLarge")
      if (refused._tag === "MessageTooLarge") {
        assert.deepStrictEqual([refused.reason, refused.limit, refused.actual], ["TooManySegments", 3, 4])
        assert.include(refused.detail, "4 segments")
      }
      assert.strictEqual(yield* store.current, message)
      const three = message + "\r\n\r\nOBX|1\r\n\n"
      yield* store.set(three)
      assert.strictEqual(yield* store.current, three)
      // Both bounds apply with their defaults.
      assert.strictEqual(MessageStore.DEFAULT_MAX_MESSAGE_BYTES, 4 * 1024 * 1024)
      assert.strictEqual(MessageStore.DEFAULT_MAX_SEGMENTS, 100_000)
      const defaults = yield* MessageStore.make(message)
      const big = message + "\rZZ1|" + "a".repeat(MessageStore.DEFAULT_MAX_MESSAGE_BYTES - message.length - 5)
      yield* defaults.set(big)
      const tooBig = yield* Effect.flip(defaults.set(big + "a"))
      assert.deepStrictEqual(
        tooBig._tag === "MessageTooLarge" && [tooBig.reason, tooBig.limit, tooBig.actual],
        ["MessageTooLarge", 4 * 1024 * 1024, 4 * 1024 * 1024 + 1]
      )
      const many = message + "\rZZ1".repeat(100_000 - 2)
      yield* defaults.set(many)
      const tooMany = yield* Effect.flip(defaults.set(many + "\rZZ1"))
      assert.deepStrictEqual(
        tooMany._tag === "MessageTooLarge" && [tooMany.reason, tooMany.limit, tooMany.actual],
        ["TooManySegments", 100_000, 100_001]
      )
      // Infinity sets no bound.
      const unbounded = yield* MessageStore.make(message, { maxMessageBytes: Infinity, maxSegments: Infinity })
      yield* unbounded.set(many + "\rZZ1")
    }))

  it.effect("patch refuses a batch that would grow the message over maxMessageBytes, at the patch that crosses", () =>
    Effect.gen(function*() {
      // "DOE" becomes "ANONYMOUS": 6 bytes more; PID-20 pads PID-8 to PID-19 and writes "x": 14 more.
      const limit = message.length + 10
      const store = yield* MessageStore.make(message, { maxMessageBytes: limit })
      const patches = [
        { path: "PID-5.1", value: "ANONYMOUS" },
        { path: "PID-20", value: "x" },
        { path: "ZZZ-1", value: "never reached" }
      ]
      const refused = yield* Effect.flip(store.patch(patches))
      assert.instanceOf(refused, MessageStore.PatchRejected)
      assert.deepStrictEqual(
        [refused.index, refused.path, refused.reason, refused.limit, refused.actual, refused.detail],
        [
          1,
          "PID-20",
          "MessageTooLarge",
          limit,
          message.length + 20,
          `the patches would make the message ${message.length + 20} bytes of UTF-8, more than the limit of ${limit}`
        ]
      )
      assert.strictEqual(yield* store.current, message)
      // The other reasons carry no bound.
      const other = yield* Effect.flip(store.patch([{ path: "ZZZ-1", value: "x" }]))
      assert.deepStrictEqual([other.reason, "limit" in other, "actual" in other], ["NoSuchSegment", false, false])
      // Up to the bound exactly: applied.
      assert.strictEqual(yield* store.patch([patches[0], { path: "PID-7", value: "198001011234" }]), 2)
      assert.strictEqual(new TextEncoder().encode(yield* store.current).length, limit)
      // Without a bound, nothing is refused for its size.
      const unbounded = yield* MessageStore.make(message, { maxMessageBytes: Infinity })
      assert.strictEqual(yield* unbounded.patch([{ path: "PID-2[9999].9999.9999", value: "x" }]), 1)
    }))

  it.effect("a message already over maxMessageBytes (the host's own) may be patched if it grows no larger", () =>
    Effect.gen(function*() {
      const store = yield* MessageStore.make(message, { maxMessageBytes: 16 })
      assert.strictEqual(yield* store.patch([{ path: "PID-5.1", value: "ANN" }]), 1)
      assert.strictEqual(yield* store.patch([{ path: "PID-7", value: null }]), 1)
      const shorter = message.replace("DOE", "ANN").replace("||19800101", "")
      assert.strictEqual(yield* store.current, shorter)
      const refused = yield* Effect.flip(store.patch([{ path: "PID-5.1", value: "ANNA" }]))
      assert.deepStrictEqual([refused.index, refused.reason, refused.limit, refused.actual], [
        0,
        "MessageTooLarge",
        16,
        shorter.length + 1
      ])
      assert.strictEqual(yield* store.current, shorter)
    }))

  it.effect("layer takes the same options", () =>
    Effect.gen(function*() {
      const store = yield* MessageStore.MessageStore
      assert.strictEqual((yield* Effect.flip(store.set(message))).reason, "MessageTooLarge")
    }).pipe(Effect.provide(MessageStore.layer("", { maxMessageBytes: 16 }))))
})
