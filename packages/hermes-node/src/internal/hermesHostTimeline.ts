/**
 * The headless host's timeline (`hermesHost.ts`): how it prints what happens, one line per event with its time, every
 * piece of text through `visible` so that nothing the extension chose can drive the terminal, and nothing at all under
 * `--json`.
 *
 * @internal
 */
import type * as ExtensionHost from "@lifeline/hermes/ExtensionHost"
import type * as Process from "@lifeline/process/Process"
import { visible } from "../TerminalText.js"

/** The lines of `text`, empty ones left out. */
export const segments = (text: string) => text.split(/\r\n|\r|\n/).filter((line) => line !== "")

/** Untrusted text for the timeline: control characters shown (see `visible`), cut to `width` characters. */
export const quote = (text: string, width = 96) => {
  const shown = visible(text)
  return shown.length > width ? shown.slice(0, width - 1) + "…" : shown
}

/** The timeline's printers: nothing at all under `--json`, whose report is one JSON document. */
export const timeline = (json: boolean) => {
  /** Every line of the timeline goes through here, and through `visible`: nothing printed can drive the terminal. */
  const print = (text: string) => {
    if (!json) process.stdout.write(`${visible(text)}\n`) // stdout-ok: a command-line tool's own output
  }
  const line = (at: number, what: string, text: string) =>
    print(`${String(at).padStart(6)} ms  ${what.padEnd(10)} ${text}`)
  const more = (text: string) => print(`${" ".repeat(21)}${text}`)

  const printEdit = (previous: string, next: string) => {
    const old = segments(previous)
    const now = segments(next)
    for (let i = 0; i < Math.max(old.length, now.length); i++) {
      if (old[i] === now[i]) continue
      if (old[i] !== undefined) more(`- ${quote(old[i])}`)
      if (now[i] !== undefined) more(`+ ${quote(now[i])}`)
    }
  }
  return { line, more, print, printEdit }
}

export const describeExit = (status: Process.ExitStatus) =>
  status.signal !== null ? `killed by ${status.signal}` : `exit code ${status.exitCode}`

/** The events that an extension can make as many of as it likes: printed and kept up to the host's `detailLimit`. */
export const isDetail = (event: ExtensionHost.Event) =>
  event._tag === "RequestServed" || event._tag === "CommandSent" || event._tag === "WindowOpened" ||
  event._tag === "WindowShown" || event._tag === "WindowClosed"
