/**
 * A bounded set of ids whose answers we no longer wait for, so a late answer can be told apart from an answer to an
 * id never sent; the oldest go first once it is full. Ids come one at a time or a whole pending table at once, which
 * is kept as it is, as one generation, rather than copied id by id (a tenth of a fail-fast stop with 10,000 calls
 * pending). A table's ended calls stay reachable until their ids are evicted.
 *
 * @internal
 */
export class Tombstones<K> {
  /** Oldest first. The last one, when it is a `Set`, takes ids added one at a time. */
  private readonly generations: Array<Set<K> | Map<K, unknown>> = []
  private count = 0
  constructor(private readonly capacity: number) {}

  /** A table smaller than this is copied id by id: a generation of its own is worth it only for a large one. */
  static readonly bulkThreshold = 256

  get size(): number {
    return this.count
  }

  add(id: K): void {
    this.delete(id) // re-adding moves it to the young end
    const last = this.generations[this.generations.length - 1]
    if (last instanceof Set) last.add(id)
    else this.generations.push(new Set([id]))
    this.count++
    this.evict()
  }

  /**
   * Adds every key of `table`, none of which is in the set yet (ids leaving the pending table, which is never
   * tombstoned twice). A large table becomes a generation as it is; the caller must not change it afterwards.
   */
  addFresh(table: Map<K, unknown>): void {
    if (table.size < Tombstones.bulkThreshold) {
      for (const id of table.keys()) this.add(id)
      return
    }
    this.generations.push(table)
    this.count += table.size
    this.evict()
  }

  has(id: K): boolean {
    const generations = this.generations
    for (let i = generations.length - 1; i >= 0; i--) {
      if (generations[i].has(id)) return true
    }
    return false
  }

  private delete(id: K): void {
    const generations = this.generations
    for (let i = 0; i < generations.length; i++) {
      if (generations[i].delete(id)) {
        this.count--
        if (generations[i].size === 0) generations.splice(i, 1)
        return
      }
    }
  }

  /** Drops the oldest ids until the set is within its capacity. */
  private evict(): void {
    while (this.count > this.capacity) {
      const oldest = this.generations[0]
      const excess = this.count - this.capacity
      if (oldest.size <= excess) {
        this.generations.shift()
        this.count -= oldest.size
        continue
      }
      // Both iterate in insertion order, so the first keys are the oldest.
      const keys = oldest.keys()
      for (let i = 0; i < excess; i++) oldest.delete(keys.next().value as K)
      this.count -= excess
    }
  }
}
