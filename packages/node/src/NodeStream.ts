/**
 * A `Transport` over any Node `Readable` and `Writable`: a socket, a worker's pipes, the stdio of a child that
 * someone else spawned. It touches nothing but the two streams: no console, logger or `process` stream is redirected
 * (that is `NodeStdio`'s job, for the process's own stdio), and the streams stay the caller's to destroy.
 *
 * @since 0.1.0
 */
import * as Transport from "@lifeline/kernel/Transport"
import * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { Readable, Writable } from "node:stream"
import * as internal from "./internal/nodeStream.js"

/**
 * @example
 * ```ts
 * import { NodeStream } from "@lifeline/node"
 * import { PassThrough } from "node:stream"
 *
 * const options: NodeStream.Options = {
 *   readable: new PassThrough(),
 *   writable: new PassThrough(),
 *   name: "worker",
 *   flushTimeout: "500 millis"
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Where the bytes come from. A `net.Socket` (or any `Duplex`) is both `readable` and `writable`. */
  readonly readable: Readable | NodeJS.ReadableStream
  /** Where the frames go. */
  readonly writable: Writable | NodeJS.WritableStream
  /** Names the streams in error messages and logs (`reading <name> failed: ...`). Default `"stream"`. */
  readonly name?: string | undefined
  /** How long the release waits for written frames to be handed to the operating system. Default 2 seconds. */
  readonly flushTimeout?: Duration.Input | undefined
  /**
   * What becomes of `readable` once the transport is released. `"pause"` (the default) stops reading it, so it no
   * longer keeps the process alive. `"discard"` keeps it flowing into nothing, for a writer at the other end that
   * must never block on a full pipe (a child still writing after its connection closed).
   */
  readonly onRelease?: "pause" | "discard" | undefined
}

/**
 * Reads `readable` and writes `writable` in the current Scope. `incoming` ends at the end of `readable` (or when it
 * closes) and fails with a `Read` `TransportError` at its `error`; it also fails, with a `Write` one, as soon as
 * `writable` breaks (EPIPE, destroyed), so a peer on top closes without waiting for its next send. `send` makes one
 * write per batch and, when Node asks it to, waits for `drain`: a reader that does not read pushes back. `end` ends
 * `writable` (a half-close on a socket: the other side's reads end, ours keep flowing). The release stops reading
 * `readable` and waits (at most `flushTimeout`) for what was written to leave; it destroys neither stream.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Connection, Method, Protocol } from "@lifeline/kernel"
 * import { NodeStream } from "@lifeline/node"
 * import * as Net from "node:net"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 *
 * const program = Effect.gen(function*() {
 *   const socket = Net.connect({ host: "127.0.0.1", port: 4000 })
 *   yield* Effect.addFinalizer(() => Effect.sync(() => socket.destroy()))
 *   const transport = yield* NodeStream.make({ readable: socket, writable: socket, name: "calculator socket" })
 *   const connection = yield* Connection.make({ protocol: Protocol.make({ calls: [Add] }), transport, handlers: {} })
 *   return yield* connection.peer.call(Add, [1, 2])
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<Transport.Transport.Service, never, Scope.Scope> => {
  const name = options.name ?? "stream"
  return internal.make({
    readable: options.readable,
    writable: options.writable,
    readName: name,
    writeName: name,
    flushTimeout: Duration.fromInputUnsafe(options.flushTimeout ?? Duration.seconds(2)),
    onRelease: options.onRelease
  })
}

/**
 * {@link make} as the `Transport` layer, for the life of the layer. The framing is the connection's option
 * (`Connection.layer({ framing })`), not the transport's: the transport carries bytes.
 *
 * @example
 * ```ts
 * import { NodeStream } from "@lifeline/node"
 * import { spawn } from "node:child_process"
 *
 * // A child that some other code spawned and owns: its pipes are the transport.
 * const child = spawn("my-language-server", ["--stdio"], { stdio: ["pipe", "pipe", "inherit"] })
 * const TransportLive = NodeStream.layer({ readable: child.stdout, writable: child.stdin, name: "language server" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<Transport.Transport> =>
  Layer.effect(Transport.Transport, make(options))
