/**
 * HL7 escape sequences, the body of `Hl7.escape` and `Hl7.unescape`: plain text to one value that adds no structure to
 * a message, and back.
 *
 * @internal
 */
import type { Delimiters } from "../Hl7.js"

/** @internal */
export const unescape = (text: string, delimiters: Delimiters): string => {
  const e = delimiters.escape
  if (!text.includes(e)) return text
  const table: Record<string, string> = {
    F: delimiters.field,
    S: delimiters.component,
    T: delimiters.subcomponent,
    R: delimiters.repetition,
    E: delimiters.escape
  }
  let out = ""
  for (let i = 0; i < text.length; i++) {
    if (text[i] === e && i + 2 < text.length) {
      const named = text[i + 2] === e ? table[text[i + 1]] : undefined
      if (named !== undefined) {
        out += named
        i += 2
        continue
      }
      if (text[i + 1] === "X") {
        const close = text.indexOf(e, i + 2)
        const hex = close === -1 ? undefined : fromHex(text.slice(i + 2, close))
        if (hex !== undefined) {
          out += hex
          i = close
          continue
        }
      }
    }
    out += text[i]
  }
  return out
}

const hexDigits = /^(?:[0-9A-Fa-f]{2})+$/

const fromHex = (hex: string): string | undefined => {
  if (!hexDigits.test(hex)) return undefined
  let out = ""
  for (let i = 0; i < hex.length; i += 2) {
    const code = parseInt(hex.slice(i, i + 2), 16)
    if (code > 0x7f) return undefined
    out += String.fromCharCode(code)
  }
  return out
}

/** @internal */
export const escape = (text: string, delimiters: Delimiters): string => {
  const table = new Map([
    [delimiters.escape, "E"],
    [delimiters.field, "F"],
    [delimiters.component, "S"],
    [delimiters.subcomponent, "T"],
    [delimiters.repetition, "R"]
  ])
  let out = ""
  // By UTF-16 unit, as `parse` reads delimiters and splits on them: `parse` takes a surrogate half as a delimiter, and
  // stepping by code point would let a character made with it (an emoji) through whole, and split a field in two.
  for (let i = 0; i < text.length; i++) {
    const char = text[i]
    const code = table.get(char)
    if (code !== undefined) {
      out += delimiters.escape + code + delimiters.escape
      continue
    }
    // CR ends a segment, and lenient parsers (`parse` here, and most receivers) end one at LF too. VT and FS frame MLLP
    // blocks, NUL cuts C strings short, and HL7's text types allow printable characters only; so every ASCII control,
    // U+0000 to U+001F and U+007F, is written as a hex escape. `\Xhh\` rather than `\.br\`: it gives back exactly the
    // character written (`\.br\` is a line break in formatted text and cannot tell CR from LF), and a byte below 0x80
    // means the same character in every character set MSH-18 may name. Other characters, including U+0085 and U+2028,
    // are not segment ends in HL7 and are kept as they are.
    const unit = char.charCodeAt(0)
    out += unit < 0x20 || unit === 0x7f
      ? delimiters.escape + "X" + (unit < 0x10 ? "0" : "") + unit.toString(16).toUpperCase() + delimiters.escape
      : char
  }
  return out
}
