/**
 * An agent you can kill at any moment and start again: it picks up where it was.
 *
 * The agent works through a fixed script of turns. Each turn has two journaled steps:
 *
 * - an "llm" step (kind `llm`): the model thinks and picks a tool. Sending a prompt again is harmless, so a step
 *   that a crash interrupted is resumed on the next start (`Recovery.resume`), and a finished one is never sent
 *   again: its stored answer is read back from the journal.
 * - a "tool" step (kind `tool`): the tool runs in a worker child process (`worker.ts`, JSON-RPC over its stdio),
 *   spawned with `NodeChildProcess` and recorded in the journal (`journal` option). A tool's side effects are
 *   unknown after a crash, so an interrupted one is not run again behind the user's back: recovery records it as
 *   `InterruptedByCrash`, and the agent retries it visibly when it gets to that turn.
 *
 * On start, recovery also kills the worker a crashed run left behind (`NodeReaper.reapProcess`): a worker lets a
 * running tool finish when its agent goes away, so after a SIGKILL it lives on, an orphan.
 *
 *   examples/agent-recovery/bin/agent-recovery --reset               # start from scratch
 *   kill -9 <the pid it prints>                                      # or --crash-at turn-2/tool
 *   examples/agent-recovery/bin/agent-recovery                       # recovers, then goes on
 */
// Deep imports keep start-up short: the barrels would load every module of every package.
import * as Journal from "@lifeline/journal/Journal"
import * as JournaledOperation from "@lifeline/journal/JournaledOperation"
import type * as JournalEntry from "@lifeline/journal/JournalEntry"
import * as ProcessRecord from "@lifeline/journal/ProcessRecord"
import * as Recovery from "@lifeline/journal/Recovery"
import * as DurationText from "@lifeline/kernel/DurationText"
import * as NodeChildProcess from "@lifeline/node/NodeChildProcess"
import * as NodeReaper from "@lifeline/node/NodeReaper"
import * as NodeSignals from "@lifeline/node/NodeSignals"
import * as SqliteJournal from "@lifeline/sqlite/SqliteJournal"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ChildProcess from "effect/process/ChildProcess"
import * as References from "effect/References"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import * as Util from "node:util"
import { Agent, RunTool } from "./protocol.js"

const usage = `agent-recovery: an agent you can kill at any moment; start it again and it picks up where it was

  agent-recovery [--data-dir DIR] [--reset] [--turns N] [--llm-ms DURATION] [--tool-ms DURATION] [--crash-at KEY]
                 [--json] [--verbose] [--help]

  --data-dir  where the journal lives (default: $LIFELINE_DATA_DIR, else ${
  Path.join(Os.tmpdir(), "lifeline-agent-recovery")
})
  --reset     kill the workers a crashed run left behind, then forget everything and start from turn 1
  --turns     how many turns the script has (default 5)
  --llm-ms    how long the model thinks, per turn (default 800)
  --tool-ms   how long a tool runs, times its weight (default 600; run_tests weighs 5)
  --crash-at  SIGKILL this process when the step with this key is running, e.g. turn-2/tool or turn-3/llm
  --json      also print a JSON summary as the last line
  --verbose   show the library's logs and the worker's stderr (on stderr)

  A DURATION is a number of milliseconds (800) or ${DurationText.forms}.

One agent at a time per data dir: recovery claims the journal's owner, so a second agent exits with code 2 while
the first runs, instead of taking its running steps for a crash's leftovers (and killing its worker). A killed
agent's claim is taken over at once.`

const { values: args } = Util.parseArgs({
  options: {
    "data-dir": { type: "string" },
    reset: { type: "boolean", default: false },
    turns: { type: "string", default: "5" },
    "llm-ms": { type: "string", default: "800" },
    "tool-ms": { type: "string", default: "600" },
    "crash-at": { type: "string" },
    json: { type: "boolean", default: false },
    verbose: { type: "boolean", default: false },
    help: { type: "boolean", default: false }
  }
})

const fail = (message: string): never => {
  process.stderr.write(`agent-recovery: ${message}\n\n${usage}\n`)
  process.exit(2)
}

if (args.help) {
  process.stdout.write(usage + "\n")
  process.exit(0)
}

const count = (name: string, text: string, min: number): number => {
  const value = Number(text)
  return Number.isInteger(value) && value >= min ? value : fail(`--${name} must be an integer >= ${min}`)
}
const turnCount = count("turns", args.turns, 1)
/** Milliseconds from a flag whose name says so: `800` is 800 ms; `1.5s`, `250ms`, "2 seconds" work too. */
const millis = (name: string, text: string): number =>
  Result.match(DurationText.parse(text, { unitless: "millis" }), {
    onFailure: (message) => fail(`--${name}: ${message}`),
    onSuccess: Duration.toMillis
  })
const llmMs = millis("llm-ms", args["llm-ms"])
const toolMs = millis("tool-ms", args["tool-ms"])
const crashAt = args["crash-at"]
if (crashAt !== undefined) {
  const step = /^turn-(\d+)\/(llm|tool)$/.exec(crashAt)
  if (step === null || Number(step[1]) < 1 || Number(step[1]) > turnCount) {
    fail(`--crash-at must name a step of this script, turn-1/llm ... turn-${turnCount}/tool, not ${crashAt}`)
  }
}

const dataDir = Path.resolve(
  args["data-dir"] ?? process.env.LIFELINE_DATA_DIR ?? Path.join(Os.tmpdir(), "lifeline-agent-recovery")
)
const journalDir = Path.join(dataDir, "lifeline")
const journalFile = Path.join(journalDir, "journal.db")
/** One line per tool call the worker carried out: the side effects, as they happened. */
const effectsFile = Path.join(dataDir, "tool-effects.log")
/** The repository: where `scripts/run-bundled.mjs` is, above this file (or above its bundle in node_modules/.cache). */
const root = (() => {
  let dir = Path.dirname(Url.fileURLToPath(import.meta.url))
  while (!Fs.existsSync(Path.join(dir, "scripts", "run-bundled.mjs"))) {
    const up = Path.dirname(dir)
    if (up === dir) return fail("cannot find scripts/run-bundled.mjs above this program")
    dir = up
  }
  return dir
})()

/** What the user asks in each turn, and the tool the "model" picks for it; a tool runs `weight` × --tool-ms. */
const script = [
  { ask: "What does the README say?", tool: "read_file", input: "README.md", weight: 1 },
  { ask: "Do the tests pass?", tool: "run_tests", input: "test/", weight: 5 },
  { ask: "Where are the TODOs?", tool: "grep", input: "TODO", weight: 1 },
  { ask: "Fix the first one.", tool: "edit_file", input: "src/index.ts", weight: 2 },
  { ask: "Write a summary.", tool: "write_file", input: "SUMMARY.md", weight: 1 }
] as const

interface Turn {
  readonly turn: number
  readonly ask: string
  readonly tool: string
  readonly input: string
  readonly weight: number
}

const turns: ReadonlyArray<Turn> = Array.from({ length: turnCount }, (_, i) => ({
  turn: i + 1,
  ...script[i % script.length]
}))

const llmKey = (turn: Turn) => `turn-${turn.turn}/llm`
const toolKey = (turn: Turn) => `turn-${turn.turn}/tool`
/** `turn-2/tool` as the timeline writes it: `turn 2 tool`. */
const label = (key: string) => key.replace(/^turn-(\d+)\//, "turn $1 ")

/** What the model answers: which tool to call, with what. Stored as the llm step's result. */
const Plan = Schema.Struct({ text: Schema.String, tool: Schema.String, input: Schema.String })
type Plan = typeof Plan.Type

const startedAt = performance.now()

/** One line of the timeline, on stdout (the agent is not an extension: its stdout is free). */
const say = (line: string) =>
  Effect.sync(() => {
    process.stdout.write(`${String(Math.round(performance.now() - startedAt)).padStart(6)} ms  ${line}\n`)
  })

/** `--crash-at`: the step is running (durably InFlight in the journal): die the hardest way, as a power cut would. */
const crashIfAsked = (key: string) =>
  Effect.sync(() => {
    if (crashAt === key) {
      process.stdout.write(`${" ".repeat(11)}--crash-at ${key}: SIGKILL\n`)
      process.kill(process.pid, "SIGKILL")
    }
  })

/** The "model": thinks for --llm-ms, then picks the turn's tool. */
const think = (turn: Turn, resumed: boolean): Effect.Effect<Plan> =>
  Effect.gen(function*() {
    yield* say(`turn ${turn.turn} llm: thinking about "${turn.ask}"${resumed ? " (resumed after a crash)" : ""}`)
    yield* crashIfAsked(llmKey(turn))
    yield* Effect.sleep(Duration.millis(llmMs))
    return { text: `I'll call ${turn.tool}.`, tool: turn.tool, input: turn.input }
  })

const turnOf = (entry: JournalEntry.Entry): Turn | undefined => {
  const n = (entry.payload as { readonly turn?: unknown } | null)?.turn
  return turns.find((turn) => turn.turn === n)
}

/** What the last start found and did: resumed llm steps, tool steps failed with InterruptedByCrash, orphans. */
const recover = Effect.gen(function*() {
  const report = yield* Recovery.run({
    decisions: {
      llm: (entry) => {
        const turn = turnOf(entry)
        return turn === undefined
          ? Recovery.fail("not a turn of this script")
          : Recovery.resume(() => think(turn, true))
      },
      tool: () => Recovery.fail("the tool was running when the agent stopped: its side effects are unknown")
    },
    reap: NodeReaper.reapProcess({ grace: "1 second" })
  })
  for (const entry of report.resumed) {
    yield* say(`recovery: ${entry.key} was interrupted: resumed it, attempt ${entry.attempts}, and it completed`)
  }
  for (const entry of report.failed) {
    yield* say(`recovery: ${entry.key} was interrupted: recorded as InterruptedByCrash, to be retried`)
  }
  for (const { entry, outcome } of report.reaped) {
    const info = entry.payload as ProcessRecord.ProcessInfo
    yield* say(`recovery: orphan worker pid ${info.pid} from a crashed run: ${outcome}`)
  }
  for (const { error, key } of report.errors) {
    yield* say(`recovery: ${key}: ${error instanceof Error ? error.message : String(error)}`)
  }
  if (report.resumed.length + report.failed.length + report.reaped.length + report.errors.length === 0) {
    yield* say("recovery: nothing was interrupted")
  }
  return report
})

/** `--reset`: first the orphans of a crashed run (forgetting the journal would forget them), then the files. */
const reset = Effect.gen(function*() {
  if (Fs.existsSync(journalFile)) {
    const journal = yield* SqliteJournal.makeFile({ filename: journalFile })
    const report = yield* ProcessRecord.reapOrphans(NodeReaper.reapProcess({ grace: "1 second" })).pipe(
      Effect.provideService(Journal.Journal, journal)
    )
    for (const { entry, outcome } of report.reaped) {
      yield* say(`reset: orphan worker pid ${(entry.payload as ProcessRecord.ProcessInfo).pid}: ${outcome}`)
    }
  }
}).pipe(
  Effect.scoped,
  Effect.andThen(Effect.sync(() => {
    Fs.rmSync(journalDir, { recursive: true, force: true })
    Fs.rmSync(effectsFile, { force: true })
  })),
  Effect.andThen(say(`reset: forgot everything in ${dataDir}`))
)

const run = Effect.gen(function*() {
  const journal = yield* Journal.Journal
  const report = yield* recover

  const { child, peer } = yield* NodeChildProcess.makePeer({
    command: ChildProcess.make(process.execPath, [
      Path.join(root, "scripts", "run-bundled.mjs"),
      Path.join(root, "examples", "agent-recovery", "worker.ts"),
      effectsFile
    ]),
    name: "worker",
    protocol: Agent,
    handlers: {
      "tool/started": ({ key, pid }) =>
        Effect.andThen(say(`${label(key)}: started in the worker (pid ${pid})`), crashIfAsked(key))
    },
    // Records the worker's pid now and its exit later: if this process dies, the next start kills the worker.
    journal,
    requestTimeout: "5 minutes",
    stderrLogLevel: args.verbose ? "Info" : "None",
    stop: { exitTimeout: "500 millis", terminateTimeout: "500 millis" }
  })
  yield* say(`worker started (pid ${child.pid}), recorded in the journal`)

  for (const turn of turns) {
    const llm = llmKey(turn)
    const known = yield* journal.get(llm)
    if (Option.isSome(known) && known.value.status === "Completed") {
      yield* say(`turn ${turn.turn} llm: answered before the restart (from the journal)`)
    }
    // A completed step is not run again: `track` returns its stored answer.
    const plan = yield* think(turn, false).pipe(
      JournaledOperation.run("llm", llm, { turn: turn.turn }, { result: Plan })
    )

    const key = toolKey(turn)
    const before = yield* journal.get(key)
    if (Option.isSome(before) && before.value.status === "Completed") {
      yield* say(`turn ${turn.turn} tool: done before the restart (from the journal)`)
      continue
    }
    let attempt = 1
    if (Option.isSome(before) && before.value.status === "Failed") {
      attempt = before.value.attempts + 1
      const why = Option.isSome(Recovery.interruptedByCrash(before.value)) ? "interrupted by a crash" : "failed"
      yield* say(
        `turn ${turn.turn} tool: ${plan.tool} was ${why} (attempt ${before.value.attempts}): retrying, attempt ${attempt}`
      )
    }
    yield* say(`turn ${turn.turn} tool: ${plan.tool}(${plan.input}) → worker`)
    const { output } = yield* peer.call(RunTool, {
      key,
      tool: plan.tool,
      input: plan.input,
      attempt,
      ms: toolMs * turn.weight
    }).pipe(JournaledOperation.run("tool", key, { turn: turn.turn, tool: plan.tool, input: plan.input }, {
      result: RunTool.result
    }))
    yield* say(`turn ${turn.turn} tool: ${output}`)
    yield* say(`turn ${turn.turn}: finished`)
  }

  const rows = yield* Effect.forEach(turns, (turn) =>
    Effect.gen(function*() {
      const step = (key: string) =>
        Effect.map(journal.get(key), (entry) =>
          Option.match(entry, {
            onNone: () => ({ status: "Missing", attempts: 0 }),
            onSome: ({ attempts, status }) => ({ status, attempts })
          }))
      return { turn: turn.turn, llm: yield* step(llmKey(turn)), tool: yield* step(toolKey(turn)) }
    }))
  const finished = rows.filter((row) => row.llm.status === "Completed" && row.tool.status === "Completed").length
  yield* say(`summary: ${finished}/${rows.length} turns finished`)
  for (const row of rows) {
    yield* say(
      `  turn ${row.turn}  llm ${row.llm.status} (attempts ${row.llm.attempts})  ` +
        `tool ${row.tool.status} (attempts ${row.tool.attempts})`
    )
  }
  if (args.json) {
    const summary = {
      finished,
      turns: rows,
      worker: child.pid,
      recovery: {
        resumed: report.resumed.map((entry) => entry.key),
        failed: report.failed.map((entry) => entry.key),
        reaped: report.reaped.map(({ entry, outcome }) => ({
          pid: (entry.payload as ProcessRecord.ProcessInfo).pid,
          outcome
        }))
      }
    }
    yield* Effect.sync(() => process.stdout.write(JSON.stringify(summary) + "\n"))
  }
}).pipe(Effect.scoped)

const main = Effect.gen(function*() {
  yield* say(`agent-recovery (pid ${process.pid}): ${turns.length} turns, journal ${journalFile}`)
  if (args.reset) yield* reset
  yield* run.pipe(Effect.provide(SqliteJournal.layer({ filename: journalFile })))
}).pipe(
  // Recovery (and --reset's reaping) claim the journal's owner first: another live agent holds it.
  Effect.catchTag("OwnerInUse", (error) =>
    Effect.sync(() => {
      process.stderr.write(
        `agent-recovery: another agent (pid ${error.pid ?? "?"}${
          error.host === undefined ? "" : ` on ${error.host}`
        }) is running on ${dataDir}; stop it first, or use another --data-dir\n`
      )
      process.exit(2)
    })),
  Effect.provideService(References.MinimumLogLevel, args.verbose ? "Debug" : "Warn")
)

NodeSignals.runMain(main)
