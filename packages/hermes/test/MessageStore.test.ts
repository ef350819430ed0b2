import { assert, describe, it } from "@effect/vitest"
import { Hl7, MessageStore } from "@lifeline/hermes"
import { Effect, Fiber, Result, Stream } from "effect"
import * as fc from "fast-check"

const message = "MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|42|P|2.5\rPID|1||123||DOE^JOHN||19800101"

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
  })
})
