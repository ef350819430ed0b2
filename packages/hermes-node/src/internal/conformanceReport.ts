/**
 * The conformance kit's outputs for a person at a terminal and for a script: the scorecard, one line per check
 * (evidence below a check that did not pass), and the `--json` report. Everything the extension chose reaches the
 * terminal through `visible` and the JSON through `visibleJson`: no control character of it is ever sent as is.
 */
import { visible, visibleJson } from "../TerminalText.js"
import type { Mark } from "./conformanceHost.js"
import type { CheckResult, Status } from "./conformanceVerdict.js"
import { cut } from "./conformanceVerdict.js"

/** What the report says about the extension and the run as a whole. */
export interface Summary {
  readonly command: string
  readonly name: string | null
  readonly version: string | null
  /** The first `maxListedCommands` commands, their texts cut. */
  readonly commands: ReadonlyArray<{ readonly id: string; readonly title: string }>
  /** How many commands the extension announced. */
  readonly commandCount: number
  readonly checks: ReadonlyArray<CheckResult>
  readonly elapsedMs: number
  /** The main run's timeline, in ms since its spawn. */
  readonly timeline: ReadonlyArray<Mark>
}

export const count = (checks: ReadonlyArray<CheckResult>, status: Status): number =>
  checks.filter((check) => check.status === status).length

/** The run passes when no check failed: `warn` is acceptable, `n/a` did not apply. */
export const conformant = (checks: ReadonlyArray<CheckResult>): boolean => count(checks, "fail") === 0

const icons: Record<Status, string> = { pass: "✔", fail: "✘", warn: "!", "n/a": "-" }

/** The scorecard as terminal lines (colours only on a terminal that wants them). */
export const scorecard = (summary: Summary, color: boolean): string => {
  const paint = (status: Status, text: string) => {
    if (!color) return text
    const code = status === "pass" ? 32 : status === "fail" ? 31 : status === "warn" ? 33 : 90
    return `\u001b[${code}m${text}\u001b[0m`
  }
  const { checks } = summary
  const width = Math.max(...checks.map((check) => check.id.length))
  const lines = [
    `Hermes extension conformance: ${visible(summary.command)}`,
    summary.name === null
      ? "extension: no valid answer to initialize"
      : `extension ${visible(summary.name)} ${visible(summary.version ?? "")}, ${summary.commandCount} command(s)`,
    ""
  ]
  for (const check of checks) {
    const ms = check.ms === undefined ? "" : `${check.ms} ms`
    const [first = "", ...rest] = check.evidence
    lines.push(
      `  ${paint(check.status, `${icons[check.status]} ${check.status.padEnd(4)}`)}  ${check.id.padEnd(width)} ` +
        `${ms.padStart(8)}  ${visible(cut(first, 100))}`
    )
    if (check.status !== "pass") {
      for (const line of rest.slice(0, 6)) lines.push(`${" ".repeat(width + 20)}${visible(cut(line, 100))}`)
    }
  }
  const failed = count(checks, "fail")
  lines.push(
    "",
    `${count(checks, "pass")} passed, ${failed} failed, ${count(checks, "warn")} warned, ` +
      `${count(checks, "n/a")} not applicable in ${(summary.elapsedMs / 1000).toFixed(1)} s: ` +
      (failed === 0 ? "conformant" : "NOT conformant")
  )
  return lines.join("\n") + "\n"
}

/**
 * The `--json` report: `{ extension, checks: [{ id, status, evidence, ms?, rule }], passed, failed, warned, … }`.
 * `extension.commands` lists the first `maxListedCommands`, `extension.commandCount` counts them all.
 */
export const json = (summary: Summary): string =>
  visibleJson(
    {
      extension: {
        command: summary.command,
        name: summary.name,
        version: summary.version,
        commands: summary.commands,
        commandCount: summary.commandCount
      },
      checks: summary.checks.map(({ evidence, id, ms, rule, status }) =>
        ms === undefined ? { id, status, evidence, rule } : { id, status, evidence, ms, rule }
      ),
      passed: count(summary.checks, "pass"),
      failed: count(summary.checks, "fail"),
      warned: count(summary.checks, "warn"),
      notApplicable: count(summary.checks, "n/a"),
      elapsedMs: summary.elapsedMs,
      timeline: summary.timeline
    },
    2
  ) + "\n"
