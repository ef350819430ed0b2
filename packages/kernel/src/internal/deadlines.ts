/**
 * A min-heap of call deadlines, so one timer fiber per peer can serve every call's timeout instead of a timer fiber
 * per call (a per-call `Effect.timeout` forks a race: that, not the wire, dominated a 10,000-call shutdown).
 * Entries are removed lazily: a call that is answered stays in the heap until its deadline comes up and is skipped.
 *
 * @internal
 */
export interface Deadline {
  readonly deadline: number
  /** Cleared once the call has ended, so the timer skips it. */
  live: boolean
}

export class Deadlines<A extends Deadline> {
  private readonly heap: Array<A> = []

  get size(): number {
    return this.heap.length
  }

  /** The earliest deadline still in the heap (live or not), or `undefined`. */
  peek(): A | undefined {
    return this.heap[0]
  }

  push(entry: A): void {
    const heap = this.heap
    heap.push(entry)
    let i = heap.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (heap[parent].deadline <= entry.deadline) break
      heap[i] = heap[parent]
      i = parent
    }
    heap[i] = entry
  }

  pop(): A | undefined {
    const heap = this.heap
    const top = heap[0]
    const last = heap.pop()
    if (heap.length === 0 || last === undefined) return top
    let i = 0
    const n = heap.length
    while (true) {
      const left = 2 * i + 1
      if (left >= n) break
      const right = left + 1
      const child = right < n && heap[right].deadline < heap[left].deadline ? right : left
      if (heap[child].deadline >= last.deadline) break
      heap[i] = heap[child]
      i = child
    }
    heap[i] = last
    return top
  }

  /** Drops the dead entries at the top, so `peek` shows a live deadline. */
  prune(): void {
    while (this.heap.length > 0 && !this.heap[0].live) this.pop()
  }

  clear(): void {
    this.heap.length = 0
  }
}
