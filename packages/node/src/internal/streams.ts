/**
 * Node streams as Effect streams and writers, hand-tuned for the transports. `@effect/platform-node`'s
 * `NodeStream.fromReadable` and `NodeSink.fromWritable` (4.1) do not replace them: its reader, with `closeOnDone:
 * false`, leaves the stream reading (an idle `process.stdin` keeps the process alive), has no hook to fail early, and
 * starts only when the stream is run (its spawner pipes a child's output through an extra `PassThrough` to keep it);
 * its writer is a `Sink` that a stream is run into, where a transport sends batch by batch, one system write each
 * (copied or corked), and needs a non-blocking `trySend`.
 *
 * @internal
 */
import type * as Arr from "effect/Array"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type * as Pull from "effect/Pull"
import * as Stream from "effect/Stream"
import type { Readable, Writable } from "node:stream"

/** How many bytes may wait in the reader before the Node stream is paused. */
const readHighWaterMark = 64 * 1024

/**
 * A reader attached to a Node `Readable` now, read later as an Effect stream: see {@link unsafeMakeReader}.
 *
 * @internal
 */
export interface Reader<E> {
  /** The data read so far and from now on; meant to be run once. Its end (or interruption) releases the reader. */
  readonly stream: Stream.Stream<Uint8Array, E>
  /**
   * Removes the listeners and pauses the Node stream (or lets it flow into nothing: `onRelease`); the Effect stream
   * then ends after what is buffered.
   */
  readonly unsafeRelease: () => void
}

/**
 * How a {@link unsafeMakeReader} reader behaves.
 *
 * @internal
 */
export interface ReaderOptions<E> {
  /**
   * Ends the stream early with an error: given a callback that fails the stream, returns how to stop listening.
   * (A plain callback, not `Stream.interruptWhen`, which races every pull against the signal: that tripled a round
   * trip's CPU.)
   */
  readonly failWhen?: ((fail: (error: E) => void) => () => void) | undefined
  /**
   * What happens to the Node stream once the reader is released. `"pause"` (the default) stops reading, so an idle
   * `process.stdin` no longer keeps the process alive. `"discard"` keeps it flowing into nothing: a child that still
   * writes after its connection closed (more than a pipe holds, 64 KiB) would otherwise block on a full pipe and need
   * SIGTERM instead of exiting at the end of its input.
   */
  readonly onRelease?: "pause" | "discard" | undefined
}

const ignoreError = () => {}

/**
 * Reads `readable` in flowing mode, from now on. Data waits in a small buffer that the consumer empties chunk by
 * chunk; while the buffer holds more than 64 KiB the stream is paused, which is how a slow consumer pushes back on the
 * writer at the other end of the pipe. The stream ends at `end` (or at `close` without `end`) and fails with `onError`
 * at `error`. When the Effect stream ends or is interrupted, the listeners are removed and the Node stream is paused,
 * so an idle `process.stdin` no longer keeps the process alive.
 *
 * Attached at once rather than when the Effect stream starts: Node drains the pipes of a child that has exited into
 * the void (`flushStdio`) unless something listens already, and a fast child exits before a forked reader has started.
 *
 * @internal
 */
export const unsafeMakeReader = <E>(
  readable: Readable | NodeJS.ReadableStream,
  onError: (error: unknown) => E,
  options: ReaderOptions<E> = {}
): Reader<E> => {
  let buffered: Array<Uint8Array> = []
  let bytes = 0
  let paused = false
  let released = false
  let done: { readonly error: E } | "end" | undefined
  let wake: (() => void) | undefined
  const notify = () => {
    const waiter = wake
    wake = undefined
    waiter?.()
  }
  const onData = (chunk: Uint8Array | string) => {
    const bytesChunk = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk
    buffered.push(bytesChunk)
    bytes += bytesChunk.length
    if (bytes >= readHighWaterMark && !paused) {
      paused = true
      readable.pause()
    }
    notify()
  }
  const onEnd = () => {
    if (done === undefined) done = "end"
    notify()
  }
  const onFailure = (error: unknown) => {
    if (done === undefined) done = { error: onError(error) }
    notify()
  }
  const stopFailWhen = options.failWhen?.((error) => {
    if (done === undefined) done = { error }
    notify()
  })
  readable.on("data", onData)
  readable.on("end", onEnd)
  readable.on("close", onEnd)
  readable.on("error", onFailure)
  readable.resume()
  const unsafeRelease = () => {
    if (released) return
    released = true
    stopFailWhen?.()
    readable.off("data", onData)
    readable.off("end", onEnd)
    readable.off("close", onEnd)
    readable.off("error", onFailure)
    if (options.onRelease === "discard") {
      // Reading on with no listener drops the data; a listener for 'error' keeps a late pipe error from crashing.
      readable.on("error", ignoreError)
      readable.resume()
    } else {
      readable.pause()
    }
    onEnd()
  }
  const pull: Pull.Pull<Arr.NonEmptyReadonlyArray<Uint8Array>, E> = Effect.suspend(() => {
    if (buffered.length > 0) {
      const out = buffered as unknown as Arr.NonEmptyReadonlyArray<Uint8Array>
      buffered = []
      bytes = 0
      if (paused && !released) {
        paused = false
        readable.resume()
      }
      return Effect.succeed(out)
    }
    if (done === "end") return Cause.done()
    if (done !== undefined) return Effect.fail(done.error)
    return Effect.callback<Arr.NonEmptyReadonlyArray<Uint8Array>, E | Cause.Done>((resume) => {
      wake = () => resume(pull)
      return Effect.sync(() => {
        wake = undefined
      })
    })
  })
  return {
    stream: Stream.unwrap(
      Effect.as(Effect.addFinalizer(() => Effect.sync(unsafeRelease)), Stream.fromPull(Effect.succeed(pull)))
    ),
    unsafeRelease
  }
}

/**
 * {@link unsafeMakeReader}, attached when the Effect stream starts.
 *
 * @internal
 */
export const fromReadable = <E>(
  readable: Readable | NodeJS.ReadableStream,
  onError: (error: unknown) => E,
  options: ReaderOptions<E> = {}
): Stream.Stream<Uint8Array, E> => Stream.unwrap(Effect.sync(() => unsafeMakeReader(readable, onError, options).stream))

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
