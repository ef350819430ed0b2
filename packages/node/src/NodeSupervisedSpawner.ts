/**
 * Effect's `ChildProcessSpawner` service with Lifeline's supervision: a drop-in for `NodeChildProcessSpawner.layer`
 * from `@effect/platform-node`, so that `ChildProcess.make`, and every library that spawns through the service
 * (Effect's `McpClient.layerStdio`), gets a bounded stop of each child's whole process group and a record of what
 * was started, swept at the next start after a crash. docs/supervising-effect-children.md compares the two layers.
 *
 * @since 0.1.0
 */
import * as NodeChildProcessSpawner from "@effect/platform-node/NodeChildProcessSpawner"
import type * as Journal from "@lifeline/journal/Journal"
import type * as Process from "@lifeline/process/Process"
import * as StopSequence from "@lifeline/process/StopSequence"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as FileSystem from "effect/FileSystem"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Path from "effect/Path"
import * as ChildProcessSpawner from "effect/process/ChildProcessSpawner"
import type * as Scope from "effect/Scope"
import type { Readable, Writable } from "node:stream"
import * as spawnerJournal from "./internal/spawnerJournal.js"
import * as internal from "./internal/supervisedSpawner.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * After the signal that asks a child to stop (its command's `killSignal`, SIGTERM by default), how long it and its
   * process group have before SIGKILL, when the command has no `forceKillAfter`. Default: the kernel's stop sequence
   * `killGrace`, 1 second.
   */
  readonly killGrace?: Duration.Input | undefined
  /** After SIGKILL, how long to wait for the group to be gone before the stop reports it `Unkillable`. Default 1 s. */
  readonly verifyTimeout?: Duration.Input | undefined
  /**
   * Where each started child is recorded (under an owner unique to this process), and where the children of owners
   * that are no longer running are found and swept at start. Default: a small file per process in
   * {@link directory}. `false` records nothing.
   */
  readonly journal?: Journal.Journal.Service | false | undefined
  /**
   * The directory of the default journal's files. Default `$XDG_STATE_HOME/lifeline/children`, or
   * `~/.local/state/lifeline/children`.
   */
  readonly directory?: string | undefined
  /** How long the sweep at start gives a dead owner's child after SIGTERM, and again after SIGKILL. Default 1 s. */
  readonly reapGrace?: Duration.Input | undefined
  /**
   * Each child's group is watched by this process's guardian (`NodeGuardian`: one small detached Node process per
   * host, started with the first child): if this process dies without stopping its children (SIGKILL, a signal it has
   * no handler for) and no host starts again to sweep the journal, the guardian sends SIGTERM to each group still
   * there, SIGKILL `reapGrace` later, with `NodeReaper`'s checks against reused pids. Default `false` here (one more
   * process per host); `@lifeline/mcp`'s transport turns it on.
   */
  readonly guardian?: boolean | undefined
}

/**
 * The service, over Effect's own Node spawner `spawner` (which does the plumbing of each process). The journal is
 * opened, and dead owners' children swept, once per call, in the Scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  spawner: ChildProcessSpawner.ChildProcessSpawner["Service"],
  options: Options = {}
): Effect.Effect<ChildProcessSpawner.ChildProcessSpawner["Service"], never, Scope.Scope> =>
  Effect.gen(function*() {
    // Windows has no process groups: Effect's spawner kills the tree with `taskkill` there. Not supervised yet.
    if (process.platform === "win32") return spawner
    const bounds = StopSequence.bounds({ killGrace: options.killGrace, verifyTimeout: options.verifyTimeout })
    const recorder = options.journal === false ? undefined : yield* spawnerJournal.make({
      journal: options.journal,
      directory: options.directory,
      reapGrace: options.reapGrace ?? bounds.killGrace
    })
    return internal.make(spawner, {
      killGrace: bounds.killGrace,
      verifyTimeout: bounds.verifyTimeout,
      recorder,
      guardianGrace: options.guardian === true ? Duration.toMillis(options.reapGrace ?? bounds.killGrace) : undefined
    })
  })

/**
 * The layer with options: see {@link layer}.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerOptions = (
  options: Options
): Layer.Layer<ChildProcessSpawner.ChildProcessSpawner, never, FileSystem.FileSystem | Path.Path> =>
  Layer.effect(
    ChildProcessSpawner.ChildProcessSpawner,
    Effect.flatMap(ChildProcessSpawner.ChildProcessSpawner, (spawner) => make(spawner, options))
  ).pipe(Layer.provide(NodeChildProcessSpawner.layer))

/**
 * A drop-in for `NodeChildProcessSpawner.layer`: the same service and requirements, every option of a command honored
 * as Effect's layer does, and in addition: closing a child's Scope (or `kill()` without `forceKillAfter`) sends its
 * `killSignal` to the whole process group, SIGKILL after `killGrace` (1 s), and waits for the group to be gone
 * (zombies count as gone); `kill()` of a child that has exited succeeds; every child is recorded under an owner
 * unique to this process in a small file under the user's state directory, and at start the children of owners
 * that died are swept by `NodeReaper`.
 *
 * @example
 * ```ts
 * import { NodeFileSystem, NodePath } from "@effect/platform-node"
 * import { Effect, Layer } from "effect"
 * import { ChildProcess } from "effect/process"
 * import { NodeSupervisedSpawner } from "@lifeline/node"
 *
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const handle = yield* ChildProcess.make("sleep", ["60"])
 *   return handle.pid
 * })) // the Scope's close stops `sleep` and its whole group within the kill grace
 *
 * program.pipe(
 *   Effect.provide(NodeSupervisedSpawner.layer.pipe(Layer.provide([NodeFileSystem.layer, NodePath.layer])))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<ChildProcessSpawner.ChildProcessSpawner, never, FileSystem.FileSystem | Path.Path> =
  layerOptions({})

/**
 * How a child started by this layer exited, the signal as data (Effect's `exitCode` names a signal only in an
 * error message): `None` while it runs, or for a handle of another spawner.
 *
 * @since 0.1.0
 * @category combinators
 */
export const exitStatus = (
  handle: ChildProcessSpawner.ChildProcessHandle
): Effect.Effect<Option.Option<Process.ExitStatus>> =>
  Effect.sync(() => Option.fromUndefinedOr(internal.supervised.get(handle)?.exitStatus()))

/**
 * Waits for a child started by this layer to exit, and returns how it exited, the signal as data: the exit its one
 * watcher saw, so that waiting costs no second evaluation of Effect's `exitCode`. For a handle of another spawner,
 * Effect's `exitCode` (a signal not told apart from a failure to wait: `{ exitCode: null, signal: null }`).
 *
 * @since 0.1.0
 * @category combinators
 */
export const awaitExit = (handle: ChildProcessSpawner.ChildProcessHandle): Effect.Effect<Process.ExitStatus> =>
  Effect.suspend(() =>
    internal.supervised.get(handle)?.exit ?? Effect.match(handle.exitCode, {
      onSuccess: (code): Process.ExitStatus => ({ exitCode: code, signal: null }),
      onFailure: (): Process.ExitStatus => ({ exitCode: null, signal: null })
    })
  )

/**
 * Calls `listener` once a child started by this layer has exited (after {@link exitStatus} has it), from Node's `exit`
 * event: for a caller that waits for the exit from Promise code, without a fiber (an MCP transport's `close()`). Returns
 * what removes the listener; a child that has exited already has it called at once. None when Node did not publish the
 * process on its `child_process` diagnostics channel ({@link awaitExit} then).
 *
 * @since 0.3.0
 * @category combinators
 */
export const onExit = (
  handle: ChildProcessSpawner.ChildProcessHandle,
  listener: () => void
): Option.Option<() => void> => {
  const info = internal.supervised.get(handle)
  if (info?.onExit === undefined) return Option.none()
  if (info.exitStatus() !== undefined) {
    listener()
    return Option.some(() => {})
  }
  return Option.some(info.onExit(listener))
}

/**
 * Whether a child started by this layer has exited and its process group has no live member left (zombies count as
 * gone: they hold nothing), looked at now: for a caller that may leave the rest of a stop (the journal's record of
 * the end, the release of Effect's handle) to the background once nothing is left running (an MCP transport's
 * `close()`). `false` while it runs, while anything of its group does, and for a handle of another spawner.
 *
 * @since 0.3.0
 * @category combinators
 */
export const isGone = (handle: ChildProcessSpawner.ChildProcessHandle): boolean =>
  internal.supervised.get(handle)?.gone() ?? false

/**
 * The Node stream of the standard input of a child started by this layer with `stdin: "pipe"`, for a caller that
 * writes to it without Effect's streams (an MCP transport writes its frames and ends its input as the MCP SDK's does,
 * without a fiber per chunk). None when the child's stdin is not a pipe, for a pipeline's stages other than the
 * first, or when Node did not publish the process on its `child_process` diagnostics channel. The handle's `stdin`
 * sink must then not be used as well; the stop, the process group and the journal record stay the layer's.
 *
 * @since 0.3.0
 * @category accessors
 */
export const nodeStdin = (handle: ChildProcessSpawner.ChildProcessHandle): Option.Option<Writable> =>
  Option.fromUndefinedOr(internal.supervised.get(handle)?.stdin)

/**
 * The Node stream of the standard output of a child started by this layer with `stdout: "pipe"`, taken from the
 * handle's `stdout` stream, for a caller that reads it without Effect's streams (an MCP transport reads its lines as
 * the MCP SDK's does, without a fiber to see the end of output on the path of every close). Effect's spawner pipes the
 * output into a stream of its own: that pipe is undone, and `buffered` holds what it had received, to be read first.
 * The handle's `stdout` and `all` then yield nothing more. None when stdout is not a pipe or has ended, when it was
 * taken already, or when Node did not publish the process on its `child_process` diagnostics channel; a pipeline's
 * stdout is its last stage's.
 *
 * @since 0.3.0
 * @category accessors
 */
export const nodeStdout = (
  handle: ChildProcessSpawner.ChildProcessHandle
): Option.Option<{ readonly stream: Readable; readonly buffered: ReadonlyArray<Uint8Array> }> =>
  Option.fromUndefinedOr(internal.supervised.get(handle)?.takeStdout())

/**
 * The report of the last stop of a child started by this layer (its `kill()`, or the close of its Scope): which
 * step ended it, the signals sent, what became of its descendants, how long it took. `SIGTERM` in `signals` stands
 * for the signal that asked (the command's `killSignal`).
 *
 * @since 0.1.0
 * @category combinators
 */
export const lastStop = (
  handle: ChildProcessSpawner.ChildProcessHandle
): Effect.Effect<Option.Option<StopSequence.StopReport>> =>
  Effect.sync(() => Option.fromUndefinedOr(internal.supervised.get(handle)?.lastStop()))
