/**
 * The Node wiring of `@lifeline/hermes`, shared by the examples: `@lifeline/hermes` is written against kernel and
 * platform Tags, and `@lifeline/node` knows nothing of Hermes, so the two meet here.
 *
 * - `runExtension`: runs an extension as the main program of its process (stdio transport, logs on stderr, files
 *   through Node's file system, the host's pid watched, SIGTERM/SIGINT run the shutdown checklist, exit code from
 *   the outcome).
 * - `SpawnerLive`: the host's `Spawner` as real child processes (`NodeChildProcess`), with their stderr kept;
 *   `makeSpawner({ journal })` also records each child's pid and exit in a `Journal`, so that the next start after a
 *   crash of the host can kill the children it left behind (`Recovery.reapOrphans`).
 */
// Deep imports: an extension starts within Hermes' 10 s initialize budget even on a busy machine when it loads only
// the modules it uses (the barrels pull in SQLite, HTTP servers and every platform module).
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as Extension from "@lifeline/hermes/Extension"
import * as HostMonitor from "@lifeline/hermes/HostMonitor"
import * as Spawner from "@lifeline/hermes/Spawner"
import * as Journal from "@lifeline/kernel/Journal"
import * as NodeChildProcess from "@lifeline/node/NodeChildProcess"
import * as NodeSignals from "@lifeline/node/NodeSignals"
import * as NodeStdio from "@lifeline/node/NodeStdio"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ChildProcess from "effect/process/ChildProcess"

/**
 * The host's pid from `initialize`, checked once a second: a host that was SIGKILLed while a grandchild holds our stdin
 * open never ends that stdin, and the extension must not outlive it.
 */
export const HostMonitorLive: Layer.Layer<HostMonitor.HostMonitor> = HostMonitor.layer({
  awaitExit: (pid) => NodeStdio.awaitHostExit(pid)
})

/**
 * Runs `extension` on this process's stdin and stdout until the host shuts it down or goes away (its stdin ends, or
 * the process named by `hostPid` exits), then exits.
 */
export const runExtension = <S, Res>(extension: Extension.Extension<S, Res, never>): void =>
  NodeSignals.runMain(
    Extension.run(extension).pipe(
      Effect.tap((outcome) =>
        Effect.logInfo(`${extension.options.name} ended: ${outcome._tag}`).pipe(
          Effect.annotateLogs({ reason: String(outcome.reason), failures: outcome.failures.join("; ") })
        )
      ),
      Effect.provide(Layer.mergeAll(NodeStdio.layer(), NodeFileSystem.layer, NodePath.layer, HostMonitorLive))
    )
  )

/** Splits a command line into words: spaces separate, single and double quotes group, a backslash escapes. */
export const splitCommandLine = (line: string): Array<string> => {
  const words: Array<string> = []
  let word: string | undefined
  let quote: string | undefined
  for (let i = 0; i < line.length; i++) {
    const char = line[i]
    if (quote !== undefined) {
      if (char === quote) quote = undefined
      else if (char === "\\" && quote === "\"" && i + 1 < line.length) word = (word ?? "") + line[++i]
      else word = (word ?? "") + char
    } else if (char === "'" || char === "\"") {
      quote = char
      word = word ?? ""
    } else if (char === "\\" && i + 1 < line.length) {
      word = (word ?? "") + line[++i]
    } else if (/\s/.test(char)) {
      if (word !== undefined) words.push(word)
      word = undefined
    } else {
      word = (word ?? "") + char
    }
  }
  if (word !== undefined) words.push(word)
  return words
}

const toProcess = (child: NodeChildProcess.Child): Spawner.Process => ({
  pid: child.pid,
  transport: child.transport,
  exit: Effect.map(child.exit, (status) => ({ code: status.exitCode, signal: status.signal })),
  kill: (signal) => child.kill(signal),
  stderrTail: child.stderrTail
})

/**
 * How the spawner records its children. Without `journal`, nothing is recorded.
 */
export interface SpawnerOptions {
  /**
   * Records each child (pid, start time, command) when it is spawned and its exit when it ends, as NodeChildProcess
   * does with its `journal` option: a child that cannot be recorded is killed and its spawn fails.
   */
  readonly journal?: Journal.Journal.Service | undefined
  /** The `Journal.Owner` the children are recorded under, the one whose orphans the next start reaps. Default: the fiber's. */
  readonly owner?: string | undefined
}

/**
 * Real child processes. The host runs the polite part of the stop sequence itself (`shutdown`, then SIGTERM or
 * SIGKILL); closing the spawn's Scope runs NodeChildProcess's bounded sequence for whatever is left.
 */
export const makeSpawner = (options?: SpawnerOptions): Spawner.Spawner.Service => ({
  spawn: (spec) => {
    // The spec's variables are added to this process's environment.
    const command = ChildProcess.make(spec.command, spec.args ?? [], {
      env: spec.env ?? {},
      extendEnv: true,
      cwd: spec.cwd
    })
    const spawned = NodeChildProcess.make({
      command,
      stderrLogLevel: "Debug",
      stop: { shutdownTimeout: "1 second" },
      journal: options?.journal
    }).pipe(
      Effect.map(toProcess),
      Effect.mapError((error) => new Spawner.SpawnError({ command: error.command, detail: error.detail }))
    )
    return options?.owner === undefined ? spawned : Effect.provideService(spawned, Journal.Owner, options.owner)
  }
})

/** Real child processes, not recorded anywhere. */
export const SpawnerLive: Layer.Layer<Spawner.Spawner> = Layer.succeed(Spawner.Spawner, makeSpawner())
