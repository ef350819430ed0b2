/** @internal */

// Controls (C0, DEL, C1), line and paragraph separators and bidi overrides: what would let a value that came from
// outside (a key, a kind, an owner, a host name, a server's message) start a line that looks like another log entry,
// move the cursor or clear the terminal, or reorder what is shown (`@lifeline/node`'s stderr logger escapes its lines
// with the same set, through `UntrustedText.escape`).
const unsafe = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

// Characters a key, a kind or an owner may not contain: C0 and C1 controls and DEL (NUL among them, which PostgreSQL
// refuses in text and which would end the value in C).
const control = /[\u0000-\u001f\u007f-\u009f]/

// A high surrogate not followed by a low one, or a low one not preceded by a high one: not well-formed UTF-16, so
// not encodable as UTF-8; drivers write it as U+FFFD, and two such keys collide.
const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/** How many characters of an untrusted value a message or a log line shows. @internal */
export const maxShownLength = 120

/** `text` with every unsafe character written as a `\uXXXX` escape. @internal */
export const escape = (text: string): string =>
  text.replace(unsafe, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`)

/**
 * `value` as it may appear in a message or a log line: every unsafe character written as a `\uXXXX` escape, and cut
 * to `max` characters with a marker saying how long it was.
 * @internal
 */
export const shown = (value: string, max: number = maxShownLength): string => {
  const cut = value.length > max ? value.slice(0, max) : value
  const escaped = escape(cut)
    // a lone surrogate, including one left by the cut, is shown as an escape too
    .replace(new RegExp(loneSurrogate, "g"), (char) => `\\u${char.charCodeAt(0).toString(16)}`)
  return value.length > max ? `${escaped}…(${value.length} characters)` : escaped
}

/**
 * An instant read from storage (milliseconds since the epoch) as it may appear in a message: ISO 8601 when it is a date
 * `Date` can show, else the number as it is (a row written by another process, or a test, may hold any number, and
 * `toISOString` throws on one out of range).
 * @internal
 */
export const shownInstant = (millis: number): string => {
  const date = new Date(millis)
  return Number.isNaN(date.getTime()) ? `${millis} ms since the epoch (not a date)` : date.toISOString()
}

/**
 * Why `value` cannot be a key, a kind or an owner, or `undefined` when it can: 1 to `max` characters of well-formed
 * Unicode without control characters (with them, when `controls`: a key that names an entry already stored).
 * @internal
 */
export const textProblem = (value: unknown, max: number, controls = false): string | undefined => {
  if (typeof value !== "string") return "is not a string"
  if (value.length === 0 || value.length > max) return `has ${value.length} characters, not 1 to ${max}`
  if (loneSurrogate.test(value)) return "is not well-formed Unicode (a lone surrogate)"
  if (!controls && control.test(value)) return "contains a control character (NUL, a line break, an escape, ...)"
  return undefined
}

/**
 * Whether `text` takes at most `max` bytes in UTF-8 (counted without encoding it, and only as far as needed).
 * @internal
 */
export const fitsUtf8 = (text: string, max: number): boolean => {
  if (text.length > max) return false
  if (text.length * 3 <= max) return true
  let size = 0
  for (let index = 0; index < text.length && size <= max; index++) {
    const code = text.charCodeAt(index)
    if (code < 0x80) size += 1
    else if (code < 0x800) size += 2
    else if (code >= 0xd800 && code <= 0xdbff) {
      size += 4
      index++
    } else size += 3
  }
  return size <= max
}
