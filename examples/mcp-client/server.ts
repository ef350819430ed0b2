/**
 * The MCP server as a supervised child, for the kernel's peer: spawned through Effect's `ChildProcessSpawner` service
 * as `NodeSupervisedSpawner` provides it (the supervision `@lifeline/mcp`'s transport runs on: the server in a process
 * group of its own, recorded in a journal under an owner unique to this process, the servers of owners that died
 * swept at start, the whole group stopped and verified gone), its stdin and stdout as a kernel `Transport`, its
 * stderr drained into a bounded tail. `close` is the MCP stdio close: the end of stdin, `exitGrace` for the server to
 * exit, then SIGTERM to its group, SIGKILL `killGrace` later (`NodeSupervisedSpawner`'s stop).
 */
import * as Transport from "@lifeline/kernel/Transport"
import * as NodeSupervisedSpawner from "@lifeline/node/NodeSupervisedSpawner"
import type * as Process from "@lifeline/process/Process"
import type * as StopSequence from "@lifeline/process/StopSequence"
import type * as Cause from "effect/Cause"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as ChildProcess from "effect/process/ChildProcess"
import * as ChildProcessSpawner from "effect/process/ChildProcessSpawner"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

/** How many of the server's last stderr lines are kept, and how long one may be (longer ones are cut). */
export const stderrTailLines = 50
export const maxStderrLineLength = 8192

export interface Closed {
  /** The step after which the server was seen to exit: `EndOfInput`, `Terminate`, `Kill`, or `Unkillable`. */
  readonly endedBy: StopSequence.Step
  readonly exit: Process.ExitStatus | undefined
  readonly descendants: StopSequence.Descendants
  /** From the start of the close to the exit, when the server exited. */
  readonly exitAfterMs: number | null
}

export interface Server {
  readonly pid: number
  readonly transport: Transport.Transport.Service
  /** The last lines of the server's stderr, oldest first (untrusted: show them escaped). */
  readonly stderrTail: () => ReadonlyArray<string>
  /** The MCP stdio close; the first call does it, every call gets its outcome. */
  readonly close: Effect.Effect<Closed>
}

const readError = (cause: unknown) =>
  new Transport.TransportError({ reason: "Read", message: "reading the server's stdout failed", cause })

/** Spawns the server in the current Scope; closing the Scope stops it too, if `close` did not. */
export const spawn = (
  executable: string,
  args: ReadonlyArray<string>,
  options: {
    readonly exitGrace: Duration.Duration
    readonly killGrace: Duration.Duration
    readonly onStderrLine?: ((line: string) => void) | undefined
  }
) =>
  Effect.gen(function*() {
    const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
    // Its own Scope, so that `close` can stop it before the program's Scope closes and read the stop's report.
    const scope = yield* Scope.fork(yield* Effect.scope)
    // Bounded: the peer's writer waits when the pipe is full, as it would on a Node stream.
    const input = yield* Queue.bounded<Uint8Array, Cause.Done>(64)
    const handle = yield* spawner.spawn(ChildProcess.make(executable, [...args], {
      stdin: { stream: Stream.fromQueue(input), endOnDone: true },
      stdout: "pipe",
      stderr: "pipe",
      killSignal: "SIGTERM",
      forceKillAfter: options.killGrace
    })).pipe(Scope.provide(scope))

    const tail: Array<string> = []
    // Always drained: a server blocks once 64 KiB of stderr wait in the pipe.
    yield* handle.stderr.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.runForEach((line) =>
        Effect.sync(() => {
          const kept = line.length > maxStderrLineLength ? `${line.slice(0, maxStderrLineLength)}…` : line
          tail.push(kept)
          if (tail.length > stderrTailLines) tail.shift()
          options.onStderrLine?.(kept)
        })
      ),
      Effect.ignore,
      Effect.forkIn(scope)
    )

    const transport: Transport.Transport.Service = {
      incoming: Stream.mapError(handle.stdout, readError),
      send: (chunks) => Effect.asVoid(Effect.forEach(chunks, (chunk) => Queue.offer(input, chunk), { discard: true })),
      end: Effect.asVoid(Queue.end(input))
    }

    const exit = NodeSupervisedSpawner.awaitExit(handle)
    const close = yield* Effect.cached(Effect.gen(function*() {
      const before = yield* NodeSupervisedSpawner.exitStatus(handle)
      const started = performance.now()
      const exitSeen = yield* Effect.forkChild(Effect.map(exit, () => Math.round(performance.now() - started)))
      yield* Queue.end(input)
      const exited = yield* Effect.timeoutOption(exit, options.exitGrace)
      // Closing the Scope stops what is left: the server if it is still running, else what it left in its group.
      yield* Scope.close(scope, Exit.void)
      const report = Option.getOrUndefined(yield* NodeSupervisedSpawner.lastStop(handle))
      const status = Option.getOrUndefined(yield* NodeSupervisedSpawner.exitStatus(handle))
      const endedBy: StopSequence.Step = Option.isSome(before)
        ? "Exited"
        : Option.isSome(exited)
        ? "EndOfInput"
        : report?.endedBy ?? "Unkillable"
      return {
        endedBy,
        exit: status,
        descendants: report?.descendants ?? "None",
        exitAfterMs: Option.isSome(before) || status === undefined ? null : yield* Fiber.join(exitSeen)
      } satisfies Closed
    }))
    return { pid: handle.pid, transport, stderrTail: () => [...tail], close } satisfies Server
  })
