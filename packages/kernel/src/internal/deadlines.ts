/**
 * A min-heap of call deadlines, so one timer fiber per peer can serve every call's timeout instead of a timer fiber
 * per call (a per-call `Effect.timeout` forks a race: that, not the wire, dominated a 10,000-call shutdown).
 * Each entry knows its place in the heap, so an answered call leaves it at once (O(log n)): left in until its
 * deadline, every answered call of the last 5 s would stay reachable, survive young-generation collections and be
 * copied into the old generation, which is what made the garbage collector a fifth of a pipelined call's CPU.
 *
 * @internal
 */
export interface Deadline {
  readonly deadline: number
  /** The entry's index in the heap, -1 when it is not in one. Owned by `Deadlines`. */
  heapIndex: number
}

export class Deadlines<A extends Deadline> {
  private readonly heap: Array<A> = []

  get size(): number {
    return this.heap.length
  }

  /** The earliest deadline, or `undefined`. */
  peek(): A | undefined {
    return this.heap[0]
  }

  push(entry: A): void {
    this.heap.push(entry)
    this.up(this.heap.length - 1, entry)
  }

  pop(): A | undefined {
    const top = this.heap[0]
    if (top !== undefined) this.remove(top)
    return top
  }

  /** Takes `entry` out of the heap; does nothing when it is not in it. */
  remove(entry: A): void {
    const heap = this.heap
    const i = entry.heapIndex
    if (i < 0 || heap[i] !== entry) return
    entry.heapIndex = -1
    const last = heap.pop()!
    if (last === entry) return
    // `last` takes the freed place, then moves whichever way its deadline says.
    if (i > 0 && heap[(i - 1) >> 1].deadline > last.deadline) this.up(i, last)
    else this.down(i, last)
  }

  clear(): void {
    for (const entry of this.heap) entry.heapIndex = -1
    this.heap.length = 0
  }

  private up(start: number, entry: A): void {
    const heap = this.heap
    let i = start
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (heap[parent].deadline <= entry.deadline) break
      this.place(i, heap[parent])
      i = parent
    }
    this.place(i, entry)
  }

  private down(start: number, entry: A): void {
    const heap = this.heap
    const n = heap.length
    let i = start
    while (true) {
      const left = 2 * i + 1
      if (left >= n) break
      const right = left + 1
      const child = right < n && heap[right].deadline < heap[left].deadline ? right : left
      if (heap[child].deadline >= entry.deadline) break
      this.place(i, heap[child])
      i = child
    }
    this.place(i, entry)
  }

  private place(i: number, entry: A): void {
    this.heap[i] = entry
    entry.heapIndex = i
  }
}
