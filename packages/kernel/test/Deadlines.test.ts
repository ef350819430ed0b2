import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { type Deadline, Deadlines } from "../src/internal/deadlines.js"

interface Entry extends Deadline {
  readonly name: number
}

// More pushes than removals, so heaps grow several levels deep.
const op = fc.oneof(
  {
    arbitrary: fc.record({ kind: fc.constant("push" as const), deadline: fc.integer({ min: 0, max: 50 }) }),
    weight: 3
  },
  { arbitrary: fc.record({ kind: fc.constant("remove" as const), pick: fc.nat() }), weight: 1 },
  // An entry that is in the heap, so that removals from its middle are frequent.
  { arbitrary: fc.record({ kind: fc.constant("removeLive" as const), pick: fc.nat() }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant("pop" as const) }), weight: 1 }
)

/**
 * The heap's shape as its entries tell it: their `heapIndex` values are exactly 0..n-1, and no entry is earlier than
 * its parent (the entry at `(i - 1) >> 1`).
 */
const assertHeapOrder = (inHeap: ReadonlyArray<Entry>) => {
  const byIndex = new Map(inHeap.map((entry) => [entry.heapIndex, entry]))
  assert.strictEqual(byIndex.size, inHeap.length)
  for (let i = 0; i < inHeap.length; i++) {
    const entry = byIndex.get(i)
    assert.isDefined(entry, `no entry at index ${i}`)
    if (i > 0) assert.isAtMost(byIndex.get((i - 1) >> 1)!.deadline, entry!.deadline, `entry ${i} above its parent`)
  }
}

describe("Deadlines", () => {
  // fast-check itself: the @effect/vitest 4 `it.prop` takes `effect/Arbitrary` values and Schemas only.
  it("behaves like a sorted list under any mix of push, remove and pop", () =>
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
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
          // Each entry knows whether it is in the heap: the peer relies on it to take an answered call out at once.
          for (const entry of all) assert.strictEqual(entry.heapIndex >= 0, model.includes(entry))
          assertHeapOrder(model)
        }
        // Whatever the history, popping everything left yields every entry once, earliest deadline first.
        const drained: Array<Entry> = []
        for (let top = heap.pop(); top !== undefined; top = heap.pop()) drained.push(top)
        assert.deepStrictEqual(
          drained.map((e) => e.deadline),
          model.map((e) => e.deadline).sort((a, b) => a - b)
        )
        assert.sameMembers(drained, model)
      }),
      { numRuns: 300 }
    ))

  it("an entry removed from the middle moves up when it is earlier than its new parent", () => {
    // Heap [1, 10, 2, 11, 12, 3, 4]: removing 11 (a child of 10) moves the last entry, 4, into its place, where it is
    // earlier than its parent 10, so it must move up; moving only down would leave 10 above 4.
    const heap = new Deadlines<Entry>()
    const entries = [1, 10, 2, 11, 12, 3, 4].map((deadline, name): Entry => ({ deadline, heapIndex: -1, name }))
    for (const entry of entries) heap.push(entry)
    heap.remove(entries[3])
    assertHeapOrder(entries.filter((e) => e !== entries[3]))
    const order: Array<number> = []
    for (let top = heap.pop(); top !== undefined; top = heap.pop()) order.push(top.deadline)
    assert.deepStrictEqual(order, [1, 2, 3, 4, 10, 12])
  })

  it("an entry removed from the middle moves down when it is later than the entries it lands above", () => {
    // Heap [1, 2, 10, 3, 4, 11, 12]: removing 2 moves the last entry, 12, into its place, above 3 and 4, where it is
    // later than its new parent 1 too: it must move down, or 12 would be popped before 3.
    const heap = new Deadlines<Entry>()
    const entries = [1, 2, 10, 3, 4, 11, 12].map((deadline, name): Entry => ({ deadline, heapIndex: -1, name }))
    for (const entry of entries) heap.push(entry)
    heap.remove(entries[1])
    assertHeapOrder(entries.filter((e) => e !== entries[1]))
    const order: Array<number> = []
    for (let top = heap.pop(); top !== undefined; top = heap.pop()) order.push(top.deadline)
    assert.deepStrictEqual(order, [1, 3, 4, 10, 11, 12])
  })

  it("removing an entry that is not in this heap changes nothing, even one whose index is taken", () => {
    const heap = new Deadlines<Entry>()
    const a: Entry = { deadline: 1, heapIndex: -1, name: 0 }
    const b: Entry = { deadline: 2, heapIndex: -1, name: 1 }
    heap.push(a)
    heap.push(b)
    // A stranger that claims index 0 (an entry of another heap, say) is not `a`.
    const stranger: Entry = { deadline: 0, heapIndex: 0, name: 2 }
    heap.remove(stranger)
    assert.strictEqual(heap.size, 2)
    assert.strictEqual(stranger.heapIndex, 0)
    assert.strictEqual(heap.peek(), a)
    // Removed twice: the second time is a no-op.
    heap.remove(a)
    heap.remove(a)
    assert.strictEqual(heap.size, 1)
    assert.strictEqual(heap.peek(), b)
    assert.strictEqual(b.heapIndex, 0)
  })

  it("clear forgets every entry, and a cleared entry can be removed without effect", () => {
    const heap = new Deadlines<Entry>()
    const a: Entry = { deadline: 1, heapIndex: -1, name: 0 }
    const b: Entry = { deadline: 2, heapIndex: -1, name: 1 }
    heap.push(a)
    heap.push(b)
    heap.clear()
    assert.strictEqual(heap.size, 0)
    assert.strictEqual(heap.peek(), undefined)
    assert.strictEqual(b.heapIndex, -1)
    assert.strictEqual(a.heapIndex, -1)
    heap.remove(a)
    assert.strictEqual(heap.size, 0)
    assert.strictEqual(a.heapIndex, -1)
  })
})
