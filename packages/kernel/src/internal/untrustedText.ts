/**
 * The body of `UntrustedText`; each export is documented there.
 *
 * @internal
 */

// Controls (C0, DEL, C1), line and paragraph separators and bidi overrides: what would let an outside value start a
// line that looks like another log entry, move the cursor, or reorder what is shown.
const unsafe = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

// Not in a name: C0 and C1 controls and DEL (NUL among them, which PostgreSQL refuses in text).
const control = /[\u0000-\u001f\u007f-\u009f]/

// A lone surrogate is not encodable as UTF-8: drivers write it as U+FFFD, and two such names collide.
const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/** @internal */
export const maxShownLength = 120

/** @internal */
export const escape = (text: string): string =>
  text.replace(unsafe, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`)

/** @internal */
export const shown = (value: string, max: number = maxShownLength): string => {
  const cut = value.length > max ? value.slice(0, max) : value
  const escaped = escape(cut)
    // a lone surrogate, including one left by the cut, is shown as an escape too
    .replace(new RegExp(loneSurrogate, "g"), (char) => `\\u${char.charCodeAt(0).toString(16)}`)
  return value.length > max ? `${escaped}…(${value.length} characters)` : escaped
}

/** @internal */
export const shownInstant = (millis: number): string => {
  const date = new Date(millis)
  return Number.isNaN(date.getTime()) ? `${millis} ms since the epoch (not a date)` : date.toISOString()
}

/** @internal */
export const textProblem = (value: unknown, max: number, controls = false): string | undefined => {
  if (typeof value !== "string") return "is not a string"
  if (value.length === 0 || value.length > max) return `has ${value.length} characters, not 1 to ${max}`
  if (loneSurrogate.test(value)) return "is not well-formed Unicode (a lone surrogate)"
  if (!controls && control.test(value)) return "contains a control character (NUL, a line break, an escape, ...)"
  return undefined
}

/** @internal */
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
