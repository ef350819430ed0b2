/**
 * HL7 v2 messages, the content Hermes edits: parse and serialise the pipe-and-hat encoding, read and write one value
 * by its path in HL7 notation (`PID-5.1`, `PID-3[2].1`, `OBX[2]-5`), and the JSON view of `editor/getMessage`. Pure:
 * every function returns a value or a `Result`. The escape sequences' codec is in `internal/hl7Escape.ts`, the JSON
 * view in `internal/hl7Json.ts`.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as escaping from "./internal/hl7Escape.js"
import * as json from "./internal/hl7Json.js"

/**
 * Why an HL7 operation was refused. It reaches the wire as the `data` of a -32602 answer, so it is a Schema error.
 *
 * - `NotHl7`: the text is not an HL7 v2 message (it must start with an `MSH` segment).
 * - `InvalidPath`: the path is not in HL7 notation.
 * - `NoSuchSegment`: the path names a segment (or an occurrence of it) the message does not have.
 * - `ReadOnly`: MSH-1 and MSH-2 hold the delimiters themselves and cannot be patched.
 * - `BreaksMessage`: the edited message would no longer read back as one HL7 v2 message (see `formatChecked`).
 *
 * @since 0.1.0
 * @category errors
 */
export class Hl7Error extends Schema.TaggedError<Hl7Error>("@lifeline/hermes/Hl7Error")("Hl7Error", {
  reason: Schema.Literals(["NotHl7", "InvalidPath", "NoSuchSegment", "ReadOnly", "BreaksMessage"]),
  detail: Schema.String
}) {
  override get message(): string {
    return `${this.reason}: ${this.detail}`
  }
}

/**
 * `patch` refused a batch because it would make the message larger than `maxBytes`: `actual` is the size it would have
 * had after the patch that crossed the bound, as `patch` counts it (see `PatchOptions.maxBytes`), `limit` the bound.
 * Nothing is applied. It reaches the wire, with the patch's index, as the `data` of a -32602 answer.
 *
 * @since 0.1.0
 * @category errors
 */
export class PatchTooLarge
  extends Schema.TaggedError<PatchTooLarge>("@lifeline/hermes/PatchTooLarge")("PatchTooLarge", {
    reason: Schema.Literal("MessageTooLarge"),
    limit: Schema.Int,
    actual: Schema.Int
  })
{
  /** The refusal in words, so that it reads like an `Hl7Error` where only `reason` and `detail` are shown. */
  get detail(): string {
    return `the patches would make the message ${this.actual} bytes of UTF-8, more than the limit of ${this.limit}`
  }
  override get message(): string {
    return `${this.reason}: ${this.detail}`
  }
}

/**
 * The five delimiters a message declares in MSH-1 and MSH-2.
 *
 * @since 0.1.0
 * @category models
 */
export interface Delimiters {
  readonly field: string
  readonly component: string
  readonly repetition: string
  readonly escape: string
  readonly subcomponent: string
}

/**
 * One segment: its name and its fields, encoded. `fields[n]` is field `n` (`fields[0]` is the name); for MSH,
 * `fields[1]` is the field delimiter and `fields[2]` the encoding characters, so numbering matches HL7's.
 *
 * @since 0.1.0
 * @category models
 */
export interface Segment {
  readonly name: string
  readonly fields: ReadonlyArray<string>
}

/**
 * A parsed message. Immutable: `set` returns a new one.
 *
 * @since 0.1.0
 * @category models
 */
export interface Message {
  readonly delimiters: Delimiters
  readonly segments: ReadonlyArray<Segment>
}

/**
 * A position in a message: segment name and occurrence (1-based), field, repetition (1-based) and, optionally,
 * component and subcomponent.
 *
 * @since 0.1.0
 * @category models
 */
export interface Path {
  readonly segment: string
  readonly occurrence: number
  readonly field: number
  /** `undefined` when the path names none: the whole field, or its first repetition below field level. */
  readonly repetition: number | undefined
  readonly component: number | undefined
  readonly subcomponent: number | undefined
}

const segmentName = /^[A-Z][A-Z0-9]{2}$/
const pathPattern = /^([A-Z][A-Z0-9]{2})(?:\[(\d+)\])?-(\d+)(?:\[(\d+)\])?(?:\.(\d+)(?:\.(\d+))?)?$/

const notHl7 = (detail: string) => new Hl7Error({ reason: "NotHl7", detail })

/**
 * Parses one message. Segments may end in `\r` (the standard), `\r\n` or `\n`; empty lines are skipped. The delimiters
 * are read from the MSH segment, which must come first; a second MSH segment (a batch of messages) is refused.
 *
 * @example
 * ```ts
 * import { Result } from "effect"
 * import { Hl7 } from "@lifeline/hermes"
 *
 * const message = Hl7.parse("MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|42|P|2.5\rPID|1||123||DOE^JOHN")
 * Result.map(message, (m) => Hl7.get(m, "PID-5.2")) // Result.succeed("JOHN")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const parse = (text: string): Result.Result<Message, Hl7Error> => {
  const lines = text.split(/\r\n|\r|\n/).filter((line) => line.length > 0)
  if (lines.length === 0) return Result.fail(notHl7("the message is empty"))
  const header = lines[0]
  if (!header.startsWith("MSH") || header.length < 8) {
    return Result.fail(notHl7("an HL7 v2 message starts with an MSH segment (MSH|^~\\&|...)"))
  }
  const field = header[3]
  const end = header.indexOf(field, 4)
  const encoding = end === -1 ? header.slice(4) : header.slice(4, end)
  if (encoding.length < 4) return Result.fail(notHl7(`MSH-2 must hold four encoding characters, got "${encoding}"`))
  const delimiters: Delimiters = {
    field,
    component: encoding[0],
    repetition: encoding[1],
    escape: encoding[2],
    subcomponent: encoding[3]
  }
  const all = [field, ...encoding.slice(0, 4)]
  if (new Set(all).size !== all.length || /[A-Za-z0-9\s]/.test(all.join(""))) {
    return Result.fail(notHl7(`the delimiters must be five distinct punctuation characters, got "${all.join("")}"`))
  }
  const segments: Array<Segment> = []
  for (const line of lines) {
    const parts = line.split(field)
    const name = parts[0]
    if (!segmentName.test(name)) {
      return Result.fail(notHl7(`"${line.slice(0, 20)}" does not start with a segment name`))
    }
    if (name === "MSH") {
      if (segments.length > 0) return Result.fail(notHl7("a second MSH segment"))
      segments.push({ name, fields: [name, field, ...parts.slice(1)] })
    } else {
      segments.push({ name, fields: parts })
    }
  }
  return Result.succeed({ delimiters, segments })
}

/**
 * Serialises a message: segments joined by `\r`, trailing empty fields kept as they were.
 *
 * @example
 * ```ts
 * import { Result } from "effect"
 * import { Hl7 } from "@lifeline/hermes"
 *
 * const text = "MSH|^~\\&|LAB\rPID|1"
 * Result.map(Hl7.parse(text), Hl7.format) // Result.succeed(text)
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const format = (message: Message): string =>
  message.segments.map((segment) =>
    segment.name === "MSH"
      ? segment.name + message.delimiters.field + segment.fields.slice(2).join(message.delimiters.field)
      : segment.fields.join(message.delimiters.field)
  ).join("\r")

const breaks = (detail: string) => Result.fail(new Hl7Error({ reason: "BreaksMessage", detail }))

/**
 * Serialises a message like `format`, then checks that the text is still one message: it parses (MSH first, no second
 * MSH) back to the same delimiters, segments and fields. `set` escapes every value, so no edit made with it fails this
 * check; `MessageStore` runs it before it keeps an edit all the same, so that a value can never add structure even if
 * an escape is ever missed (a CR or LF in a field would otherwise add a segment, or a second MSH).
 *
 * @example
 * ```ts
 * import { Hl7 } from "@lifeline/hermes"
 *
 * const delimiters = { field: "|", component: "^", repetition: "~", escape: "\\", subcomponent: "&" }
 * Hl7.formatChecked({
 *   delimiters,
 *   segments: [{ name: "MSH", fields: ["MSH", "|", "^~\\&"] }, { name: "PID", fields: ["PID", "1\rZZ1"] }]
 * }) // Result.fail(Hl7Error { reason: "BreaksMessage", ... })
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const formatChecked = (message: Message): Result.Result<string, Hl7Error> => {
  const text = format(message)
  const reparsed = parse(text)
  if (Result.isFailure(reparsed)) return breaks(reparsed.failure.detail)
  const d = message.delimiters
  const r = reparsed.success.delimiters
  if (
    r.field !== d.field || r.component !== d.component || r.repetition !== d.repetition || r.escape !== d.escape ||
    r.subcomponent !== d.subcomponent
  ) {
    return breaks("the text would declare other delimiters")
  }
  const expected = message.segments
  const actual = reparsed.success.segments
  if (actual.length !== expected.length) {
    return breaks(`the text would hold ${actual.length} segments, not ${expected.length}`)
  }
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i].fields
    const e = expected[i].fields
    if (actual[i].name !== expected[i].name || a.length !== e.length || a.some((field, n) => field !== e[n])) {
      return breaks(`segment ${i + 1} (${expected[i].name}) would not read back as written`)
    }
  }
  return Result.succeed(text)
}

/**
 * Reads a path in HL7 notation: `SEG[occurrence]-FIELD[repetition][.COMPONENT[.SUBCOMPONENT]]`, with the
 * occurrence and the repetition in square brackets and 1-based: `PID-5`, `PID-5.1`, `PID-3[2].1`, `OBX[2]-5.1.2`.
 *
 * @example
 * ```ts
 * import { Hl7 } from "@lifeline/hermes"
 *
 * Hl7.parsePath("PID-3[2].1") // Result.succeed({ segment: "PID", occurrence: 1, field: 3, repetition: 2, component: 1, subcomponent: undefined })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const parsePath = (path: string): Result.Result<Path, Hl7Error> => {
  const match = pathPattern.exec(path.trim())
  const invalid = (detail: string) => Result.fail(new Hl7Error({ reason: "InvalidPath", detail }))
  if (match === null) {
    return invalid(`"${path}" is not an HL7 path such as PID-5, PID-5.1, PID-3[2].1 or OBX[2]-5`)
  }
  const number = (text: string | undefined) => text === undefined ? undefined : Number(text)
  const result: Path = {
    segment: match[1],
    occurrence: number(match[2]) ?? 1,
    field: number(match[3])!,
    repetition: number(match[4]),
    component: number(match[5]),
    subcomponent: number(match[6])
  }
  for (const [what, value] of Object.entries(result)) {
    if (typeof value === "number" && (value < 1 || value > 9999)) {
      return invalid(`"${path}": ${what} must be between 1 and 9999`)
    }
  }
  if (
    result.segment === "MSH" && result.field <= 2 && (result.repetition !== undefined || result.component !== undefined)
  ) {
    return invalid(`"${path}": MSH-1 and MSH-2 have no repetitions or components`)
  }
  return Result.succeed(result)
}

const locate = (message: Message, path: Path): number => {
  let seen = 0
  for (let i = 0; i < message.segments.length; i++) {
    if (message.segments[i].name === path.segment && ++seen === path.occurrence) return i
  }
  return -1
}

const noSuchSegment = (path: Path, message: Message) => {
  const count = message.segments.filter((s) => s.name === path.segment).length
  return new Hl7Error({
    reason: "NoSuchSegment",
    detail: count === 0
      ? `the message has no ${path.segment} segment`
      : `the message has ${count} ${path.segment} segment(s), not ${path.occurrence}`
  })
}

/**
 * Decodes HL7 escape sequences: `\F\`, `\S\`, `\T\`, `\R\`, `\E\` into the delimiters they stand for, and hex escapes
 * `\Xhh…\` of ASCII characters (`\X0D\` is CR, `\X0D0A\` CR LF) into those characters. Any other sequence is kept as
 * written: `\.br\` and the like are formatting, and what a hex escape of a byte from 0x80 up stands for depends on the
 * character set of MSH-18.
 *
 * @since 0.1.0
 * @category combinators
 */
export const unescape: (text: string, delimiters: Delimiters) => string = escaping.unescape

/**
 * Encodes plain `text` so that it is one value and nothing more: every delimiter becomes its escape sequence (`\F\`,
 * `\S\`, `\T\`, `\R\`, `\E\`) and every ASCII control character a hex escape (`\X0D\` for CR, `\X0A\` for LF), so a
 * value can never add structure to a message: no field, component, repetition or subcomponent, and no segment.
 * `unescape` gives `text` back exactly.
 *
 * @example
 * ```ts
 * import { Hl7 } from "@lifeline/hermes"
 *
 * const delimiters = { field: "|", component: "^", repetition: "~", escape: "\\", subcomponent: "&" }
 * Hl7.escape("x\rZZ1|y", delimiters) // "x\\X0D\\ZZ1\\F\\y"
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const escape: (text: string, delimiters: Delimiters) => string = escaping.escape

const hasStructure = (text: string, delimiters: Delimiters) =>
  text.includes(delimiters.component) || text.includes(delimiters.repetition) || text.includes(delimiters.subcomponent)

/**
 * The value at a path, or `undefined` when the message has nothing there. A value with no structure below it (a leaf)
 * has its escape sequences decoded; a field or component that has components is returned encoded.
 *
 * @example
 * ```ts
 * import { Result } from "effect"
 * import { Hl7 } from "@lifeline/hermes"
 *
 * const message = Result.getOrThrow(Hl7.parse("MSH|^~\\&|LAB\rPID|1||123~456||DOE^JOHN"))
 * Hl7.get(message, "PID-3[2]") // "456"
 * Hl7.get(message, "PID-5") // "DOE^JOHN"
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const get = (message: Message, path: string | Path): string | undefined => {
  const parsed = typeof path === "string" ? parsePath(path) : Result.succeed(path)
  if (Result.isFailure(parsed)) return undefined
  const p = parsed.success
  const index = locate(message, p)
  if (index === -1) return undefined
  const d = message.delimiters
  const field = message.segments[index].fields[p.field]
  if (field === undefined) return undefined
  if (p.segment === "MSH" && p.field <= 2) return field
  if (p.repetition === undefined && p.component === undefined) {
    return hasStructure(field, d) ? field : unescape(field, d)
  }
  const repetition = field.split(d.repetition)[(p.repetition ?? 1) - 1]
  if (repetition === undefined) return undefined
  if (p.component === undefined) return hasStructure(repetition, d) ? repetition : unescape(repetition, d)
  const component = repetition.split(d.component)[p.component - 1]
  if (component === undefined) return undefined
  if (p.subcomponent === undefined) return hasStructure(component, d) ? component : unescape(component, d)
  const subcomponent = component.split(d.subcomponent)[p.subcomponent - 1]
  return subcomponent === undefined ? undefined : unescape(subcomponent, d)
}

const replaceAt = (parts: ReadonlyArray<string>, index: number, value: string): Array<string> => {
  const out = parts.slice()
  while (out.length <= index) out.push("")
  out[index] = value
  return out
}

/**
 * Writes plain `value` at a path, escaped by `escape` (delimiters, CR, LF and the other control characters), so it
 * cannot add structure and `get` reads back exactly `value`; `null` clears it. Missing fields, repetitions and
 * components are added empty; a missing segment is an error, as is MSH-1 or MSH-2. Each call splits and joins the
 * field it writes and copies the list of segments: for many patches, `patch` does that once for all of them.
 *
 * @example
 * ```ts
 * import { Result } from "effect"
 * import { Hl7 } from "@lifeline/hermes"
 *
 * const message = Result.getOrThrow(Hl7.parse("MSH|^~\\&|LAB\rPID|1||123||DOE^JOHN"))
 * const patched = Result.map(Hl7.set(message, "PID-5.1", "ANONYMOUS"), Hl7.format)
 * // Result.succeed("MSH|^~\\&|LAB\rPID|1||123||ANONYMOUS^JOHN")
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const set = (message: Message, path: string | Path, value: string | null): Result.Result<Message, Hl7Error> =>
  Result.flatMap(typeof path === "string" ? parsePath(path) : Result.succeed(path), (p) => {
    const index = locate(message, p)
    if (index === -1) return Result.fail(noSuchSegment(p, message))
    if (p.segment === "MSH" && p.field <= 2) {
      return Result.fail(new Hl7Error({ reason: "ReadOnly", detail: `MSH-${p.field} holds the delimiters` }))
    }
    const d = message.delimiters
    // Clearing a value leaves no trailing delimiters behind it (`DOE^JOHN^` becomes `DOE^JOHN`).
    const join = (parts: Array<string>, delimiter: string) => (value === null ? trimEnd(parts) : parts).join(delimiter)
    const text = value === null ? "" : escape(value, d)
    const segment = message.segments[index]
    let field = text
    if (p.repetition !== undefined || p.component !== undefined) {
      const at = (p.repetition ?? 1) - 1
      const repetitions = (segment.fields[p.field] ?? "").split(d.repetition)
      let repetition = text
      if (p.component !== undefined) {
        const components = (repetitions[at] ?? "").split(d.component)
        let component = text
        if (p.subcomponent !== undefined) {
          const subcomponents = (components[p.component - 1] ?? "").split(d.subcomponent)
          component = join(replaceAt(subcomponents, p.subcomponent - 1, text), d.subcomponent)
        }
        repetition = join(replaceAt(components, p.component - 1, component), d.component)
      }
      field = join(replaceAt(repetitions, at, repetition), d.repetition)
    }
    const fields = replaceAt(segment.fields, p.field, field)
    const segments = message.segments.slice()
    segments[index] = {
      name: segment.name,
      fields: value === null ? trimEnd(fields, segment.name === "MSH" ? 3 : 1) : fields
    }
    return Result.succeed({ delimiters: d, segments })
  })

const trimEnd = (parts: Array<string>, keep = 1): Array<string> => {
  let end = parts.length
  while (end > keep && parts[end - 1] === "") end--
  return end === parts.length ? parts : parts.slice(0, end)
}

/**
 * One edit of a batch for `patch`: plain `value` written at `path`, or `null` to clear it, as `set` takes them.
 *
 * @since 0.1.0
 * @category models
 */
export interface Patch {
  /** In HL7 notation, or a `Path` as `parsePath` gives one (every number from 1 to 9999). */
  readonly path: string | Path
  readonly value: string | null
}

/**
 * Why `patch` refused a batch: the error, and `index`, the patch it is about. For `BreaksMessage`, `index` is the
 * first patch after which the message would no longer have read back as one message; for `PatchTooLarge`, the first
 * after which it would have been larger than `maxBytes`.
 *
 * @since 0.1.0
 * @category models
 */
export interface PatchFailure {
  readonly index: number
  readonly error: Hl7Error | PatchTooLarge
}

/**
 * @since 0.1.0
 * @category models
 */
export interface PatchOptions {
  /**
   * How a value is written into the message. Default `escape`, with which a value cannot add structure. Another
   * encoding can (`(value) => value` writes encoded HL7 such as `DOE^JOHN` as it is); the result is checked all the
   * same, like `formatChecked`. A value that adds structure at or above its own level (a `~` written in a component)
   * costs its whole field again, as every patch does with `set`.
   */
  readonly encode?: ((value: string, delimiters: Delimiters) => string) | undefined
  /**
   * The bound on the size of the message, in bytes of UTF-8: the batch is refused with `PatchTooLarge` at the first
   * patch after which the message would be larger, before the next one is applied, so a batch of patches that each pad
   * thousands of empty values stops as soon as it crosses the bound. Default: no bound (`Infinity`).
   *
   * The size is counted as the patches are applied, by UTF-16 unit: 1 byte below U+0080, 2 below U+0800, else 3. It is
   * the exact UTF-8 size for every character of the Basic Multilingual Plane and never less than it; a character
   * outside it (an emoji: a surrogate pair, 4 bytes of UTF-8) counts 6, so a message holding `n` of them may be
   * refused `2n` bytes early. A message that is larger than the bound already (`MessageStore` does not bound the
   * message it starts with) may still be patched, as long as no patch makes it larger than it was.
   */
  readonly maxBytes?: number | undefined
}

/**
 * A value being edited: its encoded text, or its parts (split on the delimiter of its level) once a patch has
 * addressed something inside it. Only what a patch addresses is split, and only once.
 */
type Draft = string | Array<Draft>

const isEmptyDraft = (draft: Draft): boolean =>
  typeof draft === "string" ? draft === "" : draft.length === 1 && isEmptyDraft(draft[0])

/** `splitters[depth]` splits a value held at `depth`: a field (0) on repetitions, a repetition on components, … */
const formatDraft = (draft: Draft, splitters: ReadonlyArray<string>, depth: number): string =>
  typeof draft === "string"
    ? draft
    : draft.map((part) => formatDraft(part, splitters, depth + 1)).join(splitters[depth])

/**
 * The size `patch` counts for `maxBytes`: UTF-8 bytes by UTF-16 unit, 1 below U+0080, 2 below U+0800, else 3 (a
 * surrogate half too). It is exact UTF-8 but for surrogate pairs (6 rather than 4), and unlike UTF-8 it is additive:
 * the size of joined text is the sum of the sizes of its pieces, so `patch` can keep it up to date from what each
 * patch adds and takes away, without looking at the message again.
 */
const unitBytes = (text: string): number => {
  let bytes = text.length
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code >= 0x80) bytes += code < 0x800 ? 1 : 2
  }
  return bytes
}

/** `unitBytes` of a draft whose parts are joined by the delimiter that `joins[level]` counts. */
const draftBytes = (draft: Draft, joins: ReadonlyArray<number>, level: number): number => {
  if (typeof draft === "string") return unitBytes(draft)
  let bytes = (draft.length - 1) * joins[level]
  for (const part of draft) bytes += draftBytes(part, joins, level + 1)
  return bytes
}

/** `unitBytes` of the message as `format` writes it. */
const messageBytes = (message: Message, joins: ReadonlyArray<number>): number => {
  let bytes = Math.max(0, message.segments.length - 1) // the CR between segments
  for (const segment of message.segments) {
    const fields = segment.fields
    // MSH is written as its name, the field delimiter, then fields 2 on joined (`format`).
    const from = segment.name === "MSH" ? 2 : 0
    bytes += segment.name === "MSH" ? unitBytes(segment.name) + joins[0] : 0
    bytes += Math.max(0, fields.length - from - 1) * joins[0]
    for (let n = from; n < fields.length; n++) bytes += unitBytes(fields[n])
  }
  return bytes
}

/**
 * Writes `text` at `at` (field, then 0-based repetition, component and subcomponent, as far as the path goes) in the
 * parts of one value, padding with empty values like `set`; when clearing, trims trailing empty values on the way
 * back, also like `set`, and pads nothing that it would trim again. Answers how much `unitBytes` of the message
 * changed when `joins` is given (`unitBytes` of the delimiter that joins parts at each depth, the field delimiter
 * first), else 0: each empty value padded or trimmed adds or takes away one delimiter, and the text written replaces
 * what was there.
 */
const writeDraft = (
  parts: Array<Draft>,
  at: ReadonlyArray<number>,
  depth: number,
  text: string,
  clear: boolean,
  keep: number,
  splitters: ReadonlyArray<string>,
  joins: ReadonlyArray<number> | undefined
): number => {
  const i = at[depth]
  let grown = 0
  if (!clear || i < parts.length) {
    if (joins !== undefined && parts.length <= i) grown += (i + 1 - parts.length) * joins[depth]
    while (parts.length <= i) parts.push("")
    if (depth === at.length - 1) {
      if (joins !== undefined) grown += unitBytes(text) - draftBytes(parts[i], joins, depth + 1)
      parts[i] = text
    } else {
      const part = parts[i]
      const inner = typeof part === "string" ? (parts[i] = part.split(splitters[depth])) : part
      grown += writeDraft(inner, at, depth + 1, text, clear, 1, splitters, joins)
    }
  }
  if (clear) {
    while (parts.length > keep && isEmptyDraft(parts[parts.length - 1])) {
      parts.pop()
      if (joins !== undefined) grown -= joins[depth]
    }
  }
  return grown
}

const breaksLine = (text: string, delimiters: Delimiters) =>
  text.includes("\r") || text.includes("\n") || text.includes(delimiters.field)

/**
 * Applies every patch in order, all or none, and serialises the result once, checked like `formatChecked`: the same
 * text, and the same refusal, as a fold of `set` over `patches` followed by `formatChecked`. It costs time in
 * proportion to the message plus the patches: the message is edited in place as a draft (each field, repetition and
 * component is split only when a patch addresses something inside it, and only once), then formatted and checked
 * once. A fold of `set` splits, joins and copies the addressed field and the segment list at every step.
 *
 * A refusal names the first patch it is about: the first whose path is refused (`InvalidPath`, `NoSuchSegment`,
 * `ReadOnly`), else, if the result would not read back as one message (`BreaksMessage`, the check's own detail), the
 * first patch after which it would no longer have: the first whose encoded value holds a CR, an LF or the field
 * delimiter, which is what re-checking after every patch finds for a message that passes `formatChecked` (one that
 * `parse` returned, for one), since nothing else a patch writes can break one; 0 if none does (the message was
 * broken before). With `escape`, the default encoding, no value breaks a message.
 *
 * Under `maxBytes`, the size is counted as the patches are applied, and the batch is refused with `PatchTooLarge` at
 * the first patch after which the message would be larger than the bound, before the next patch is applied and before
 * the check: the refusal a fold of `set` would give if it measured the message after every patch (as `maxBytes`
 * says). A path refused further on is then not reached.
 *
 * @example
 * ```ts
 * import { Result } from "effect"
 * import { Hl7 } from "@lifeline/hermes"
 *
 * const message = Result.getOrThrow(Hl7.parse("MSH|^~\\&|LAB\rPID|1||123||DOE^JOHN"))
 * Hl7.patch(message, [{ path: "PID-5.1", value: "ANONYMOUS" }, { path: "PID-3", value: null }])
 * // Result.succeed("MSH|^~\\&|LAB\rPID|1||||ANONYMOUS^JOHN")
 * Hl7.patch(message, [{ path: "PID-5.1", value: "X" }, { path: "ZZZ-1", value: "Y" }])
 * // Result.fail({ index: 1, error: Hl7Error { reason: "NoSuchSegment", ... } })
 * Hl7.patch(message, [{ path: "PID-5.1", value: "X" }, { path: "PID-2[9999]", value: "Y" }], { maxBytes: 1024 })
 * // Result.fail({ index: 1, error: PatchTooLarge { reason: "MessageTooLarge", limit: 1024, actual: 10030 } })
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const patch = (
  message: Message,
  patches: ReadonlyArray<Patch>,
  options?: PatchOptions | undefined
): Result.Result<string, PatchFailure> => {
  const d = message.delimiters
  const encode = options?.encode ?? escape
  const splitters = [d.repetition, d.component, d.subcomponent]
  const refuse = (index: number, error: Hl7Error | PatchTooLarge) => Result.fail<PatchFailure>({ index, error })
  // Sizes are counted only under a bound. `NaN` sets none, as `Infinity` does.
  const limit = Math.floor(options?.maxBytes ?? Infinity)
  const joins = limit < Infinity ? [d.field, ...splitters].map(unitBytes) : undefined
  let bytes = joins === undefined ? 0 : messageBytes(message, joins)
  const bound = Math.max(limit, bytes)
  // Segments by name, so a patch finds its own without a scan; built on the first patch.
  let byName: Map<string, Array<number>> | undefined
  // The field lists of the segments patched so far, copied on the first patch of each.
  const edited = new Map<number, Array<Draft>>()
  let firstBreaking = -1
  for (let i = 0; i < patches.length; i++) {
    const { path, value } = patches[i]
    const parsed = typeof path === "string" ? parsePath(path) : Result.succeed(path)
    if (Result.isFailure(parsed)) return refuse(i, parsed.failure)
    const p = parsed.success
    if (byName === undefined) {
      byName = new Map()
      for (let s = 0; s < message.segments.length; s++) {
        const name = message.segments[s].name
        const same = byName.get(name)
        if (same === undefined) byName.set(name, [s])
        else same.push(s)
      }
    }
    const index = byName.get(p.segment)?.[p.occurrence - 1]
    if (index === undefined) return refuse(i, noSuchSegment(p, message))
    if (p.segment === "MSH" && p.field <= 2) {
      return refuse(i, new Hl7Error({ reason: "ReadOnly", detail: `MSH-${p.field} holds the delimiters` }))
    }
    let fields = edited.get(index)
    if (fields === undefined) {
      fields = message.segments[index].fields.slice()
      edited.set(index, fields)
    }
    const text = value === null ? "" : encode(value, d)
    if (firstBreaking === -1 && breaksLine(text, d)) firstBreaking = i
    const at = [p.field]
    if (p.repetition !== undefined || p.component !== undefined) at.push((p.repetition ?? 1) - 1)
    if (p.component !== undefined) at.push(p.component - 1)
    if (p.subcomponent !== undefined) at.push(p.subcomponent - 1)
    bytes += writeDraft(fields, at, 0, text, value === null, p.segment === "MSH" ? 3 : 1, splitters, joins)
    // Checked after each patch, before the next: one patch pads at most 4 × 9,999 empty values.
    if (bytes > bound) return refuse(i, new PatchTooLarge({ reason: "MessageTooLarge", limit, actual: bytes }))
    // `set` splits the whole field again at every step. A value holding a delimiter of its own level or one above
    // (never one from `escape`) therefore adds structure a later patch must see: the field goes back to its text.
    if (at.length > 1 && splitters.some((splitter, depth) => depth < at.length - 1 && text.includes(splitter))) {
      fields[p.field] = formatDraft(fields[p.field], splitters, 0)
    }
  }
  const segments = message.segments.slice()
  for (const [index, fields] of edited) {
    segments[index] = { name: segments[index].name, fields: fields.map((field) => formatDraft(field, splitters, 0)) }
  }
  const checked = formatChecked({ delimiters: d, segments })
  return Result.isFailure(checked)
    ? refuse(Math.max(firstBreaking, 0), checked.failure)
    : Result.succeed(checked.success)
}

/**
 * A JSON value of the JSON view: a leaf string, an object of numbered components, or an array of repetitions.
 *
 * @since 0.1.0
 * @category models
 */
export type JsonValue = string | { readonly [index: string]: JsonValue } | ReadonlyArray<JsonValue>

/**
 * The JSON view of a message (`editor/getMessage` with `format: "json"`): an object keyed by segment name, each
 * segment an object keyed by field number (`"1"`, `"2"`, …), a segment that occurs more than once an array of them.
 * A field with components is an object keyed by component number, a repeated field an array; empty values are left
 * out and escape sequences decoded as by `unescape`, so a value written by `set` reads back exactly, CR and LF
 * included. MSH-1 and MSH-2 hold the delimiters, as in the example of `editor/getMessage` in the protocol.
 *
 * @example
 * ```ts
 * import { Result } from "effect"
 * import { Hl7 } from "@lifeline/hermes"
 *
 * const message = Result.getOrThrow(Hl7.parse("MSH|^~\\&|LAB\rPID|1||||DOE^JOHN"))
 * Hl7.toJson(message)
 * // { MSH: { "1": "|", "2": "^~\\&", "3": "LAB" }, PID: { "1": "1", "5": { "1": "DOE", "2": "JOHN" } } }
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const toJson: (message: Message) => { readonly [segment: string]: JsonValue } = json.toJson
