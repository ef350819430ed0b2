/**
 * The host's `Spawner` as real child processes (`@lifeline/node`'s `NodeChildProcess`), with their stderr kept, and
 * `splitCommandLine` for the command line that names an extension.
 *
 * @since 0.1.0
 */
import * as Spawner from "@lifeline/hermes/Spawner"
import type * as Journal from "@lifeline/journal/Journal"
import * as JournalClaim from "@lifeline/journal/JournalClaim"
import * as NodeChildProcess from "@lifeline/node/NodeChildProcess"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ChildProcess from "effect/process/ChildProcess"

/**
 * How the spawner records its children. Without `journal`, nothing is recorded.
 *
 * @example
 * ```ts
 * import { NodeSpawner } from "@lifeline/hermes-node"
 * import type { Journal } from "@lifeline/journal"
 *
 * declare const journal: Journal.Journal.Service
 *
 * export const options: NodeSpawner.Options = { journal, owner: "hermes-host" }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * Records each child (pid, start time, command) when it is spawned and its exit when it ends, as NodeChildProcess
   * does with its `journal` option: a child that cannot be recorded is killed and its spawn fails.
   */
  readonly journal?: Journal.Journal.Service | undefined
  /**
   * The `JournalClaim.Owner` the children are recorded under, the one whose orphans the next start reaps. Default: the
   * fiber's.
   */
  readonly owner?: string | undefined
}

const toProcess = (child: NodeChildProcess.Child): Spawner.Process => ({
  pid: child.pid,
  transport: child.transport,
  exit: child.exit,
  // To the child's process group: the host's stop sequence reaches whatever the extension started.
  kill: (signal) => child.kill(signal),
  stderrTail: child.stderrTail
})

/**
 * Real child processes. The host runs the stop sequence itself (`StopSequence` of `@lifeline/process`: `shutdown`, the
 * end of stdin, then SIGTERM or SIGKILL); closing the spawn's Scope runs NodeChildProcess's own, for whatever is left. A
 * spec's `env` is added to this process's environment. Building the service acquires nothing: each `spawn` owns its
 * child in the Scope it runs in.
 *
 * @example
 * ```ts
 * import { Spawner } from "@lifeline/hermes"
 * import { NodeSpawner } from "@lifeline/hermes-node"
 * import type { Journal } from "@lifeline/journal"
 * import { Effect } from "effect"
 *
 * declare const journal: Journal.Journal.Service
 * declare const host: Effect.Effect<void, never, Spawner.Spawner>
 *
 * // Each child's pid and exit recorded, so that the next start reaps what a crash left behind.
 * export const recorded = Effect.provideService(host, Spawner.Spawner, NodeSpawner.make({ journal, owner: "hermes-host" }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options?: Options): Spawner.Spawner.Service => ({
  spawn: (spec) => {
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
    }).pipe(Effect.map(toProcess))
    return options?.owner === undefined ? spawned : Effect.provideService(spawned, JournalClaim.Owner, options.owner)
  }
})

/**
 * {@link make} as a layer. Without options, the children are not recorded anywhere.
 *
 * @example
 * ```ts
 * import type { Spawner } from "@lifeline/hermes"
 * import { NodeSpawner } from "@lifeline/hermes-node"
 * import { Effect } from "effect"
 *
 * declare const host: Effect.Effect<void, never, Spawner.Spawner>
 *
 * export const program: Effect.Effect<void> = Effect.provide(host, NodeSpawner.layer())
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options?: Options): Layer.Layer<Spawner.Spawner> => Layer.succeed(Spawner.Spawner, make(options))

/**
 * Splits a command line into words, like a shell without expansions: whitespace separates, single and double quotes
 * group (`''` is an empty word), and a backslash escapes the next character outside quotes and inside double quotes
 * (inside single quotes it is itself). A trailing backslash is kept; an unclosed quote runs to the end of the line.
 *
 * @example
 * ```ts
 * import { NodeSpawner } from "@lifeline/hermes-node"
 *
 * NodeSpawner.splitCommandLine(`node "my extension.js" --name 'a b'`) // ["node", "my extension.js", "--name", "a b"]
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
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
