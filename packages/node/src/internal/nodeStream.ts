/**
 * A `Transport` over a Node `Readable` and `Writable`: what `NodeStream` and `NodeStdio` share. It reads and writes
 * the streams it is given and nothing else (no console, logger or `process` stream), and its release waits, bounded,
 * for the frames already written to be handed to the operating system.
 *
 * @internal
 */
import * as Transport from "@lifeline/kernel/Transport"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { Readable, Writable } from "node:stream"
import { fromReadable } from "./streamReader.js"
import { describeFailure, makeWriter, type WriteFailure } from "./streamWriter.js"

/** @internal */
export interface Options {
  readonly readable: Readable | NodeJS.ReadableStream
  readonly writable: Writable | NodeJS.WritableStream
  /** Names the readable in error messages: `reading <readName> failed: ...`. */
  readonly readName: string
  /** Names the writable in error messages and in the flush warning. */
  readonly writeName: string
  readonly flushTimeout: Duration.Duration
  /** The write function to use when `writable.write` itself has been redirected (`NodeStdio`'s stdout guard). */
  readonly write?: ((chunk: Uint8Array, callback: (error?: Error | null) => void) => boolean) | undefined
  readonly onRelease?: "pause" | "discard" | undefined
}

/** @internal */
export const make = (options: Options): Effect.Effect<Transport.Transport.Service, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { flushTimeout, readName, writeName } = options
    const writer = makeWriter(options.writable, { write: options.write })
    // Registered by the caller after whatever it installed before (NodeStdio's guards), so it runs before they are
    // lifted: frames first, then whatever else.
    yield* Effect.addFinalizer(() =>
      writer.flushed.pipe(
        Effect.timeoutOption(flushTimeout),
        Effect.flatMap((flushed) =>
          Option.isNone(flushed)
            ? Effect.logWarning(`${writeName} did not drain within ${Duration.format(flushTimeout)}`)
            : Effect.void
        )
      )
    )

    const writeError = (failure: WriteFailure) =>
      new Transport.TransportError({
        reason: failure._tag === "Closed" ? "Closed" : "Write",
        message: `writing ${writeName} failed: ${describeFailure(failure)}`,
        ...(failure._tag === "Failed" ? { cause: failure.error } : {})
      })
    const transport: Transport.Transport.Service = {
      incoming: fromReadable(
        options.readable,
        (cause) =>
          new Transport.TransportError({
            reason: "Read",
            message: `reading ${readName} failed: ${cause instanceof Error ? cause.message : String(cause)}`,
            cause
          }),
        {
          // A broken writable (EPIPE: the other side stopped reading, or died with our input still held open
          // elsewhere) fails the transport now, so the peer closes and the shutdown runs, rather than at a next send
          // that may never come.
          failWhen: (fail) => writer.onBroken((failure) => fail(writeError(failure))),
          onRelease: options.onRelease
        }
      ),
      send: (chunks) => Effect.mapError(writer.write(chunks), writeError),
      end: writer.end,
      unsafeTrySend: writer.trySend
    }
    return transport
  })
