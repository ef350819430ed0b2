import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { type Deadline, Deadlines } from "../src/internal/deadlines.js"

interface Entry extends Deadline {
  readonly name: number
}

const op = fc.oneof(
  fc.record({ kind: fc.constant("push" as const), deadline: fc.integer({ min: 0, max: 50 }) }),
  fc.record({ kind: fc.constant("remove" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("pop" as const) })
)

describe("Deadlines", () => {
  // fast-check itself: the @effect/vitest 4 `it.prop` takes `effect/Arbitrary` values and Schemas only.
  it("behaves like a sorted list under any mix of push, remove and pop", () =>
    fc.assert(fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
      const heap = new Deadlines<Entry>()
      let model: Array<Entry> = []
      const all: Array<Entry> = []
      for (const o of ops) {
        if (o.kind === "push") {
          const entry: Entry = { deadline: o.deadline, heapIndex: -1, name: all.length }
          all.push(entry)
          model.push(entry)
          heap.push(entry)
        } else if (o.kind === "remove") {
          // Removing any entry ever pushed, in the heap or not any more, is allowed.
          if (all.length === 0) continue
          const entry = all[o.pick % all.length]
          heap.remove(entry)
          model = model.filter((e) => e !== entry)
          assert.strictEqual(entry.heapIndex, -1)
        } else {
          const top = heap.pop()
          const least = model.reduce<Entry | undefined>(
            (a, e) => a === undefined || e.deadline < a.deadline ? e : a,
            undefined
          )
          assert.strictEqual(top?.deadline, least?.deadline)
          if (top !== undefined) model = model.filter((e) => e !== top)
        }
        assert.strictEqual(heap.size, model.length)
        const min = model.reduce((m, e) => Math.min(m, e.deadline), Infinity)
        assert.strictEqual(heap.peek()?.deadline ?? Infinity, min)
      }
    })))

  it("clear forgets every entry, and a cleared entry can be removed without effect", () => {
    const heap = new Deadlines<Entry>()
    const a: Entry = { deadline: 1, heapIndex: -1, name: 0 }
    heap.push(a)
    heap.clear()
    heap.remove(a)
    assert.strictEqual(heap.size, 0)
    assert.strictEqual(a.heapIndex, -1)
  })
})
