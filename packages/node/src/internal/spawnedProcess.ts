/**
 * The Node `ChildProcess` behind a handle of Effect's spawner, which the handle does not expose. With it the exit is
 * seen as Node reports it, code and signal, from one listener: Effect's handle reports a signal only by failing its
 * `exitCode` with an error whose message names it, built (its stack, the command's display text) on the path of every
 * stop, and waited for through a race of two fibers.
 *
 * Node publishes every process it creates on its `child_process` diagnostics channel (a stable Node API), before the
 * pid is known. While a spawn of ours is under way the published processes are kept, and the one whose pid the handle
 * reports is taken; the others are dropped as soon as no spawn of ours is under way, so that no process someone else
 * started is held for long (at most the last 64, should our spawns overlap without end). Where nothing is published
 * (another runtime), the caller falls back on the handle.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as NodeChildProcess from "node:child_process"
import * as DiagnosticsChannel from "node:diagnostics_channel"
import { PassThrough, type Readable } from "node:stream"

/** How many published processes are kept at most, should our spawns overlap without end. */
const keptAtMost = 64

let underWay = 0
let published: Array<NodeChildProcess.ChildProcess> = []
let subscribed = false

const onPublish = (message: unknown): void => {
  if (underWay === 0) return
  const spawned = (message as { readonly process?: unknown } | null)?.process
  if (!(spawned instanceof NodeChildProcess.ChildProcess)) return
  if (published.length >= keptAtMost) published.shift()
  published.push(spawned)
}

/**
 * Runs `spawn` and finds the Node process whose pid `pidOf` reads from its result: `undefined` when none was
 * published with that pid.
 *
 * @internal
 */
export const capture = <A, E, R>(
  spawn: Effect.Effect<A, E, R>,
  pidOf: (spawned: A) => number | undefined
): Effect.Effect<readonly [A, NodeChildProcess.ChildProcess | undefined], E, R> =>
  Effect.suspend(() => {
    if (!subscribed) {
      // Once per process: while none of our spawns is under way the listener returns at once.
      DiagnosticsChannel.subscribe("child_process", onPublish)
      subscribed = true
    }
    underWay++
    return Effect.map(spawn, (spawned) => {
      const pid = pidOf(spawned)
      const index = pid === undefined ? -1 : published.findIndex((candidate) => candidate.pid === pid)
      return [spawned, index === -1 ? undefined : published.splice(index, 1)[0]] as const
    }).pipe(
      Effect.ensuring(Effect.sync(() => {
        underWay--
        if (underWay === 0) published = []
      }))
    )
  })

/**
 * What {@link takeStdout} hands over: the Node stream, and what Effect's own stream had already received from it.
 *
 * @internal
 */
export interface TakenOutput {
  readonly stream: Readable
  readonly buffered: ReadonlyArray<Uint8Array>
}

/**
 * Takes the child's stdout from Effect's spawner, which pipes it into a `PassThrough` behind the handle's `stdout`
 * stream: the pipe is undone, and what the `PassThrough` had received but nobody read is handed over first, so that
 * nothing is lost or read twice. `undefined` (the caller reads Effect's stream) when stdout is not a pipe, has
 * already ended, or is not piped to exactly one `PassThrough` (another version of Effect's spawner). Node keeps the
 * destinations of a pipe only in the stream's internal state, the one place they can be found.
 *
 * @internal
 */
export const takeStdout = (node: NodeChildProcess.ChildProcess): TakenOutput | undefined => {
  const stream = node.stdout
  if (stream === null || stream.readableEnded || stream.destroyed) return undefined
  const pipes: unknown = (stream as unknown as { readonly _readableState?: { readonly pipes?: unknown } })
    ._readableState?.pipes
  if (!Array.isArray(pipes) || pipes.length !== 1 || !(pipes[0] instanceof PassThrough)) return undefined
  const effects: PassThrough = pipes[0]
  stream.unpipe(effects)
  const buffered: Array<Uint8Array> = []
  for (let chunk: unknown = effects.read(); chunk !== null; chunk = effects.read()) {
    buffered.push(chunk as Uint8Array)
  }
  return { stream, buffered }
}
