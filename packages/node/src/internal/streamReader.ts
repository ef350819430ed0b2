/**
 * A Node `Readable` as an Effect stream, hand-tuned for the transports; its counterpart for writing is
 * `streamWriter.ts`. `@effect/platform-node`'s `NodeStream.fromReadable` (4.1) does not replace it: with `closeOnDone:
 * false` it leaves the stream reading (an idle `process.stdin` keeps the process alive), has no hook to fail early, and
 * starts only when the stream is run (its spawner pipes a child's output through an extra `PassThrough` to keep it).
 *
 * @internal
 */
import type * as Arr from "effect/Array"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type * as Pull from "effect/Pull"
import * as Stream from "effect/Stream"
import type { Readable } from "node:stream"

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
interface ReaderOptions<E> {
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
