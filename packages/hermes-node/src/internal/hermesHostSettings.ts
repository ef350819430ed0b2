/**
 * hermes-host's command line: its usage, its arguments parsed and checked into `Settings`. A mistake is one line on
 * stderr and exit code 2 (docs/hosting.md, "Exit codes"): no stack trace.
 */
import * as HermesProtocol from "@lifeline/hermes/HermesProtocol"
import * as DurationText from "@lifeline/kernel/DurationText"
import type * as Duration from "effect/Duration"
import * as Result from "effect/Result"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Util from "node:util"
import * as NodeSpawner from "../NodeSpawner.js"
import { visible } from "../TerminalText.js"

export const usage = `hermes-host: run a Hermes extension without Hermes' UI

  hermes-host --extension "<command line>" [--message FILE] [--run COMMAND_ID]... [--settle DURATION]
              [--max-duration DURATION] [--shutdown-policy fail-fast|drain] [--drain-timeout DURATION]
              [--reason closing|disabled|reload|error] [--data-dir DIR] [--json] [--verbose]

  --extension        the extension's command line (required; \`pnpm demo\` in the Lifeline repository defaults
                     it to the HL7 example extension)
  --message          the HL7 message to edit (default: a sample ADT^A01 message; \`pnpm demo\`: the HL7
                     example's sample.hl7)
  --run              a command to execute, repeatable (default: every command the extension announces)
  --settle           shut down once the extension has sent no request for this long (default 300ms)
  --max-duration     shut down at the latest this long after the start, settled or not (default 60s): an extension
                     that keeps sending requests ends the run as did-not-settle
  --shutdown-policy  what the extension does with running commands at shutdown (default drain), passed to it as
                     LIFELINE_SHUTDOWN_POLICY; --drain-timeout as LIFELINE_DRAIN_TIMEOUT (default 3s)
  --reason           the shutdown reason (default closing)
  --data-dir         HERMES_DATA_DIR for the extension (default: $HERMES_DATA_DIR, else ~/.hermes); the host
                     records the extensions it spawns in DIR/lifeline/journal.db and, at start, kills those a
                     crashed host left behind
  --json             print one JSON report instead of the timeline
  --verbose          also log the host's and the extension's own log lines on stderr

  A DURATION is ${DurationText.forms}.
  hermes-host --conformance --extension "<command line>" [--json] [--html FILE] checks an extension against
  docs/protocol.md (hermes-host --conformance --help).
  SIGTERM, SIGINT or SIGHUP: the extension is shut down (reason closing) and the report printed; a second forces.

  Exit code: 0 when the outcome is ok and no requested command was refused, 1 otherwise (after a signal too),
  2 for bad arguments, 143/130/129 after SIGTERM/SIGINT/SIGHUP when the outcome is ok, 2 after a second signal
  (forced), 3 after a third (docs/hosting.md, "Exit codes").`

/** One line on stderr and exit code 2: a mistake on the command line is no crash, so no stack trace. */
export const fail = (message: string): never => {
  const oneLine = message.replace(/\s*\n\s*/g, " ")
  process.stderr.write(`hermes-host: ${visible(oneLine)} (hermes-host --help shows the usage)\n`)
  process.exit(2)
}

export const messageOf = (error: unknown): string =>
  typeof error === "object" && error !== null && typeof (error as { message?: unknown }).message === "string"
    ? (error as { message: string }).message
    : String(error)

/**
 * An error and the chain of its causes, each message once: a journal that cannot be opened says why ("file is not a
 * database", "database is locked"), which the outer error's own message leaves out.
 */
export const describeError = (error: unknown): string => {
  const parts: Array<string> = []
  let current: unknown = error
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    const message = messageOf(current).trim()
    if (message !== "" && !parts.some((part) => part.includes(message))) parts.push(message)
    current = typeof current === "object" ? (current as { cause?: unknown }).cause : undefined
  }
  return parts.join(": ")
}

/**
 * What the command line leaves out, filled in by whoever runs the host: the repository's demo names its HL7 example
 * extension and sample message; the published `hermes-host` bin names none, so `--extension` is required there.
 */
export interface Defaults {
  /** The extension's command line when `--extension` is not given. */
  readonly extension?: string | undefined
  /** The HL7 message file when `--message` is not given (else `sampleMessage`). */
  readonly message?: string | undefined
}

/** The message edited when neither `--message` nor a default names a file: a small ADT^A01 (an admission). */
export const sampleMessage = [
  "MSH|^~\\&|LAB|GENERAL HOSPITAL|HERMES|HERMES|20240315083000||ADT^A01^ADT_A01|MSG00042|P|2.5",
  "EVN|A01|20240315083000",
  "PID|1||4711^^^GH^MR||DOE^JOHN^QUINCY||19800229|M|||12 MAIN ST^^SPRINGFIELD^IL^62701",
  "PV1|1|I|WARD3^301^A|||||||MED",
  "OBX|1|NM|GLU^Glucose||5.4|mmol/L|3.9-6.1|N|||F"
].join("\r") + "\r"

/** The run hermes-host was asked for, checked. */
export interface Settings {
  readonly commandLine: ReadonlyArray<string>
  /** The message file, or undefined for `sampleMessage`. */
  readonly messageFile: string | undefined
  readonly before: string
  readonly run: ReadonlyArray<string> | undefined
  readonly settle: Duration.Duration
  readonly maxDuration: Duration.Duration
  readonly policy: "drain" | "fail-fast"
  readonly drainTimeout: Duration.Duration
  readonly reason: HermesProtocol.ShutdownReason
  readonly dataDir: string
  readonly journalFile: string
  readonly json: boolean
  readonly verbose: boolean
}

const isExecutableFile = (file: string) => {
  try {
    Fs.accessSync(file, Fs.constants.X_OK)
    return Fs.statSync(file).isFile()
  } catch {
    return false
  }
}

/** The command line's arguments as `Settings`; `--help` prints the usage and exits 0, a mistake exits 2. */
export const parse = (argv: ReadonlyArray<string>, defaults: Defaults): Settings => {
  const args = (() => {
    try {
      return Util.parseArgs({
        args: [...argv],
        options: {
          extension: { type: "string" },
          message: { type: "string" },
          run: { type: "string", multiple: true },
          settle: { type: "string", default: "300ms" },
          "max-duration": { type: "string", default: "60s" },
          "shutdown-policy": { type: "string", default: "drain" },
          "drain-timeout": { type: "string", default: "3s" },
          reason: { type: "string", default: "closing" },
          "data-dir": { type: "string" },
          json: { type: "boolean", default: false },
          verbose: { type: "boolean", default: false },
          help: { type: "boolean", default: false }
        }
      }).values
    } catch (error) {
      // parseArgs' own message: "Unknown option '--x'...", "Option '--settle <value>' argument missing".
      return fail(messageOf(error))
    }
  })()

  if (args.help) {
    process.stdout.write(usage + "\n") // stdout-ok: a command-line tool's own output
    process.exit(0)
  }

  const duration = (name: string, text: string): Duration.Duration =>
    Result.getOrElse(DurationText.parse(text), (message) => fail(`--${name}: ${message}`))

  const reason = HermesProtocol.ShutdownReason.literals.find((r) => r === args.reason) ??
    fail(`--reason must be one of ${HermesProtocol.ShutdownReason.literals.join(", ")}`)
  const policy = args["shutdown-policy"] === "drain" || args["shutdown-policy"] === "fail-fast"
    ? args["shutdown-policy"]
    : fail("--shutdown-policy must be fail-fast or drain")
  const settle = duration("settle", args.settle)
  const maxDuration = duration("max-duration", args["max-duration"])
  const drainTimeout = duration("drain-timeout", args["drain-timeout"])
  const extension = args.extension ?? defaults.extension ?? fail("--extension is required")
  const commandLine = NodeSpawner.splitCommandLine(extension)
  if (commandLine.length === 0) fail("--extension is empty")

  // Checked here, so that a typo is a bad argument (exit code 2), not an extension that failed to start.
  if (commandLine[0].includes("/")) {
    if (!isExecutableFile(commandLine[0])) fail(`--extension: ${commandLine[0]} is not an executable file`)
  } else if (
    !(process.env.PATH ?? "").split(Path.delimiter).some((dir) =>
      dir !== "" && isExecutableFile(Path.join(dir, commandLine[0]))
    )
  ) {
    fail(`--extension: ${commandLine[0]} is not on PATH`)
  }

  const messageFile = args.message ?? defaults.message
  const before = messageFile === undefined ? sampleMessage : (() => {
    try {
      return Fs.readFileSync(messageFile, "utf8")
    } catch (error) {
      return fail(`--message: cannot read ${messageFile}: ${messageOf(error)}`)
    }
  })()
  const dataDir = args["data-dir"] ?? process.env.HERMES_DATA_DIR ?? Path.join(Os.homedir(), ".hermes")
  return {
    commandLine,
    messageFile,
    before,
    run: args.run,
    settle,
    maxDuration,
    policy,
    drainTimeout,
    reason,
    dataDir,
    journalFile: Path.join(dataDir, "lifeline", "journal.db"),
    json: args.json,
    verbose: args.verbose
  }
}
