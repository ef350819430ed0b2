/**
 * The Node wiring of `@lifeline/hermes`, shared by the examples: `@lifeline/hermes` is written against kernel and
 * platform Tags, and `@lifeline/node` knows nothing of Hermes, so the two meet here.
 *
 * - `runExtension`: runs an extension as the main program of its process (stdio transport, logs on stderr, files
 *   through Node's file system, the host's pid watched, SIGTERM/SIGINT/SIGHUP run the shutdown checklist, exit code
 *   from the outcome).
 * - `splitCommandLine`, `visible`, `visibleJson`: for the command-line programs among the examples.
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
 * The host's pid from `initialize`, checked every 250 ms: a host that was SIGKILLed while a grandchild holds our stdin
 * open never ends that stdin, and the extension must not outlive it.
 */
export const HostMonitorLive: Layer.Layer<HostMonitor.HostMonitor> = HostMonitor.layer({
  awaitExit: (pid) => NodeStdio.awaitHostExit(pid)
})

/**
 * Runs `extension` on this process's stdin and stdout until the host shuts it down or goes away (its stdin ends, or
 * the process named by `hostPid` exits), then exits. The exit code (`NodeSignals.ExitCode`):
 *
 * - 0 when it ended by itself: the host shut it down (`Shutdown`; a cleanup that failed was reported in the answer),
 *   or went away (`EndOfInput`, `HostExited`);
 * - 1 when the connection failed (`Failed`: a fatal framing error such as a `Content-Length` over the limit, a read
 *   error): the host is still there and did not ask it to stop, so whoever watches the process must see a failure;
 *   also when it could not start: an invalid `LIFELINE_SHUTDOWN_POLICY` or `LIFELINE_DRAIN_TIMEOUT` (logged, naming
 *   the variable);
 * - 143, 130, 129 after SIGTERM, SIGINT, SIGHUP: the checklist ran (a drain included) while the connection to the host
 *   was still open, then the run was interrupted; 2 or 3 when a second signal forced the stop.
 */
export const runExtension = <S, Res>(extension: Extension.Extension<S, Res, never>): void =>
  NodeSignals.runMain(
    Extension.run(extension).pipe(
      Effect.tap((outcome) =>
        Effect.logInfo(`${extension.options.name} ended: ${outcome._tag}`).pipe(
          Effect.annotateLogs({
            reason: String(outcome.reason),
            failures: outcome.failures.join("; "),
            cancelled: outcome.cancelled,
            refusedCommands: outcome.refusedCommands
          })
        )
      ),
      Effect.flatMap((outcome) =>
        outcome._tag === "Failed"
          ? Effect.fail(`${extension.options.name}: the connection to the host failed (exit code 1)`)
          : Effect.void
      ),
      Effect.provide(Layer.mergeAll(NodeStdio.layer(), NodeFileSystem.layer, NodePath.layer, HostMonitorLive))
    )
  )

// C0 controls, DEL, C1 controls, the Unicode line and paragraph separators, and the bidirectional embeddings,
// overrides and isolates (U+202A–U+202E, U+2066–U+2069) that reorder what follows them on the screen.
const unsafe = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g
// The same without C0: JSON.stringify writes those as \u escapes already.
const unsafeInJson = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g
const hexEscape = (char: string) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`

/**
 * `text` made safe to print on a terminal, for whatever another process chose (an extension's name, titles, URLs,
 * stderr, error messages; a server's answers): a control character is shown, never obeyed. C0 controls and DEL become
 * their Unicode Control Pictures (ESC `␛`, LF `␊`, CR `␍`, DEL `␡`), so no escape sequence (OSC 52 clipboard writes,
 * OSC 0 titles, OSC 8 links, CSI screen clears) and no line break reaches the terminal; C1 controls (U+0080–U+009F,
 * U+009B is a one-byte CSI), line and paragraph separators and bidirectional overrides become `\u009b`-style escapes.
 * Everything else, other scripts and emoji included, is left as it is. Idempotent.
 */
export const visible = (text: string): string =>
  text.replace(unsafe, (char) => {
    const code = char.charCodeAt(0)
    return code < 0x20 ? String.fromCharCode(0x2400 + code) : code === 0x7f ? "\u2421" : hexEscape(char)
  })

/**
 * `JSON.stringify(value, null, indent)` that is also safe to print on a terminal: JSON.stringify escapes C0 controls
 * but writes DEL, C1 controls, line separators and bidirectional overrides as they are; here they are `\u` escapes
 * too. The JSON means the same: a parser reads back the very same strings.
 */
export const visibleJson = (value: unknown, indent?: number): string =>
  JSON.stringify(value, null, indent).replace(unsafeInJson, hexEscape)

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
  exit: child.exit,
  // To the child's process group: the host's stop sequence reaches whatever the extension started.
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
 * Real child processes. The host runs the stop sequence itself (the kernel's `StopSequence`: `shutdown`, the end of
 * stdin, then SIGTERM or SIGKILL); closing the spawn's Scope runs NodeChildProcess's own, for whatever is left.
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
    }).pipe(Effect.map(toProcess))
    return options?.owner === undefined ? spawned : Effect.provideService(spawned, Journal.Owner, options.owner)
  }
})

/** Real child processes, not recorded anywhere. */
export const SpawnerLive: Layer.Layer<Spawner.Spawner> = Layer.succeed(Spawner.Spawner, makeSpawner())
