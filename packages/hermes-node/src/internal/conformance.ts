/**
 * `hermes-host --conformance`: the conformance kit. It runs one extension command line, in any language, through
 * every rule of docs/protocol.md (fresh processes, each with a data directory of its own, several at once), and
 * prints a scorecard: one check per rule with a stable id, `pass`, `fail`, `warn` or `n/a`, and the evidence. `--json`
 * prints the same as one JSON report, `--html FILE` writes a self-contained page with the scorecard and a timeline.
 * Exit code 0 when no check failed, 1 otherwise, 2 for bad arguments; 130/143/129 after SIGINT/SIGTERM/SIGHUP (every
 * process it started is killed first). Every process it starts is recorded in a journal (conformanceJournal.ts), so
 * that the next kit run kills what a kit killed with SIGKILL left running.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Util from "node:util"
import { splitCommandLine } from "../NodeSpawner.js"
import { visible } from "../TerminalText.js"
import { judge } from "./conformanceChecks.js"
import { killAll, useRecorder } from "./conformanceDriver.js"
import { html } from "./conformanceHtml.js"
import * as Journal from "./conformanceJournal.js"
import { defaultJournalFile } from "./conformanceJournal.js"
import type { Summary } from "./conformanceReport.js"
import { conformant, json, scorecard } from "./conformanceReport.js"
import { runAll } from "./conformanceScenarios.js"
import { answerOf, cut, maxListedCommands, messageOf } from "./conformanceVerdict.js"

const usage = `hermes-host --conformance: check an extension against docs/protocol.md

  hermes-host --conformance --extension "<command line>" [--json] [--html FILE] [--keep-data] [--journal FILE]

  --extension   the extension's command line (required; \`pnpm conformance\` in the Lifeline repository
                defaults it to the HL7 example extension)
  --json        print one JSON report instead of the scorecard:
                { extension, checks: [{ id, status, evidence, ms?, rule }], passed, failed, warned, ... }
  --html FILE   also write a self-contained HTML report: the scorecard and a timeline of the main run
  --keep-data   keep the runs' data directories (HERMES_DATA_DIR of each run) and print where they are
  --journal     where the kit records the processes it starts (default: $TMPDIR/hermes-conformance-<uid>/journal.db);
                at its start a kit run kills those of kit runs that were killed (SIGKILL) and left them running

  Each check is pass, fail, warn (acceptable, with a remark) or n/a. Exit code: 0 when no check failed, 1 otherwise,
  2 for bad arguments.`

const fail = (message: string): never => {
  process.stderr.write(
    `hermes-host: ${visible(message.replace(/\s*\n\s*/g, " "))} (hermes-host --help shows the usage)\n`
  )
  process.exit(2)
}

const isExecutableFile = (file: string) => {
  try {
    Fs.accessSync(file, Fs.constants.X_OK)
    return Fs.statSync(file).isFile()
  } catch {
    return false
  }
}

/** Runs the kit with the command line's arguments and exits the process: it never returns. */
export const main = async (
  argv: ReadonlyArray<string>,
  defaults: { readonly extension?: string | undefined }
): Promise<never> => {
  const args = (() => {
    try {
      return Util.parseArgs({
        args: [...argv],
        options: {
          conformance: { type: "boolean", default: false },
          extension: { type: "string" },
          json: { type: "boolean", default: false },
          html: { type: "string" },
          "keep-data": { type: "boolean", default: false },
          journal: { type: "string" },
          help: { type: "boolean", default: false }
        }
      }).values
    } catch (error) {
      return fail(error instanceof Error ? error.message : String(error))
    }
  })()
  if (args.help) {
    process.stdout.write(usage + "\n") // stdout-ok: a command-line tool's own output
    process.exit(0)
  }
  const command = args.extension ?? defaults.extension ?? fail("--extension is required")
  const words = splitCommandLine(command)
  if (words.length === 0) fail("--extension is empty")
  const onPath = (name: string) =>
    (process.env.PATH ?? "").split(Path.delimiter).some((dir) => dir !== "" && isExecutableFile(Path.join(dir, name)))
  if (words[0].includes("/") ? !isExecutableFile(words[0]) : !onPath(words[0])) {
    fail(`--extension: ${words[0]} is ${words[0].includes("/") ? "not an executable file" : "not on PATH"}`)
  }
  if (args.html !== undefined && !Fs.existsSync(Path.dirname(Path.resolve(args.html)))) {
    fail(`--html: the directory of ${args.html} does not exist`)
  }

  const tmp = Fs.mkdtempSync(Path.join(Os.tmpdir(), "hermes-conformance-"))
  const cleanUp = () => {
    if (args["keep-data"]) return
    try {
      Fs.rmSync(tmp, { recursive: true, force: true })
    } catch (error) {
      process.stderr.write(`hermes-host: could not remove ${tmp}: ${visible(String(error))}\n`)
    }
  }
  const started = performance.now()
  const journalFile = args.journal ?? defaultJournalFile()
  const fiber = Effect.runFork(
    Effect.gen(function*() {
      // Before the first spawn: the processes of dead kit runs are gone, this run's are recorded.
      const recording = yield* Journal.open(journalFile)
      if (recording.warning !== undefined) {
        process.stderr.write(`hermes-host: not recording the extensions: ${visible(recording.warning)}\n`)
      }
      for (const { outcome, pid } of recording.swept) {
        process.stderr.write(
          `hermes-host: pid ${pid}, left running by a conformance kit run that was killed: ${outcome}\n`
        )
      }
      useRecorder(recording.recorder)
      const runs = yield* runAll({ argv: words, tmp })
      return { runs, checks: judge(runs) }
    }).pipe(Effect.scoped)
  )

  // The first signal stops the runs (their Scopes kill every process group); a second one kills at once.
  const codes = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 } as const
  let signalled: number | undefined
  for (const [signal, code] of Object.entries(codes)) {
    process.on(signal, () => {
      if (signalled !== undefined) {
        killAll()
        cleanUp()
        process.exit(code)
      }
      signalled = code
      Effect.runFork(Fiber.interrupt(fiber))
    })
  }
  const exit = await Effect.runPromise(Fiber.await(fiber))
  if (signalled !== undefined || Exit.isFailure(exit)) {
    killAll()
    cleanUp()
    if (signalled === undefined) process.stderr.write(`hermes-host: the conformance kit failed: ${String(exit)}\n`)
    process.exit(signalled ?? 1)
  }
  const { checks, runs } = exit.value
  const ready = runs.main?.extensionName !== undefined ? answerOf(runs.main.initialize) : undefined
  const result = ready === undefined ? undefined : messageOf(ready).result
  // What the extension chose, within the report's caps: a few commands listed (the rest counted), every text cut.
  const commands: ReadonlyArray<{ readonly id: string; readonly title: string }> = result?.commands ?? []
  const summary: Summary = {
    command,
    name: result?.name ?? null,
    version: result?.version === undefined ? null : cut(String(result.version), 200),
    commands: commands.slice(0, maxListedCommands).map((c) => ({ id: cut(c.id, 200), title: cut(c.title, 200) })),
    commandCount: commands.length,
    checks,
    elapsedMs: Math.round(performance.now() - started),
    timeline: runs.main?.session?.marks ?? []
  }
  if (args.html !== undefined) {
    try {
      Fs.writeFileSync(args.html, html(summary))
    } catch (error) {
      process.stderr.write(`hermes-host: cannot write ${visible(args.html)}: ${visible(String(error))}\n`)
    }
  }
  // Waited for: on a pipe the write is asynchronous, and `process.exit` would cut the report short.
  await new Promise<void>((resolve) =>
    process.stdout.write( // stdout-ok: a command-line tool's own output
      args.json
        ? json(summary)
        : scorecard(summary, process.stdout.isTTY === true && process.env.NO_COLOR === undefined),
      () => resolve()
    )
  )
  if (args["keep-data"]) process.stderr.write(`hermes-host: the runs' data directories are in ${tmp}\n`)
  cleanUp()
  process.exit(conformant(checks) ? 0 : 1)
}
