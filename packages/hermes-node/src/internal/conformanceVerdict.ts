/**
 * The conformance kit's vocabulary: a check's result, and the helpers the checks share to turn observations into
 * evidence (frames and times, quoted and cut). Statuses: `pass`, `fail`, `warn` (acceptable, with a remark: e.g. no
 * state file at all, fine for an extension that keeps none) and `n/a` (not applicable, or not reached because an
 * earlier step failed: that step's own check fails).
 */
import * as Option from "effect/Option"
import type { Received } from "./conformanceDriver.js"
import type { Exchange } from "./conformanceHost.js"
import type { Observations, Run } from "./conformanceRun.js"
import { initializeProblem } from "./conformanceRun.js"

export type Status = "pass" | "fail" | "warn" | "n/a"

export interface Verdict {
  readonly status: Status
  readonly evidence: ReadonlyArray<string>
  readonly ms?: number | undefined
}

export interface CheckResult extends Verdict {
  readonly id: string
  /** Where docs/protocol.md states the rule. */
  readonly rule: string
}

export interface Check {
  readonly id: string
  readonly rule: string
  readonly judge: (o: Observations) => Verdict
}

export const sessions = (o: Observations) => Object.values(o).filter((run): run is Run => run?.session !== undefined)

export const verdict = (status: Status, evidence: ReadonlyArray<string>, ms?: number): Verdict =>
  ms === undefined ? { status, evidence } : { status, evidence, ms: Math.round(ms) }

/**
 * The report's caps: whatever the extension sends, each check's evidence stays bounded, so the `--json` report and the
 * `--html` page stay under {@link maxReportBytes}. Past a cap, one last line says how many lines were left out and
 * their size ("… and 199,990 more (12.3 MB) left out"), and a cut line says how many bytes it lost.
 */
/** Evidence lines per check. */
export const maxEvidenceLines = 20
/** UTF-8 bytes of one evidence line. */
export const maxEvidenceLineBytes = 1024
/** UTF-8 bytes of one check's evidence, all lines together. */
export const maxEvidenceBytes = 8 * 1024
/** Command ids listed in one evidence line, and commands listed in the report's `extension.commands`. */
export const maxListedCommands = 20
/**
 * What the reports stay under (documented in docs/writing-an-extension.md): about 30 checks at `maxEvidenceBytes`,
 * the commands, the timeline (`maxMarks` marks, labels cut) and the page's own markup, with room to spare.
 */
export const maxReportBytes = 2 * 1024 * 1024

const bytesOf = (text: string): number => Buffer.byteLength(text, "utf8")

/** A byte count for a person: `812 bytes`, `4.2 kB`, `12.3 MB`. */
const sizeText = (bytes: number): string =>
  bytes < 1000 ? `${bytes} bytes` : bytes < 1e6 ? `${(bytes / 1e3).toFixed(1)} kB` : `${(bytes / 1e6).toFixed(1)} MB`

const leftOutText = (lines: number, bytes: number): string =>
  `… and ${lines.toLocaleString("en-US")} more (${sizeText(bytes)}) left out`

/** `text` cut to at most `max` UTF-8 bytes, saying how many were left out. */
const cutBytes = (text: string, max = maxEvidenceLineBytes): string => {
  const bytes = bytesOf(text)
  if (bytes <= max) return text
  const note = ` … (${sizeText(bytes - max + 64)} more left out)`
  // Cut on the bytes, then drop a character the cut split in two (decoded as U+FFFD).
  return Buffer.from(text, "utf8").subarray(0, max - 64).toString("utf8").replace(/\uFFFD$/, "") + note
}

/**
 * Evidence gathered one line at a time, kept up to the caps and counted past them: an extension that sends 200,000
 * answers to nothing costs the kit a count, not 200,000 lines.
 */
export const collector = () => {
  // One line and some bytes kept free for the line that counts what was left out: the whole stays within the caps.
  const maxLines = maxEvidenceLines - 1
  const maxBytes = maxEvidenceBytes - 128
  const lines: Array<string> = []
  let bytes = 0
  let leftOut = 0
  let leftOutBytes = 0
  return {
    add: (line: string): void => {
      const kept = cutBytes(line)
      if (lines.length < maxLines && bytes + bytesOf(kept) <= maxBytes) {
        lines.push(kept)
        bytes += bytesOf(kept)
      } else {
        leftOut++
        leftOutBytes += bytesOf(line)
      }
    },
    /** How many lines were added. */
    count: (): number => lines.length + leftOut,
    /** The lines kept, and one that counts those left out. */
    lines: (): Array<string> => leftOut === 0 ? [...lines] : [...lines, leftOutText(leftOut, leftOutBytes)]
  }
}

/** `evidence` within the caps: the kit applies it to every check's result, whatever the check kept itself. */
export const capEvidence = (evidence: ReadonlyArray<string>): ReadonlyArray<string> => {
  const fits = evidence.length <= maxEvidenceLines &&
    evidence.every((line) => bytesOf(line) <= maxEvidenceLineBytes) &&
    evidence.reduce((total, line) => total + bytesOf(line), 0) <= maxEvidenceBytes
  if (fits) return evidence
  const capped = collector()
  for (const line of evidence) capped.add(line)
  return capped.lines()
}

/** The first `max` of `items` (each cut to 40 characters) joined with ", ", and how many more there are. */
export const listed = (items: ReadonlyArray<string>, max = maxListedCommands): string =>
  items.slice(0, max).map((item) => cut(item, 40)).join(", ") +
  (items.length > max ? ` … and ${(items.length - max).toLocaleString("en-US")} more` : "")

/** `text` cut to `width` characters. Control characters are made visible where it is printed, not here. */
export const cut = (text: string, width = 240): string => text.length > width ? `${text.slice(0, width - 1)}…` : text

export const show = (frame: Received): string => cut(frame.text)

export const answerOf = (exchange: Exchange | undefined): Received | undefined =>
  exchange === undefined ? undefined : Option.getOrUndefined(exchange.answer)

export const messageOf = (frame: Received): Record<string, any> => frame.message as Record<string, any>

export const errorCodeOf = (frame: Received): unknown => messageOf(frame).error?.code

/** Milliseconds from a request to its answer. */
export const latency = (exchange: Exchange, frame: Received): number => Math.round(frame.at - exchange.sentAt)

/** The last lines of the process's stderr, for a failure's evidence. */
const stderrOf = (run: Run): Array<string> => {
  const lines = (run.session?.child.stderrTail() ?? "").split("\n").filter((line) => line.trim() !== "")
  return lines.slice(-3).map((line) => `stderr: ${cut(line, 200)}`)
}

/** Why no answer came: the exit if there was one, else the wait. */
export const noAnswer = (run: Run, exchange: Exchange, waitedMs: number): Array<string> => {
  const exit = run.session?.child.exit()
  return exit !== undefined && exit.at - exchange.sentAt < waitedMs
    ? [
      `${exchange.method}: no answer; the process exited ${Math.round(exit.at - exchange.sentAt)} ms after the ` +
      `request (${exitText(exit)})`,
      ...stderrOf(run)
    ]
    : [`${exchange.method}: no answer within ${waitedMs / 1000} s`, ...stderrOf(run)]
}

export const exitText = (exit: { readonly code: number | null; readonly signal: string | null }): string =>
  exit.signal !== null ? `signal ${exit.signal}` : `code ${exit.code}`

/**
 * Why `run` did not get past `initialize`, or undefined when it did: the checks that need a handshake are then not
 * applicable (the handshake's own check fails).
 */
export const notReached = (run: Run | undefined, what: string): Verdict | undefined => {
  if (run === undefined) return verdict("n/a", [`not reached: the ${what} run did not take place`])
  if (run.spawnError !== undefined) return verdict("n/a", [`not reached: the process could not be started`])
  const answer = answerOf(run.initialize)
  if (answer === undefined || initializeProblem(answer) !== undefined) {
    return verdict("n/a", [`not reached: the ${run.name} run's initialize got no valid answer`])
  }
  return undefined
}

/** JSON with its keys sorted, to compare two states. */
export const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v) =>
    typeof v === "object" && v !== null && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0))
      : v)

export const parseOr = (text: string | undefined): unknown => {
  if (text === undefined) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}
