import { assert, describe, it } from "@effect/vitest"
import { Hl7, MessageStore } from "@lifeline/hermes"
import { Effect, Fiber, Stream } from "effect"

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
})
