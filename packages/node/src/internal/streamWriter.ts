/**
 * A Node `Writable` as the transports write to it: one system write per batch (copied or corked), a non-blocking
 * `trySend`, and an early word when the reader is gone. `@effect/platform-node`'s `NodeSink.fromWritable` (4.1) does
 * not replace it: it is a `Sink` a stream is run into, where a transport sends batch by batch. Its counterpart for
 * reading is `streamReader.ts`; a diagnostics stream that must not take the process down is `guardedStream.ts`.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { Writable } from "node:stream"

/**
 * Why a write could not be made: the stream failed (`error`), or it was ended or closed (`closed`).
 *
 * @internal
 */
export type WriteFailure = { readonly _tag: "Failed"; readonly error: unknown } | { readonly _tag: "Closed" }

/**
 * One writer over a Node `Writable`: one system write per batch (up to 64 KiB copied into one buffer, a larger batch
 * corked into one writev), and a batch completes when Node has taken it without asking the writer to wait, or at the
 * next `drain`.
 *
 * @internal
 */
export interface Writer {
  readonly write: (chunks: ReadonlyArray<Uint8Array>) => Effect.Effect<void, WriteFailure>
  /** Half-close: later writes fail with `Closed`. Idempotent. */
  readonly end: Effect.Effect<void>
  /** Completes when Node holds no more unwritten bytes for the stream, or the stream failed or closed. */
  readonly flushed: Effect.Effect<void>
  /**
   * Writes `chunk` now if Node can take it without the writer waiting (not ended, not failed, no `drain` pending) and
   * says whether it did. Writes made within one tick are corked into one system call, as `write` batches do.
   */
  readonly trySend?: ((chunk: Uint8Array) => boolean) | undefined
  /**
   * Calls `listener` once with the failure when the stream fails, or closes without `end`: the reader is gone. A
   * write's failure comes after `write` has returned, so without this the next send (maybe never) would be the first
   * to see it. Returns how to stop listening.
   */
  readonly onBroken: (listener: (failure: WriteFailure) => void) => () => void
  readonly unsafeFailure: () => WriteFailure | undefined
}

/**
 * @internal
 */
export const makeWriter = (
  writable: Writable | NodeJS.WritableStream,
  options: {
    /** The write function to use, when `writable.write` itself has been redirected. */
    readonly write?: ((chunk: Uint8Array, callback: (error?: Error | null) => void) => boolean) | undefined
    /** What `end` does to the stream; default `writable.end()`. */
    readonly end?: (() => void) | undefined
  } = {}
): Writer => {
  const stream = writable as Writable
  const rawWrite = options.write ?? ((chunk, callback) => stream.write(chunk, callback))
  let failure: WriteFailure | undefined
  let ended = false
  const waiters = new Set<() => void>()
  const wakeAll = () => {
    for (const waiter of Array.from(waiters)) waiter()
  }
  // Stays attached for the life of the stream: a late EPIPE after the writer is done must not become an uncaught
  // 'error' event that kills the process.
  stream.on("error", (error) => {
    if (failure === undefined) failure = { _tag: "Failed", error }
    wakeAll()
  })
  stream.on("close", () => {
    if (failure === undefined) failure = { _tag: "Closed" }
    wakeAll()
  })
  stream.on("drain", wakeAll)
  stream.on("finish", wakeAll)

  const onWritten = (error?: Error | null) => {
    if (error !== undefined && error !== null && failure === undefined) {
      failure = { _tag: "Failed", error }
      wakeAll()
    }
  }

  const waitUntil = (ready: () => boolean): Effect.Effect<void, WriteFailure> =>
    Effect.callback<void, WriteFailure>((resume) => {
      const check = () => {
        if (failure !== undefined) {
          waiters.delete(check)
          resume(Effect.fail(failure))
        } else if (ready()) {
          waiters.delete(check)
          resume(Effect.void)
        }
      }
      waiters.add(check)
      check()
      return Effect.sync(() => {
        waiters.delete(check)
      })
    })

  const onBroken = (listener: (failure: WriteFailure) => void): () => void => {
    const check = () => {
      if (failure === undefined || (failure._tag === "Closed" && ended)) return
      waiters.delete(check)
      listener(failure)
    }
    waiters.add(check)
    check()
    return () => {
      waiters.delete(check)
    }
  }

  let corked = false
  const uncork = () => {
    corked = false
    stream.uncork()
  }
  const trySend = (chunk: Uint8Array): boolean => {
    if (failure !== undefined || ended || stream.writableNeedDrain || chunk.length === 0) return false
    if (!corked && typeof stream.cork === "function") {
      corked = true
      stream.cork()
      // After the current microtasks: a burst of replies made in one turn leaves as one write.
      process.nextTick(uncork)
    }
    rawWrite(chunk, onWritten)
    return true
  }

  const write = (chunks: ReadonlyArray<Uint8Array>): Effect.Effect<void, WriteFailure> =>
    Effect.suspend(() => {
      if (failure !== undefined) return Effect.fail(failure)
      if (ended) return Effect.fail({ _tag: "Closed" } as const)
      let accepted: boolean
      if (chunks.length === 1) {
        if (chunks[0].length === 0) return Effect.void
        accepted = rawWrite(chunks[0], onWritten)
      } else {
        let bytes = 0
        for (const chunk of chunks) bytes += chunk.length
        if (bytes === 0) return Effect.void
        if (bytes <= concatLimit || typeof stream.cork !== "function") {
          accepted = rawWrite(Buffer.concat(chunks as Array<Uint8Array>, bytes), onWritten)
        } else {
          // Large frames are not copied into one buffer: corked, they leave in one writev.
          stream.cork()
          accepted = true
          for (const chunk of chunks) accepted = rawWrite(chunk, onWritten)
          stream.uncork()
        }
      }
      if (accepted) return Effect.void
      return waitUntil(() => !stream.writableNeedDrain)
    })

  return {
    write,
    end: Effect.sync(() => {
      if (ended) return
      ended = true
      try {
        if (options.end !== undefined) options.end()
        else stream.end()
      } catch {
        // A stream that cannot be ended (already destroyed) has nothing left to flush.
      }
    }),
    flushed: Effect.suspend(() => {
      if (failure !== undefined || stream.writableLength === 0) return Effect.void
      if (ended) return Effect.catch(waitUntil(() => stream.writableLength === 0), () => Effect.void)
      // An empty write's callback runs once everything written before it has been handed to the OS.
      return Effect.callback<void>((resume) => {
        let settled = false
        const settle = () => {
          if (settled) return
          settled = true
          waiters.delete(settle)
          resume(Effect.void)
        }
        waiters.add(settle)
        rawWrite(empty, settle)
        return Effect.sync(() => {
          waiters.delete(settle)
        })
      })
    }),
    onBroken,
    trySend,
    unsafeFailure: () => failure
  }
}

const empty = new Uint8Array(0)

/**
 * Up to this many bytes, a batch of frames is copied into one buffer for one write (cheaper than Node queueing many
 * small chunks); above it, the frames are written corked, without the copy.
 */
const concatLimit = 64 * 1024

/**
 * A readable description of a write failure, for `TransportError.message`.
 *
 * @internal
 */
export const describeFailure = (failure: WriteFailure): string =>
  failure._tag === "Closed"
    ? "the stream is closed"
    : failure.error instanceof Error
    ? failure.error.message
    : String(failure.error)
