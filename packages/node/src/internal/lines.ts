/**
 * Cutting a byte stream into bounded text lines, and keeping the last few of them: what the host needs to log a
 * child's stderr and to say why it died.
 *
 * @internal
 */

/**
 * Splits UTF-8 bytes into lines (LF or CRLF). A line longer than `maxLength` characters is cut into pieces of that
 * length, so a child that writes megabytes without a newline costs at most `maxLength` characters of memory.
 *
 * @internal
 */
export class LineSplitter {
  private readonly decoder = new TextDecoder("utf-8")
  private partial = ""

  constructor(readonly maxLength: number) {}

  push(chunk: Uint8Array): Array<string> {
    const text = this.partial + this.decoder.decode(chunk, { stream: true })
    const lines: Array<string> = []
    let start = 0
    while (true) {
      const newline = text.indexOf("\n", start)
      if (newline === -1) break
      this.emit(
        lines,
        text.slice(start, newline > start && text.charCodeAt(newline - 1) === 13 ? newline - 1 : newline)
      )
      start = newline + 1
    }
    let rest = text.slice(start)
    while (rest.length > this.maxLength) {
      lines.push(rest.slice(0, this.maxLength))
      rest = rest.slice(this.maxLength)
    }
    this.partial = rest
    return lines
  }

  /** The input ended: what is left, as a last line. */
  end(): Array<string> {
    const rest = this.partial + this.decoder.decode()
    this.partial = ""
    const lines: Array<string> = []
    if (rest.length > 0) this.emit(lines, rest)
    return lines
  }

  private emit(lines: Array<string>, line: string): void {
    for (let i = 0; i < line.length; i += this.maxLength) lines.push(line.slice(i, i + this.maxLength))
    if (line.length === 0) lines.push("")
  }
}

/**
 * The last `capacity` items pushed, oldest first.
 *
 * @internal
 */
export class Tail<A> {
  private readonly items: Array<A> = []
  private next = 0

  constructor(readonly capacity: number) {}

  push(item: A): void {
    if (this.capacity <= 0) return
    if (this.items.length < this.capacity) {
      this.items.push(item)
      return
    }
    this.items[this.next] = item
    this.next = (this.next + 1) % this.capacity
  }

  toArray(): Array<A> {
    return this.items.length < this.capacity
      ? this.items.slice()
      : [...this.items.slice(this.next), ...this.items.slice(0, this.next)]
  }
}
