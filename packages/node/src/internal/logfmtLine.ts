/**
 * Reads one logfmt line, as Effect's `Logger.formatLogFmt` writes it (and so every Lifeline program on its stderr):
 * `timestamp=… level=INFO fiber=#1 message="…" key=value`. A host logs such a line of its child as an entry of its own
 * (the child's message, its fields as annotations) instead of the whole line nested, quoted, inside its own.
 *
 * Hand-written: the format is Effect's own, and no logfmt package reads Effect's JSON-quoted values.
 *
 * @internal
 */
import type * as LogLevel from "effect/LogLevel"

/** @internal */
export interface Entry {
  readonly level: LogLevel.Severity
  readonly message: string
  /** Every other field, at most `maxFields`, in the order of the line. */
  readonly fields: ReadonlyArray<readonly [string, string]>
}

const levels: Record<string, LogLevel.Severity> = {
  TRACE: "Trace",
  DEBUG: "Debug",
  INFO: "Info",
  WARN: "Warn",
  WARNING: "Warn",
  ERROR: "Error",
  FATAL: "Fatal"
}

const maxFields = 32

const plainKey = /^[A-Za-z_][\w.-]{0,63}$/

/** A quoted value from `at` (its opening quote) to its closing quote, as JSON reads it; `undefined` if unclosed. */
const quoted = (line: string, at: number): { readonly value: string; readonly end: number } | undefined => {
  let i = at + 1
  while (i < line.length) {
    const c = line.charCodeAt(i)
    if (c === 92) i += 2 // a backslash escapes the next character
    else if (c === 34) {
      try {
        return { value: JSON.parse(line.slice(at, i + 1)) as string, end: i + 1 }
      } catch {
        return undefined
      }
    } else i++
  }
  return undefined
}

/**
 * The entry of a logfmt line, or `undefined` when the line is not one (it lacks `level=` or `message=`, or a field is
 * malformed): such a line is logged as it is.
 *
 * @internal
 */
export const parse = (line: string): Entry | undefined => {
  let level: LogLevel.Severity | undefined
  const messages: Array<string> = []
  const fields: Array<readonly [string, string]> = []
  let i = 0
  while (i < line.length) {
    while (line.charCodeAt(i) === 32) i++
    if (i >= line.length) break
    const equals = line.indexOf("=", i)
    const space = line.indexOf(" ", i)
    if (equals === -1 || (space !== -1 && space < equals) || equals === i) return undefined
    const key = line.slice(i, equals)
    // Keys become annotation labels of the host's log: only plain names, else the line is logged as it is.
    if (!plainKey.test(key)) return undefined
    let value: string
    if (line.charCodeAt(equals + 1) === 34) {
      const read = quoted(line, equals + 1)
      if (read === undefined) return undefined
      value = read.value
      i = read.end
    } else {
      const end = line.indexOf(" ", equals + 1)
      value = line.slice(equals + 1, end === -1 ? line.length : end)
      i = end === -1 ? line.length : end
    }
    if (key === "level") level = levels[value]
    else if (key === "message") messages.push(value)
    else if (fields.length < maxFields) fields.push([key, value])
  }
  if (level === undefined || messages.length === 0) return undefined
  return { level, message: messages.join(" "), fields }
}
