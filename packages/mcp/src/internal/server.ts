/**
 * One MCP server as a supervised child: spawned through Effect's `ChildProcessSpawner` service (which the shared
 * runtime provides as `NodeSupervisedSpawner`), its stdout decoded by the NDJSON framing of `@lifeline/jsonrpc` with
 * its line limit, its stdin fed from a queue, its stderr where the options say. The transport class drives it from
 * Promise code; this module holds everything that is Effect.
 *
 * @internal
 */
import * as Framing from "@lifeline/jsonrpc/Framing"
import * as NodeSupervisedSpawner from "@lifeline/node/NodeSupervisedSpawner"
import type * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as PlatformError from "effect/PlatformError"
import * as ChildProcess from "effect/process/ChildProcess"
import * as ChildProcessSpawner from "effect/process/ChildProcessSpawner"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

/**
 * What the transport resolved from its options.
 *
 * @internal
 */
export interface Settings {
  readonly command: string
  readonly args: ReadonlyArray<string>
  /** The whole environment of the server (the default allowlist already merged). */
  readonly env: Record<string, string>
  readonly cwd: string | undefined
  /** `"pipe"` hands each chunk to `Callbacks.stderr`. */
  readonly stderr: "inherit" | "ignore" | "pipe"
  readonly maxBufferSize: number
  readonly killGrace: Duration.Input
}

/**
 * Called on the runtime's fibers; they must not throw (the class catches what user callbacks throw).
 *
 * @internal
 */
export interface Callbacks {
  /** One line of the server's stdout that parsed as JSON. */
  readonly line: (value: unknown) => void
  /** A line that is not JSON (the server keeps running), or the line limit (the decoder is spent: close). */
  readonly error: (error: Error, fatal: boolean) => void
  readonly stderr: (chunk: Uint8Array) => void
}

/**
 * A started server.
 *
 * @internal
 */
export interface Server {
  readonly pid: number
  /** Queues one encoded line for stdin; `false` once the input has ended. Never blocks. */
  readonly write: (bytes: Uint8Array) => boolean
  /** Ends stdin once what was queued is written. */
  readonly endInput: () => void
  /** Settles once the server (the leader of its group) has exited. */
  readonly exited: Promise<void>
  /** Settles once stdout has ended (every line read and delivered) or failed, or the reading was stopped. */
  readonly drained: Promise<void>
  /**
   * Stops reading, then stops the server's whole process group (SIGTERM, SIGKILL `killGrace` later, the group
   * verified gone: `NodeSupervisedSpawner`'s stop) and records its end in the journal. Idempotent.
   */
  readonly stop: Effect.Effect<void>
  /**
   * Whether the server has exited and its process group has no live member left (zombies do not count), looked at
   * now: `stop` then only keeps the books (the stop of the reading, the journal's record of the end, Effect's release).
   */
  readonly gone: () => boolean
}

const utf8 = new TextDecoder("utf-8", { fatal: false })

/**
 * Spawns the server in a Scope of its own, closed by `stop`.
 *
 * @internal
 */
export const open = (
  settings: Settings,
  callbacks: Callbacks
): Effect.Effect<Server, PlatformError.PlatformError, ChildProcessSpawner.ChildProcessSpawner> =>
  Effect.gen(function*() {
    const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
    const scope = yield* Scope.make()
    // Unbounded, as the SDK's transport is (Node buffers its pipe writes without limit): `send` never waits here. Used
    // only where the server's stdin cannot be written directly (below).
    const input = yield* Queue.unbounded<Uint8Array, Cause.Done>()
    const command = ChildProcess.make(settings.command, [...settings.args], {
      cwd: settings.cwd,
      env: settings.env,
      extendEnv: false,
      // Its own process group, so that the stop reaches whatever the server started (a `sh -c` or `npx` wrapper's
      // server, a server's helpers), and a group that outlives a crashed host can be found and swept.
      detached: true,
      stdin: "pipe",
      stdout: "pipe",
      stderr: settings.stderr,
      killSignal: "SIGTERM",
      forceKillAfter: settings.killGrace
    })
    const handle = yield* spawner.spawn(command).pipe(
      Scope.provide(scope),
      Effect.onError(() => Scope.close(scope, Exit.void))
    )

    // The frames go to the server's stdin as the SDK writes them, each a write of the Node stream and the end of input
    // its `end()`: through Effect's stdin sink, each would travel through a queue and a fiber, and the end of input,
    // on the path of every `close()`, would wait for them. A write that fails (the server has gone) is dropped: its
    // exit is seen and reported by the watcher. Where the stream is not available, the queue feeds the sink.
    const stdin = Option.getOrUndefined(NodeSupervisedSpawner.nodeStdin(handle))
    let inputEnded = false
    if (stdin !== undefined) {
      stdin.on("error", () => {})
    } else {
      yield* Stream.fromQueue(input).pipe(Stream.run(handle.stdin), Effect.ignore, Effect.forkIn(scope))
    }
    const endInput = () => {
      if (stdin === undefined) {
        Queue.endUnsafe(input)
      } else if (!inputEnded) {
        inputEnded = true
        stdin.end()
      }
    }

    const decoder = Framing.ndjson.unsafeMakeDecoder({ maxBodyBytes: settings.maxBufferSize })
    /** Delivers the lines of `chunk`; `false` once the line limit was passed (the decoder is spent). */
    let skipped = 0
    const decode = (chunk: Uint8Array): boolean => {
      const step = decoder.push(chunk)
      // Output that is no message (a banner, a `console.log`, blank lines) is skipped, whatever its length, and the
      // server keeps being read; the host is told, as the SDK's transport tells it of a line that is not JSON.
      if (decoder.skippedBytes() > skipped) {
        const bytes = decoder.skippedBytes() - skipped
        skipped += bytes
        callbacks.error(
          new Error(`the server wrote ${bytes} bytes on stdout that are not JSON-RPC messages (skipped)`),
          false
        )
      }
      for (const frame of step.frames) {
        let value: unknown
        try {
          value = JSON.parse(utf8.decode(frame))
        } catch (error) {
          callbacks.error(error instanceof Error ? error : new Error(String(error)), false)
          continue
        }
        callbacks.line(value)
      }
      if (step.error === undefined) return true
      callbacks.error(new Error(`the server's output: ${step.error.detail} (${step.error.reason})`), true)
      return false
    }

    // The lines are read from the Node stream, as the SDK's transport reads them: through Effect's stream, the end of
    // output, on the path of every close, travels through a pull, the end of a stream and of the fiber running it,
    // about as long as the rest of the close of a server that exits at once. Effect's stream is read where the Node
    // stream is not available.
    const stdout = Option.getOrUndefined(NodeSupervisedSpawner.nodeStdout(handle))
    let drained: Promise<void>
    if (stdout !== undefined) {
      let ended!: () => void
      drained = new Promise<void>((resolve) => ended = resolve)
      const onData = (chunk: Uint8Array) => {
        if (!decode(chunk)) stopReading()
      }
      const stopReading = () => {
        // What comes after is dropped (a stream in flowing mode with no listener drops it), so that the pipe never
        // fills and blocks a server that is being stopped.
        stdout.stream.off("data", onData)
        stdout.stream.resume()
        ended()
      }
      stdout.stream.on("error", stopReading)
      stdout.stream.once("end", stopReading)
      stdout.stream.once("close", stopReading)
      let reading = true
      for (const chunk of stdout.buffered) {
        if (!(reading = decode(chunk))) break
      }
      if (reading) {
        // `resume()`: the undone pipe may have left the stream paused, which a new listener does not undo.
        stdout.stream.on("data", onData).resume()
      } else {
        stopReading()
      }
      // A stop stops the reading, as the interruption of a reading fiber would.
      yield* Scope.addFinalizer(scope, Effect.sync(stopReading))
    } else {
      const reader = yield* handle.stdout.pipe(
        Stream.runForEach((chunk) => decode(chunk) ? Effect.void : Effect.fail(undefined)),
        Effect.ignore,
        Effect.forkIn(scope)
      )
      drained = Effect.runPromise(Fiber.await(reader)).then(() => {}, () => {})
    }
    // The exit as a Promise from Node's `exit` event, as the SDK's transport waits for it: through the runtime, each
    // Promise would be a fiber, woken by the exit on the path of every close.
    const exited = new Promise<void>((resolve) => {
      if (Option.isNone(NodeSupervisedSpawner.onExit(handle, resolve))) {
        Effect.runPromise(NodeSupervisedSpawner.awaitExit(handle)).then(() => resolve(), () => resolve())
      }
    })
    if (settings.stderr === "pipe") {
      yield* handle.stderr.pipe(
        Stream.runForEach((chunk) => Effect.sync(() => callbacks.stderr(chunk))),
        Effect.ignore,
        Effect.forkIn(scope)
      )
    }
    const server: Server = {
      pid: handle.pid,
      write: (bytes) => {
        if (stdin === undefined) return Queue.offerUnsafe(input, bytes)
        if (inputEnded) return false
        stdin.write(bytes)
        return true
      },
      endInput,
      exited,
      drained,
      stop: Effect.andThen(Effect.sync(endInput), Scope.close(scope, Exit.void)),
      gone: () => NodeSupervisedSpawner.isGone(handle)
    }
    return server
  }).pipe(Effect.uninterruptible)

/**
 * `exited`, then at most `grace` for stdout to end: a helper of the server may hold the pipe open after the server
 * exited, and the stop that follows takes it away. On the platform's timers, as {@link exitedWithin}.
 *
 * @internal
 */
export const exitedAndDrained = (server: Server, grace: Duration.Input): Promise<void> =>
  server.exited.then(() => exitedWithin(server.drained, grace))

/** The longest delay a Node timer takes (2^31 - 1 ms); beyond it, Node would fire at once. */
const maxTimer = 2_147_483_647

/**
 * Resolves once `exited` settles or `timeout` has passed, whichever comes first: the wait of `close()` for the server
 * to exit after the end of its stdin. On a timer of the platform, as the SDK's: the transport's `close()` is Promise
 * code, and a fiber started on the path of every close costs more than the rest of the close of a server that exits at
 * once. A timeout beyond a timer's range (infinite) waits for the exit only.
 *
 * @internal
 */
export const exitedWithin = (exited: Promise<unknown>, timeout: Duration.Input): Promise<void> =>
  new Promise<void>((resolve) => {
    const millis = Duration.toMillis(Duration.fromInputUnsafe(timeout))
    const timer = millis <= maxTimer ? setTimeout(resolve, Math.max(0, millis)) : undefined
    const done = () => {
      clearTimeout(timer)
      resolve()
    }
    exited.then(done, done)
  })
