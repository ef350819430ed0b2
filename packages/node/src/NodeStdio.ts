/**
 * The process's own stdin and stdout as a `Transport`, for the child side (an extension, a language server). stdout
 * carries frames only: while the transport is installed, Effect logs go to stderr, and `console.log` (and friends) or
 * a stray `process.stdout.write` from user code is redirected to stderr, so it cannot corrupt a frame. The end of
 * stdin ends `incoming`: the host is gone, and the peer on top stops. The reading and writing are `NodeStream`'s; what
 * this module adds is the guard of the process's own stdout, console and logger.
 *
 * @since 0.1.0
 */
import * as Connection from "@lifeline/kernel/Connection"
import type * as Lifecycle from "@lifeline/kernel/Lifecycle"
import type * as Method from "@lifeline/kernel/Method"
import * as Transport from "@lifeline/kernel/Transport"
import type * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { Console } from "node:console"
import { unsafeGuard } from "./internal/guardedStream.js"
import * as internalLogger from "./internal/logger.js"
import * as internalStream from "./internal/nodeStream.js"
import * as Processes from "./internal/processes.js"
import * as NodeSignals from "./NodeSignals.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * Default `process.stdin`; tests pass their own streams. For streams other than the process's own (a socket, a
   * worker, a child someone else spawned), use `NodeStream`, which touches no globals.
   */
  readonly stdin?: NodeJS.ReadableStream | undefined
  /** Default `process.stdout`. */
  readonly stdout?: NodeJS.WritableStream | undefined
  /** Where logs and redirected output go. Default `process.stderr`. */
  readonly stderr?: NodeJS.WritableStream | undefined
  /**
   * Redirect `console.log`, `console.info`, `console.debug` (and the other console methods that print to stdout) and
   * direct writes to `stdout` to stderr while the transport is installed; restored on release. Default true.
   */
  readonly guardStdout?: boolean | undefined
  /** How long the release waits for written frames to leave the process. Default 2 seconds. */
  readonly flushTimeout?: Duration.Input | undefined
}

// Every console method that prints to stdout. They are all taken from one redirected Console, so that the state they
// share (group indentation, counters, timers) stays consistent.
const consoleMethods = [
  "log",
  "info",
  "debug",
  "dir",
  "dirxml",
  "table",
  "group",
  "groupCollapsed",
  "groupEnd",
  "count",
  "countReset",
  "time",
  "timeEnd",
  "timeLog"
] as const

const guardConsole = (stderr: NodeJS.WritableStream) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const target = globalThis.console as unknown as Record<string, unknown>
      const redirected = new Console({ stdout: stderr, stderr }) as unknown as Record<
        string,
        (...args: Array<unknown>) => void
      >
      const saved = new Map<string, unknown>()
      for (const method of consoleMethods) {
        saved.set(method, target[method])
        target[method] = redirected[method].bind(redirected)
      }
      return { target, saved }
    }),
    ({ saved, target }) =>
      Effect.sync(() => {
        for (const [method, original] of saved) target[method] = original
      })
  )

/** Replaces `stdout.write` with a redirect to stderr; returns the original, bound, for the transport's own frames. */
const guardWrites = (stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const target = stdout as unknown as { write: (...args: Array<unknown>) => boolean }
      const own = Object.prototype.hasOwnProperty.call(target, "write")
      const original = target.write
      const redirect = (...args: Array<unknown>): boolean =>
        (stderr.write as (...args: Array<unknown>) => boolean)(...args)
      target.write = redirect
      return { target, own, original, redirect }
    }),
    ({ original, own, redirect, target }) =>
      Effect.sync(() => {
        // Someone may have wrapped it again meanwhile: then theirs stays.
        if (target.write !== redirect) return
        if (own) target.write = original
        else delete (target as { write?: unknown }).write
      })
  ).pipe(Effect.map(({ original, target }) => (chunk: Uint8Array, callback: (error?: Error | null) => void) =>
    original.call(target, chunk, callback)
  ))

/**
 * The logger `NodeStdio` installs: one logfmt line per entry on stderr.
 *
 * @example
 * ```ts
 * import { Effect, Logger } from "effect"
 * import { NodeStdio } from "@lifeline/node"
 *
 * const program = Effect.logInfo("starting").pipe(
 *   Effect.provide(Logger.layer([NodeStdio.logger]))
 * )
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const logger: Logger.Logger<unknown, void> = internalLogger.stderrLogger

/**
 * Takes over stdin and stdout in the current Scope. In the calling fiber (and the fibers it forks afterwards), Effect's
 * default logger is replaced with a logger on stderr, and `Logger.LogToStderr` is set. The release waits (at most
 * `flushTimeout`) for the frames already written to leave the process, then restores `console` and `stdout.write`, and
 * stops reading stdin so that it no longer keeps the process alive.
 *
 * `send` makes one system write per batch (a batch over 64 KiB is corked into one writev rather than copied) and,
 * when Node asks it to (`write` returned false), waits for `drain`: a host that does not read pushes back. `end` ends
 * stdout.
 *
 * When the host is gone, writes fail with EPIPE. On stdout that fails the transport: `incoming` fails with a `Write`
 * `TransportError` as soon as the failure is known, so the peer closes (`TransportFailed`) and the shutdown runs. On
 * stderr it only drops the log lines (and the redirected output) from then on: logging never kills the process.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Peer, Protocol } from "@lifeline/kernel"
 * import { NodeStdio } from "@lifeline/node"
 *
 * const program = Effect.gen(function*() {
 *   const transport = yield* NodeStdio.make()
 *   const peer = yield* Peer.make({ protocol: Protocol.make({}), handlers: {}, transport })
 *   yield* peer.closed // the host closed stdin (or died)
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<Transport.Transport.Service, never, Scope.Scope> =>
  Effect.gen(function*() {
    const stdin = options.stdin ?? process.stdin
    const stdout = options.stdout ?? process.stdout
    const stderr = options.stderr ?? process.stderr
    const flushTimeout = Duration.fromInputUnsafe(options.flushTimeout ?? Duration.seconds(2))
    const guard = options.guardStdout ?? true
    // Logs, console output and redirected stdout writes all end up on stderr: once the host is gone it fails with
    // EPIPE, which must drop them rather than kill the process before its finalizers run.
    yield* Effect.sync(() => unsafeGuard(stderr))

    yield* internalLogger.useStderrLoggerScoped(
      stderr === process.stderr ? logger : internalLogger.makeStderrLogger(stderr)
    )
    let rawWrite: ((chunk: Uint8Array, callback: (error?: Error | null) => void) => boolean) | undefined
    if (guard) {
      yield* guardConsole(stderr)
      rawWrite = yield* guardWrites(stdout, stderr)
    }
    return yield* internalStream.make({
      readable: stdin,
      writable: stdout,
      readName: "stdin",
      writeName: "stdout",
      flushTimeout,
      write: rawWrite
    })
  })

/**
 * {@link make} as a layer. The layer also moves logging to stderr for the program it is provided to.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Peer, Protocol, Transport } from "@lifeline/kernel"
 * import { NodeStdio } from "@lifeline/node"
 *
 * const Main = Layer.effectDiscard(Effect.gen(function*() {
 *   const transport = yield* Transport.Transport
 *   yield* Peer.make({ protocol: Protocol.make({}), handlers: {}, transport })
 * })).pipe(Layer.provide(NodeStdio.layer()))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<Transport.Transport> =>
  Layer.effectContext(Effect.gen(function*() {
    const transport = yield* make(options)
    // A layer's output is a Context: the loggers `make` installed in the fiber that built the layer go into it, so
    // that the program the layer is provided to logs to stderr too.
    const loggers = yield* Logger.CurrentLoggers
    return Context.make(Transport.Transport, transport).pipe(
      Context.add(Logger.CurrentLoggers, loggers),
      Context.add(Logger.LogToStderr, true)
    )
  }))

/**
 * Completes when process `pid` is gone, checking every `interval` (default 250 ms: a `kill(pid, 0)`, so four a second cost nothing) on the Clock, so
 * that it notices within a quarter of a second. An extension
 * whose handshake tells it the host's pid races this against its work, so that it never outlives the host even when
 * its stdin is held open by someone else. The default pid is the parent's at the time of the call.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { NodeStdio } from "@lifeline/node"
 *
 * const serve = Effect.never // the extension's work
 * const program = Effect.raceFirst(serve, NodeStdio.awaitHostExit())
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const awaitHostExit = (
  pid: number = process.ppid,
  options: { readonly interval?: Duration.Input | undefined } = {}
): Effect.Effect<void> =>
  Effect.sync(() => Processes.isAlive(pid)).pipe(
    Effect.repeat({
      schedule: Schedule.spaced(options.interval ?? Duration.millis(250)),
      while: (alive) => alive
    }),
    Effect.asVoid
  )

/**
 * Options of {@link makeConnection}: the connection's options without the transport, and the stdio options.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConnectionOptions<Serves extends Method.Any, Calls extends Method.Any, R, E = never>
  extends Omit<Connection.Options<Serves, Calls, R, E>, "transport">
{
  readonly stdio?: Options | undefined
}

/**
 * The child side in one call: a `Connection` over stdin/stdout. It stops under its shutdown policy when stdin ends
 * (the host is gone), and, when run by `NodeSignals.runMain`, at the first SIGTERM/SIGINT; the second signal makes it
 * fail fast (`stopNow`). Wait for `awaitShutdown`, then return: `runMain` exits with the code that says how it ended.
 *
 * The signal watchers are detached fibers: they start the stop before the interruption of the main fiber reaches the
 * connection's finalizer, so the stop (a drain) runs in a fiber of its own, and they outlive that finalizer so that
 * the second signal can still cut it short. It fails as `Connection.make` does, with a `ConfigError` too when no policy
 * is given and the one in the environment is invalid.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Method, Protocol, ShutdownPolicy } from "@lifeline/kernel"
 * import { NodeSignals, NodeStdio } from "@lifeline/node"
 *
 * const Echo = Method.request("echo", { params: Schema.Struct({ text: Schema.String }), result: Schema.String })
 *
 * const main = Effect.gen(function*() {
 *   const connection = yield* NodeStdio.makeConnection({
 *     protocol: Protocol.make({ serves: [Echo] }),
 *     handlers: { echo: ({ text }) => Effect.succeed(text) }
 *   })
 *   return yield* connection.awaitShutdown
 * }).pipe(Effect.scoped, Effect.provide(ShutdownPolicy.layerConfig))
 *
 * NodeSignals.runMain(main)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeConnection = <Serves extends Method.Any, Calls extends Method.Any, R = never, E = never>(
  options: ConnectionOptions<Serves, Calls, R, E>
): Effect.Effect<
  Connection.Connection<Serves, Calls>,
  Lifecycle.Failure | E | Lifecycle.IllegalTransition | Config.ConfigError,
  Scope.Scope | R
> =>
  Effect.gen(function*() {
    const { stdio, ...rest } = options
    const transport = yield* make(stdio)
    const connection = yield* Connection.make<Serves, Calls, R, E>({ ...rest, transport })
    const signals = yield* Effect.serviceOption(NodeSignals.NodeSignals)
    if (Option.isSome(signals)) {
      yield* Effect.forkDetach(Effect.raceFirst(
        Effect.andThen(signals.value.stopRequested, connection.stop("Interrupted")),
        connection.awaitShutdown
      ))
      yield* NodeSignals.forceOnSecondSignal(connection.stopNow("Interrupted"), connection.awaitShutdown)
    }
    return connection
  })
