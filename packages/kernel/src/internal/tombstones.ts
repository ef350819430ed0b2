/**
 * A bounded set of ids whose answers we no longer wait for (cancelled, timed out, failed by a shutdown), so a late
 * answer can be told apart from an answer to an id never sent. The oldest entries go first once it is full.
 *
 * @internal
 */
export class Tombstones<K> {
  private readonly ids = new Set<K>()
  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.ids.size
  }

  add(id: K): void {
    this.ids.delete(id) // re-adding moves it to the young end
    this.ids.add(id)
    if (this.ids.size > this.capacity) {
      // A Set iterates in insertion order, so its first entry is the oldest.
      this.ids.delete(this.ids.values().next().value as K)
    }
  }

  has(id: K): boolean {
    return this.ids.has(id)
  }
}
