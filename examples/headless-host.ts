/**
 * The headless Hermes host, and the demo: it spawns an extension as a real child process, initializes it, lists its
 * commands, executes them, serves its editor calls from an HL7 message, shows (fetches) the windows it opens, waits
 * until it has settled, shuts it down, and prints what happened with timings. It works with any extension that
 * speaks the Hermes protocol, in any language.
 *
 *   pnpm tsx examples/headless-host.ts                     # the HL7 extension on the sample message
 *   examples/headless-host/bin/hermes-host --help
 *
 * It records the pid of every extension it spawns in a journal in the data directory, so that when a host is killed
 * (SIGKILL, OOM) the next start kills the extensions it left behind before it spawns its own.
 */
// Deep imports keep start-up short: the barrels would load every module of every package.
import * as ExtensionHost from "@lifeline/hermes/ExtensionHost"
import * as HermesProtocol from "@lifeline/hermes/HermesProtocol"
import * as MessageStore from "@lifeline/hermes/MessageStore"
import * as Spawner from "@lifeline/hermes/Spawner"
import * as Windows from "@lifeline/hermes/Windows"
import * as Journal from "@lifeline/kernel/Journal"
import * as Recovery from "@lifeline/kernel/Recovery"
import * as NodeSignals from "@lifeline/node/NodeSignals"
import * as SqliteJournal from "@lifeline/node/SqliteJournal"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import * as Util from "node:util"
import { makeSpawner, splitCommandLine } from "./hermes-node.js"

const here = Path.dirname(Url.fileURLToPath(import.meta.url))

const usage = `hermes-host: run a Hermes extension without Hermes' UI

  hermes-host [--extension "<command line>"] [--message FILE] [--run COMMAND_ID]... [--settle DURATION]
              [--shutdown-policy fail-fast|drain] [--drain-timeout DURATION] [--reason closing|disabled|reload|error]
              [--data-dir DIR] [--json] [--verbose]

  --extension        the extension's command line (default: the HL7 example extension)
  --message          the HL7 message to edit (default: the HL7 example's sample.hl7)
  --run              a command to execute, repeatable (default: every command the extension announces)
  --settle           shut down once the extension has sent no request for this long (default 300 millis)
  --shutdown-policy  what the extension does with running commands at shutdown (default drain), passed to it as
                     LIFELINE_SHUTDOWN_POLICY; --drain-timeout as LIFELINE_DRAIN_TIMEOUT (default 3 seconds)
  --reason           the shutdown reason (default closing)
  --data-dir         HERMES_DATA_DIR for the extension (default: $HERMES_DATA_DIR, else ~/.hermes); the host
                     records the extensions it spawns in DIR/lifeline/journal.db and, at start, kills those a
                     crashed host left behind
  --json             print one JSON report instead of the timeline
  --verbose          also log the host's and the extension's own log lines on stderr

  Exit code: 0 when the outcome is ok and no requested command was refused, 1 otherwise, 2 for bad arguments.`

const { values: args } = Util.parseArgs({
  options: {
    extension: { type: "string" },
    message: { type: "string" },
    run: { type: "string", multiple: true },
    settle: { type: "string", default: "300 millis" },
    "shutdown-policy": { type: "string", default: "drain" },
    "drain-timeout": { type: "string", default: "3 seconds" },
    reason: { type: "string", default: "closing" },
    "data-dir": { type: "string" },
    json: { type: "boolean", default: false },
    verbose: { type: "boolean", default: false },
    help: { type: "boolean", default: false }
  }
})

const fail = (message: string): never => {
  process.stderr.write(`hermes-host: ${message}\n\n${usage}\n`)
  process.exit(2)
}

if (args.help) {
  process.stdout.write(usage + "\n")
  process.exit(0)
}

const reason = HermesProtocol.ShutdownReason.literals.find((r) => r === args.reason) ??
  fail(`--reason must be one of ${HermesProtocol.ShutdownReason.literals.join(", ")}`)
const policy = args["shutdown-policy"] === "drain" || args["shutdown-policy"] === "fail-fast"
  ? args["shutdown-policy"]
  : fail("--shutdown-policy must be fail-fast or drain")
const settle = Option.getOrElse(
  Duration.fromInput(args.settle as Duration.Input),
  () => fail(`--settle: not a duration: ${args.settle}`)
)
const commandLine = splitCommandLine(args.extension ?? Path.join(here, "hl7-extension", "bin", "hl7-extension"))
if (commandLine.length === 0) fail("--extension is empty")
const messageFile = args.message ?? Path.join(here, "hl7-extension", "sample.hl7")
const before = Fs.readFileSync(messageFile, "utf8")
const dataDir = args["data-dir"] ?? process.env.HERMES_DATA_DIR ?? Path.join(Os.homedir(), ".hermes")
const journalFile = Path.join(dataDir, "lifeline", "journal.db")
// Stable across runs: the next start reaps the children this owner recorded and never saw exit.
const owner = "hermes-host"

type Outcome =
  | "ok"
  | "initialize-timeout"
  | "initialize-error"
  | "exited-before-initialize"
  | "crashed"
  | "shutdown-timeout-killed"

// -- the journal: orphans of a crashed host ---------------------------------------------------------------------

interface Reaped {
  readonly pid: number
  readonly command: ReadonlyArray<string>
  /** `Survived`: still there after SIGKILL (the reaper failed with a `ReapError`); `Failed`: the reaper failed. */
  readonly outcome: Recovery.ReapOutcome | "Survived" | "Failed"
  readonly detail: string | null
  readonly at: number
}

interface Recording {
  /** Undefined when the children are not recorded: see `warning`. */
  readonly journal: Journal.Journal.Service | undefined
  readonly warning: string | undefined
  readonly reaped: ReadonlyArray<Reaped>
}

const messageOf = (error: unknown): string =>
  typeof error === "object" && error !== null && typeof (error as { message?: unknown }).message === "string"
    ? (error as { message: string }).message
    : String(error)

/**
 * Opens the journal, claims the owner for the Scope, and kills the extensions a crashed host left behind. One
 * recording host per data dir: a second one started under the same owner would take the first one's children for
 * orphans, so while another live host holds the claim this one records nothing. The host works without the journal:
 * if it cannot be opened or the owner is in use, it warns and records nothing.
 */
const openRecording = (since: (at: number) => number): Effect.Effect<Recording, never, Scope.Scope> =>
  Effect.gen(function*() {
    const notRecording = (why: string) =>
      Effect.as(Effect.logWarning(`hermes-host: ${why}; the extension's pid is not recorded`), {
        journal: undefined,
        warning: why,
        reaped: []
      })
    const opened = yield* Effect.result(Effect.sandbox(SqliteJournal.makeFile({ filename: journalFile })))
    if (Result.isFailure(opened)) {
      return yield* notRecording(`cannot open the journal ${journalFile}: ${messageOf(Cause.squash(opened.failure))}`)
    }
    const journal = opened.success
    const reaped: Array<Reaped> = []
    const reap = SqliteJournal.reapProcess({ grace: "1 second" })
    const report = yield* Recovery.reapOrphans(
      (info) =>
        reap(info).pipe(
          Effect.tapError((error) =>
            Effect.map(Clock.currentTimeMillis, (now) => {
              reaped.push({
                pid: info.pid,
                command: info.command,
                outcome: error instanceof SqliteJournal.ReapError ? "Survived" : "Failed",
                detail: messageOf(error),
                at: since(now)
              })
            })
          )
        ),
      { owner }
    ).pipe(Effect.provideService(Journal.Journal, journal), Effect.sandbox, Effect.result)
    if (Result.isFailure(report)) {
      const error = Cause.findErrorOption(report.failure)
      return yield* notRecording(
        Option.isSome(error) && error.value._tag === "OwnerInUse"
          ? `another hermes-host${error.value.pid === undefined ? "" : ` (pid ${error.value.pid})`} runs on ${dataDir}`
          : `cannot look for orphans in ${journalFile}: ${messageOf(Cause.squash(report.failure))}`
      )
    }
    const now = since(yield* Clock.currentTimeMillis)
    for (const { entry, outcome } of report.success.reaped) {
      const info = entry.payload as Recovery.ProcessInfo
      reaped.push({ pid: info.pid, command: info.command, outcome, detail: null, at: now })
    }
    return { journal, warning: undefined, reaped }
  })

// -- the timeline ----------------------------------------------------------------------------------------------

const segments = (text: string) => text.split(/\r\n|\r|\n/).filter((line) => line !== "")

const quote = (text: string, width = 96) => (text.length > width ? text.slice(0, width - 1) + "…" : text)

const line = (at: number, what: string, text: string) => {
  if (!args.json) process.stdout.write(`${String(at).padStart(6)} ms  ${what.padEnd(10)} ${text}\n`)
}
const more = (text: string) => {
  if (!args.json) process.stdout.write(`${" ".repeat(21)}${text}\n`)
}

const printEdit = (previous: string, next: string) => {
  const old = segments(previous)
  const now = segments(next)
  for (let i = 0; i < Math.max(old.length, now.length); i++) {
    if (old[i] === now[i]) continue
    if (old[i] !== undefined) more(`- ${quote(old[i])}`)
    if (now[i] !== undefined) more(`+ ${quote(now[i])}`)
  }
}

const describeExit = (status: { readonly code: number | null; readonly signal: string | null }) =>
  status.signal !== null ? `killed by ${status.signal}` : `exit code ${status.code}`

const program = Effect.gen(function*() {
  const startedAt = yield* Clock.currentTimeMillis
  const since = (at: number) => at - startedAt
  const store = yield* MessageStore.MessageStore
  let shown = before

  if (!args.json) {
    process.stdout.write(`Hermes headless host: ${commandLine.join(" ")}\n`)
    process.stdout.write(`message ${Path.relative(process.cwd(), messageFile)} (${segments(before).length} segments)`)
    process.stdout.write(`, shutdown policy ${policy}, data dir ${dataDir}\n\n`)
  }

  const recording = yield* openRecording(since)
  if (recording.warning !== undefined) line(0, "journal", `✘ not recording: ${recording.warning}`)
  for (const orphan of recording.reaped) {
    const detail = orphan.detail === null ? "" : ` (${orphan.detail})`
    line(orphan.at, "reap", `pid ${orphan.pid} left by a crashed host: ${orphan.outcome}${detail}`)
    more(`  ${quote(orphan.command.join(" "))}`)
  }

  const events: Array<ExtensionHost.Event> = []
  // Refusals happen in this fiber, events reach the printer a little later: each waits for the events before it.
  const refusalLines: Array<{ readonly at: number; readonly text: string }> = []
  const printRefusals = (until: number) => {
    while (refusalLines.length > 0 && refusalLines[0].at <= until) {
      const { at, text } = refusalLines.shift()!
      line(at, "execute", text)
    }
  }
  const record = (event: ExtensionHost.Event): Effect.Effect<void> =>
    Effect.gen(function*() {
      events.push(event)
      printRefusals(since(event.at))
      const at = since(event.at)
      switch (event._tag) {
        case "Spawned":
          return line(at, "spawn", `pid ${event.pid} (start ${event.generation})`)
        case "SpawnFailed":
          return line(at, "spawn", `✘ ${event.detail}`)
        case "Initializing":
          return line(at, "initialize", `→ initialize (10 s to answer)`)
        case "Ready": {
          line(at, "ready", `← ${event.name} ${event.version}, ${event.commands.length} command(s); → initialized`)
          for (const command of event.commands) more(`  ${command.id.padEnd(16)} ${command.title}`)
          return
        }
        case "InitializeFailed":
          return line(at, "initialize", `✘ ${event.reason}: ${event.detail}`)
        case "CommandSent":
          return line(at, "execute", `→ command/execute ${event.command}`)
        case "RequestServed": {
          line(at, "serve", `← ${event.method} ${event.ok ? "✔" : `✘ ${event.detail}`}`)
          if (event.ok && (event.method === "editor/patchMessage" || event.method === "editor/setMessage")) {
            const now = yield* store.current
            printEdit(shown, now)
            shown = now
          }
          return
        }
        case "WindowOpened":
          return line(at, "window", `${event.windowId} "${event.title ?? ""}" ${event.url}`)
        case "WindowShown": {
          const p = event.presentation
          const how = p.status !== undefined
            ? `fetched once: HTTP ${p.status}, ${p.bytes} bytes`
            : p.error !== undefined
            ? `fetch failed: ${p.error}`
            : `not fetched (${p.skipped})`
          return line(at, "window", `${event.windowId} ${how}`)
        }
        case "WindowClosed":
          return line(at, "window", `${event.windowId} closed → window/closed`)
        case "ShutdownStarted":
          return line(at, "shutdown", `→ shutdown { reason: "${event.reason}" } (5 s to answer)`)
        case "ShutdownFinished": {
          const s = event.summary
          const answer = s.responded ? (s.success ? "← { success: true }" : `← error ${s.error}`) : `✘ ${s.error}`
          const ending = s.killed ? ", SIGKILL" : s.terminated ? ", SIGTERM" : ""
          return line(at, "shutdown", `${answer} (${s.elapsedMs} ms${ending})`)
        }
        case "Exited":
          line(at, event.expected ? "exit" : "crash", describeExit(event.status))
          if (!event.expected) { for (const tail of event.stderrTail.slice(-5)) more(`stderr: ${quote(tail)}`) }
          return
        case "Restarting":
          return line(at, "restart", `${event.restart} of ${event.maxRestarts}`)
        case "Failed":
          return line(at, "failed", event.reason)
        case "StatusChanged":
          return
      }
    })

  const extension = yield* ExtensionHost.start(
    {
      command: commandLine[0],
      args: commandLine.slice(1),
      env: { LIFELINE_SHUTDOWN_POLICY: policy, LIFELINE_DRAIN_TIMEOUT: args["drain-timeout"] }
    },
    {
      dataDir,
      hermesVersion: "0.1.0-headless",
      hostPid: process.pid,
      // A crash ends the run: the report says so instead of restarting.
      restart: { maxRestarts: 0, within: "1 minute" }
    }
  ).pipe(Effect.provideService(Spawner.Spawner, makeSpawner({ journal: recording.journal, owner })))
  const printer = yield* extension.events.pipe(Stream.runForEach(record), Effect.forkChild)

  let summary: ExtensionHost.ShutdownSummary | undefined
  const refused: Array<{ readonly command: string; readonly reason: string; readonly detail: string }> = []
  if ((yield* extension.status) === "Ready") {
    const info = Option.getOrThrow(yield* extension.info)
    for (const id of args.run ?? info.commands.map((c) => c.id)) {
      yield* extension.execute(id).pipe(
        Effect.catch((error) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Effect.sync(() => {
              refused.push({ command: error.command, reason: error.reason, detail: error.detail })
              refusalLines.push({ at: since(now), text: `✘ ${error.message}` })
            }))
        )
      )
    }
    yield* extension.awaitQuiet(settle)
    const now = yield* Clock.currentTimeMillis
    if ((yield* extension.status) === "Ready") {
      line(since(now), "settled", `no request for ${Duration.format(settle)}`)
    }
    summary = Option.getOrUndefined(yield* extension.shutdown(reason))
  }
  // The events stream runs until the host's scope closes: stop the printer and print what it has not reached yet.
  // The history holds the latest events only: event number `droppedEvents + 1` is its first.
  yield* Fiber.interrupt(printer)
  const dropped = yield* extension.droppedEvents
  for (const event of (yield* extension.history).slice(Math.max(0, events.length - dropped))) yield* record(event)
  printRefusals(Infinity)

  const after = yield* store.current
  const initializeFailed = events.find((e) => e._tag === "InitializeFailed")
  const outcome: Outcome = initializeFailed?._tag === "InitializeFailed"
    ? (initializeFailed.reason === "timeout"
      ? "initialize-timeout"
      : initializeFailed.reason === "error"
      ? "initialize-error"
      : "exited-before-initialize")
    : events.some((e) => e._tag === "Exited" && !e.expected)
    ? "crashed"
    : summary !== undefined && summary.killed && !summary.responded
    ? "shutdown-timeout-killed"
    : "ok"
  const ready = events.find((e) => e._tag === "Ready")
  const exited = [...events].reverse().find((e) => e._tag === "Exited")
  const finishedAt = since(yield* Clock.currentTimeMillis)

  if (args.json) {
    const report = {
      outcome,
      extension: ready?._tag === "Ready"
        ? { name: ready.name, version: ready.version, commands: ready.commands }
        : null,
      events: events.filter((e) => e._tag !== "StatusChanged").map((e) => ({ type: e._tag, atMs: since(e.at) })),
      requestsServed: events.flatMap((e) =>
        e._tag === "RequestServed" ? [{ method: e.method, ok: e.ok, atMs: since(e.at) }] : []
      ),
      message: { before, after },
      shutdown: summary === undefined ? null : {
        reason: summary.reason,
        policy,
        responded: summary.responded,
        success: summary.success,
        error: summary.error ?? null,
        killed: summary.killed,
        elapsedMs: summary.elapsedMs
      },
      exit: exited?._tag === "Exited" ? exited.status : null,
      refused,
      journal: { file: journalFile, recording: recording.journal !== undefined, warning: recording.warning ?? null },
      reaped: recording.reaped.map(({ at, ...orphan }) => ({ ...orphan, atMs: at })),
      elapsedMs: finishedAt
    }
    process.stdout.write(JSON.stringify(report, null, 2) + "\n")
  } else {
    process.stdout.write(`\n${outcome === "ok" ? "✔" : "✘"} ${outcome} in ${finishedAt} ms`)
    process.stdout.write(before === after ? ", message unchanged\n" : "; the message now reads:\n")
    if (before !== after) { for (const segment of segments(after)) more(quote(segment, 110)) }
    if (refused.length > 0) {
      process.stdout.write(`✘ refused: ${refused.map((r) => `${r.command} (${r.reason})`).join(", ")}\n`)
    }
  }
  return { outcome, refused: refused.map((r) => r.command) }
}).pipe(Effect.scoped)

const HostLive = Layer.mergeAll(
  MessageStore.layer(before),
  Windows.layerHeadless.pipe(Layer.provide(FetchHttpClient.layer))
)

NodeSignals.runMain(
  program.pipe(
    // The outcome is the extension's life; a refused command also makes the run fail (exit code 1).
    Effect.flatMap(({ outcome, refused }) =>
      outcome !== "ok"
        ? Effect.fail(outcome)
        : refused.length > 0
        ? Effect.fail(`refused: ${refused.join(", ")}`)
        : Effect.void
    ),
    Effect.provide(HostLive),
    Effect.provideService(References.MinimumLogLevel, args.verbose ? "Debug" : "Warn")
  )
)
