/**
 * The JSON view of an HL7 message, the body of `Hl7.toJson` (`editor/getMessage` with `format: "json"`).
 *
 * @internal
 */
import type { Delimiters, JsonValue, Message } from "../Hl7.js"
import { unescape } from "./hl7Escape.js"

const jsonOfComponent = (text: string, d: Delimiters): JsonValue => {
  if (!text.includes(d.subcomponent)) return unescape(text, d)
  return numbered(text.split(d.subcomponent).map((s) => unescape(s, d)))
}

const numbered = (values: ReadonlyArray<JsonValue>): { readonly [index: string]: JsonValue } => {
  const out: Record<string, JsonValue> = {}
  values.forEach((value, i) => {
    if (value !== "") out[String(i + 1)] = value
  })
  return out
}

const jsonOfRepetition = (text: string, d: Delimiters): JsonValue =>
  text.includes(d.component)
    ? numbered(text.split(d.component).map((c) => jsonOfComponent(c, d)))
    : jsonOfComponent(text, d)

/** @internal */
export const toJson = (message: Message): { readonly [segment: string]: JsonValue } => {
  const d = message.delimiters
  const out: Record<string, JsonValue> = {}
  const counts = new Map<string, number>()
  for (const segment of message.segments) counts.set(segment.name, (counts.get(segment.name) ?? 0) + 1)
  for (const segment of message.segments) {
    const fields: Record<string, JsonValue> = {}
    segment.fields.forEach((field, n) => {
      if (n === 0 || field === "") return
      if (segment.name === "MSH" && n <= 2) {
        fields[String(n)] = field
        return
      }
      const repetitions = field.split(d.repetition).map((r) => jsonOfRepetition(r, d))
      fields[String(n)] = repetitions.length === 1 ? repetitions[0] : repetitions
    })
    if ((counts.get(segment.name) ?? 0) > 1) {
      const list = (out[segment.name] ?? []) as Array<JsonValue>
      list.push(fields)
      out[segment.name] = list
    } else {
      out[segment.name] = fields
    }
  }
  return out
}
