/**
 * Streams for diagnostics (logs, stray output) that cannot take the process down: a write to a pipe whose reader is
 * gone is dropped and counted, not an uncaught error; and a bounded wait for what was written to reach the OS before
 * the process exits.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { Writable } from "node:stream"

const empty = new Uint8Array(0)

/**
 * A stream for diagnostics (logs, stray output) that cannot take the process down: see {@link unsafeGuard}.
 *
 * @internal
 */
export interface Guarded {
  /** Writes `text`, or drops it (and counts it) once the stream is broken. Never throws. */
  readonly write: (text: string) => void
  readonly dropped: () => number
}

const guarded = new WeakMap<object, Guarded>()

/**
 * Listens, for the life of `stream`, to its errors. Once the reader of a pipe is gone (the host died), a write fails
 * with EPIPE (or EAGAIN, ERR_STREAM_DESTROYED), and an 'error' event that nobody listens to is an uncaught exception:
 * the process would die at once, its finalizers skipped, because of a log line. From the first error on, `write`
 * drops what it is given. Idempotent: one listener per stream.
 *
 * @internal
 */
export const unsafeGuard = (stream: NodeJS.WritableStream): Guarded => {
  const existing = guarded.get(stream)
  if (existing !== undefined) return existing
  const writable = stream as Writable
  let broken = false
  let dropped = 0
  stream.on("error", () => {
    broken = true
  })
  const guard: Guarded = {
    write: (text) => {
      if (broken || writable.destroyed || writable.writableEnded) {
        dropped++
        return
      }
      try {
        stream.write(text)
      } catch {
        // Files and TTYs are written synchronously: their errors are thrown rather than emitted.
        broken = true
        dropped++
      }
    },
    dropped: () => dropped
  }
  guarded.set(stream, guard)
  return guard
}

/**
 * Completes once everything written to `stream` so far has been handed to the OS (at once if nothing is waiting, or
 * the stream is ended or destroyed). Pipes are asynchronous on POSIX: `process.exit` drops what is still queued.
 *
 * @internal
 */
export const flushWritable = (stream: NodeJS.WritableStream): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const writable = stream as Writable
    if (writable.writableLength === 0 || writable.writableEnded || writable.destroyed) return resume(Effect.void)
    try {
      writable.write(empty, () => resume(Effect.void))
    } catch {
      resume(Effect.void)
    }
  })
