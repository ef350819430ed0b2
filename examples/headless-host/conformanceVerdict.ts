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
export const stderrOf = (run: Run): Array<string> => {
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
