import { assert, describe, it } from "@effect/vitest"
import { Hl7 } from "@lifeline/hermes"
import { Result } from "effect"
import * as fc from "fast-check"

const sample = [
  "MSH|^~\\&|LAB|HOSPITAL|HERMES|HERMES|20240101120000||ADT^A01|MSG00042|P|2.5",
  "PID|1||123456^^^HOSP^MR~987654^^^NATIONAL^NI||DOE^JOHN^Q||19800101|M|||1 MAIN ST^^SPRINGFIELD",
  "OBX|1|ST|GLU||5.4|mmol/L",
  "OBX|2|ST|HGB||13.2|g/dL"
].join("\r")

const parsed = () => Result.getOrThrow(Hl7.parse(sample))

type Encode = (value: string, delimiters: Hl7.Delimiters) => string

/**
 * `Hl7.set` with the encoding as a parameter, the reference a batch is held to when it is given another encoding than
 * `escape`. Built on `Hl7.set`, not on a copy of its body: the value is written as a placeholder that `escape` keeps as
 * it is and that the message does not hold yet, and the placeholder, where it landed, is then replaced by the encoded
 * value. Clearing (`null`) is `Hl7.set`'s own; so are the refusals.
 */
const referenceSet = (message: Hl7.Message, path: string, value: string | null, encode: Encode) => {
  if (value === null) return Hl7.set(message, path, null)
  const text = Hl7.format(message)
  let placeholder = "\u27e6value\u27e7"
  while (text.includes(placeholder)) placeholder += "\u27e7"
  if (Hl7.escape(placeholder, message.delimiters) !== placeholder) throw new Error("escape changed the placeholder")
  const encoded = encode(value, message.delimiters)
  return Result.map(Hl7.set(message, path, placeholder), (written): Hl7.Message => ({
    delimiters: written.delimiters,
    segments: written.segments.map((segment) => ({
      name: segment.name,
      fields: segment.fields.map((field) => field.split(placeholder).join(encoded))
    }))
  }))
}

type Outcome =
  | string
  | {
    readonly index: number
    readonly reason: string
    readonly detail: string
    readonly limit?: number
    readonly actual?: number
  }

/**
 * What a batch gave before `Hl7.patch`: `set` after `set`, then `formatChecked` once; a refusal by the check names the
 * first patch after which the message was broken, found by applying and checking again after each one.
 */
const referencePatch = (
  message: Hl7.Message,
  patches: ReadonlyArray<{ readonly path: string; readonly value: string | null }>,
  set: (message: Hl7.Message, path: string, value: string | null) => Result.Result<Hl7.Message, Hl7.Hl7Error>
): Outcome => {
  let current = message
  for (let i = 0; i < patches.length; i++) {
    const next = set(current, patches[i].path, patches[i].value)
    if (Result.isFailure(next)) return { index: i, reason: next.failure.reason, detail: next.failure.detail }
    current = next.success
  }
  const checked = Hl7.formatChecked(current)
  if (Result.isSuccess(checked)) return checked.success
  let index = patches.length - 1
  let at = message
  for (let i = 0; i < patches.length; i++) {
    const next = set(at, patches[i].path, patches[i].value)
    if (Result.isFailure(next) || Result.isFailure(Hl7.formatChecked(next.success))) {
      index = i
      break
    }
    at = next.success
  }
  return { index, reason: checked.failure.reason, detail: checked.failure.detail }
}

const outcomeOf = (result: Result.Result<string, Hl7.PatchFailure>): Outcome => {
  if (Result.isSuccess(result)) return result.success
  const { error, index } = result.failure
  return error._tag === "PatchTooLarge"
    ? { index, reason: error.reason, detail: error.detail, limit: error.limit, actual: error.actual }
    : { index, reason: error.reason, detail: error.detail }
}

const utf8 = (text: string) => new TextEncoder().encode(text).length

/** Characters outside the Basic Multilingual Plane: surrogate pairs, 4 bytes of UTF-8 each. */
const astral = (text: string) => text.match(/[\ud800-\udbff][\udc00-\udfff]/g)?.length ?? 0

/** The size `maxBytes` bounds, as its documentation says: UTF-8, but 6 bytes for a character outside the BMP. */
const counted = (text: string) => utf8(text) + 2 * astral(text)

/**
 * `referencePatch` measuring the message after every patch, as `maxBytes` says: the batch is refused at the first
 * patch after which the message is larger than `maxBytes` (or than it was, if it was larger already).
 */
const referencePatchWithin = (
  message: Hl7.Message,
  patches: ReadonlyArray<{ readonly path: string; readonly value: string | null }>,
  set: (message: Hl7.Message, path: string, value: string | null) => Result.Result<Hl7.Message, Hl7.Hl7Error>,
  maxBytes: number,
  measure: (text: string) => number = counted
): Outcome => {
  const bound = Math.max(maxBytes, measure(Hl7.format(message)))
  let current = message
  for (let i = 0; i < patches.length; i++) {
    const next = set(current, patches[i].path, patches[i].value)
    if (Result.isFailure(next)) return { index: i, reason: next.failure.reason, detail: next.failure.detail }
    current = next.success
    const actual = measure(Hl7.format(current))
    if (actual > bound) {
      const error = new Hl7.PatchTooLarge({ reason: "MessageTooLarge", limit: maxBytes, actual })
      return { index: i, reason: error.reason, detail: error.detail, limit: maxBytes, actual }
    }
  }
  return referencePatch(message, patches, set)
}

describe("Hl7", () => {
  it("parses and formats byte for byte", () => {
    assert.strictEqual(Hl7.format(parsed()), sample)
    const m = parsed()
    assert.deepStrictEqual(m.delimiters, {
      field: "|",
      component: "^",
      repetition: "~",
      escape: "\\",
      subcomponent: "&"
    })
    assert.deepStrictEqual(m.segments.map((s) => s.name), ["MSH", "PID", "OBX", "OBX"])
  })

  it("accepts \\n and \\r\\n segment endings and serialises with \\r", () => {
    const m = Result.getOrThrow(Hl7.parse(sample.replaceAll("\r", "\r\n") + "\r\n"))
    assert.strictEqual(Hl7.format(m), sample)
  })

  it("refuses text that is not HL7, with the reason", () => {
    for (const text of ["", "hello", "{\"MSH\":{}}", "MSH|^~", "MSH|^^\\&|x", "PID|1\rMSH|^~\\&|"]) {
      const result = Hl7.parse(text)
      assert.isTrue(Result.isFailure(result), text)
      if (Result.isFailure(result)) assert.strictEqual(result.failure.reason, "NotHl7")
    }
  })

  it("reads values by path", () => {
    const m = parsed()
    assert.strictEqual(Hl7.get(m, "MSH-1"), "|")
    assert.strictEqual(Hl7.get(m, "MSH-2"), "^~\\&")
    assert.strictEqual(Hl7.get(m, "MSH-9.1"), "ADT")
    assert.strictEqual(Hl7.get(m, "MSH-10"), "MSG00042")
    assert.strictEqual(Hl7.get(m, "PID-5"), "DOE^JOHN^Q")
    assert.strictEqual(Hl7.get(m, "PID-5.2"), "JOHN")
    assert.strictEqual(Hl7.get(m, "PID-3[2].1"), "987654")
    assert.strictEqual(Hl7.get(m, "PID-3.1"), "123456")
    assert.strictEqual(Hl7.get(m, "OBX[2]-5"), "13.2")
    assert.strictEqual(Hl7.get(m, "OBX[3]-5"), undefined)
    assert.strictEqual(Hl7.get(m, "PID-40"), undefined)
    assert.strictEqual(Hl7.get(m, "not a path"), undefined)
  })

  it("writes values, padding what is missing, and escapes delimiters", () => {
    const m = parsed()
    const set = (path: string, value: string | null, on = m) => Result.getOrThrow(Hl7.set(on, path, value))
    assert.strictEqual(Hl7.get(set("PID-5.1", "ANONYMOUS"), "PID-5"), "ANONYMOUS^JOHN^Q")
    assert.strictEqual(Hl7.get(set("PID-3[2].1", "X"), "PID-3"), "123456^^^HOSP^MR~X^^^NATIONAL^NI")
    assert.strictEqual(Hl7.get(set("PID-7", null), "PID-7"), "")
    assert.strictEqual(Hl7.get(set("OBX[2]-5", "99"), "OBX[2]-5"), "99")
    assert.strictEqual(Hl7.get(set("OBX[2]-5", "99"), "OBX-5"), "5.4")
    const padded = set("PID-30.2.3", "Z")
    assert.strictEqual(Hl7.get(padded, "PID-30"), "^&&Z")
    assert.strictEqual(Hl7.get(padded, "PID-30.2.3"), "Z")
    const tricky = set("PID-5.1", "A|B^C~D&E\\F")
    assert.strictEqual(Hl7.get(tricky, "PID-5.1"), "A|B^C~D&E\\F")
    assert.include(Hl7.format(tricky), "A\\F\\B\\S\\C\\R\\D\\T\\E\\E\\F^JOHN")
    assert.strictEqual(Hl7.format(Result.getOrThrow(Hl7.parse(Hl7.format(tricky)))), Hl7.format(tricky))
  })

  it("clearing a value leaves no trailing delimiters", () => {
    const m = parsed()
    const cleared = Result.getOrThrow(Hl7.set(m, "PID-5.3", null))
    assert.strictEqual(Hl7.get(cleared, "PID-5"), "DOE^JOHN")
    const lastField = Result.getOrThrow(Hl7.set(m, "PID-11", null))
    assert.isTrue(
      Hl7.format(lastField).includes("PID|1||123456^^^HOSP^MR~987654^^^NATIONAL^NI||DOE^JOHN^Q||19800101|M\r")
    )
    const repetition = Result.getOrThrow(Hl7.set(m, "PID-3[2]", null))
    assert.strictEqual(Hl7.get(repetition, "PID-3"), "123456^^^HOSP^MR")
  })

  it("refuses bad paths, missing segments and the delimiter fields", () => {
    const m = parsed()
    const reason = (path: string) => Result.flip(Hl7.set(m, path, "x")).pipe(Result.map((e) => e.reason), Result.merge)
    assert.strictEqual(reason("PID5"), "InvalidPath")
    assert.strictEqual(reason("pid-5"), "InvalidPath")
    assert.strictEqual(reason("PID-0"), "InvalidPath")
    assert.strictEqual(reason("PID-5.1.2.3"), "InvalidPath")
    assert.strictEqual(reason("ZZZ-1"), "NoSuchSegment")
    assert.strictEqual(reason("OBX[3]-1"), "NoSuchSegment")
    assert.strictEqual(reason("MSH-1"), "ReadOnly")
    assert.strictEqual(reason("MSH-2"), "ReadOnly")
  })

  it("has a JSON view keyed by segment and field number", () => {
    const json = Hl7.toJson(parsed()) as any
    assert.deepStrictEqual(json.MSH["1"], "|")
    assert.deepStrictEqual(json.MSH["2"], "^~\\&")
    assert.deepStrictEqual(json.MSH["9"], { "1": "ADT", "2": "A01" })
    assert.deepStrictEqual(json.PID["5"], { "1": "DOE", "2": "JOHN", "3": "Q" })
    assert.deepStrictEqual(json.PID["3"], [
      { "1": "123456", "4": "HOSP", "5": "MR" },
      { "1": "987654", "4": "NATIONAL", "5": "NI" }
    ])
    assert.strictEqual(json.OBX.length, 2)
    assert.strictEqual(json.OBX[1]["5"], "13.2")
    // The protocol's example result.
    assert.deepStrictEqual(Hl7.toJson(Result.getOrThrow(Hl7.parse("MSH|^~\\&"))), { MSH: { "1": "|", "2": "^~\\&" } })
  })

  it("escapes CR, LF and the other ASCII controls as hex escapes, and decodes them back", () => {
    const d = parsed().delimiters
    const text = "a\rb\nc\r\nd\u0000e\u000bf\u001cg\u007fh\ti\u0085j\u2028k"
    const escaped = Hl7.escape(text, d)
    assert.strictEqual(
      escaped,
      "a\\X0D\\b\\X0A\\c\\X0D\\\\X0A\\d\\X00\\e\\X0B\\f\\X1C\\g\\X7F\\h\\X09\\i\u0085j\u2028k"
    )
    assert.strictEqual(Hl7.unescape(escaped, d), text)
    // Escape-looking plain text is escaped, not taken for a sequence.
    assert.strictEqual(Hl7.escape("\\X0D\\", d), "\\E\\X0D\\E\\")
    assert.strictEqual(Hl7.unescape("\\E\\X0D\\E\\", d), "\\X0D\\")
    // Sequences other writers use: several bytes in one, lower case; non-ASCII bytes and malformed ones are kept.
    assert.strictEqual(Hl7.unescape("\\X0D0A\\|\\x\\|\\X0d\\", d), "\r\n|\\x\\|\r")
    for (const kept of ["\\XC3A9\\", "\\X\\", "\\X0\\", "\\XZZ\\", "\\X0D", "\\.br\\", "\\H\\"]) {
      assert.strictEqual(Hl7.unescape(kept, d), kept)
    }
  })

  it("a value with CR or LF adds no segment (hostile input, the issue's payloads)", () => {
    const m = parsed()
    const obx = Result.getOrThrow(Hl7.set(m, "OBX-12", "x\rZZ1"))
    const pid = Result.getOrThrow(Hl7.set(obx, "PID-2", "y\nMSH"))
    const text = Hl7.format(pid)
    assert.strictEqual(text.split("\r").length, 4)
    assert.notInclude(text, "\n")
    assert.include(text, "|x\\X0D\\ZZ1")
    assert.include(text, "PID|1|y\\X0A\\MSH|")
    const reparsed = Result.getOrThrow(Hl7.parse(text))
    assert.deepStrictEqual(reparsed.segments.map((s) => s.name), ["MSH", "PID", "OBX", "OBX"])
    assert.strictEqual(Hl7.get(reparsed, "OBX-12"), "x\rZZ1")
    assert.strictEqual(Hl7.get(reparsed, "PID-2"), "y\nMSH")
    const json = Hl7.toJson(reparsed) as any
    assert.strictEqual(json.OBX[0]["12"], "x\rZZ1")
    assert.strictEqual(json.PID["2"], "y\nMSH")
    assert.strictEqual(json.ZZ1, undefined)
    assert.strictEqual(Result.getOrThrow(Hl7.formatChecked(pid)), text)
  })

  it("escapes a delimiter that is half of a surrogate pair, unit by unit", () => {
    // parse takes any punctuation unit as a delimiter, a lone high surrogate included; 😀 is \ud83d\ude00.
    const m = Result.getOrThrow(Hl7.parse("MSH\ud83d^~\\&\ud83dLAB\rPID\ud83d1\ud83d\ud83d123"))
    const patched = Result.getOrThrow(Hl7.set(m, "PID-2", "a😀b"))
    const reparsed = Result.getOrThrow(Hl7.parse(Hl7.format(patched)))
    assert.strictEqual(reparsed.segments[1].fields.length, 4)
    assert.strictEqual(Hl7.get(reparsed, "PID-2"), "a😀b")
    assert.strictEqual(Hl7.get(reparsed, "PID-3"), "123")
  })

  it("formatChecked refuses a message that would not read back as one message", () => {
    const m = parsed()
    assert.strictEqual(Result.getOrThrow(Hl7.formatChecked(m)), sample)
    const withField = (segment: number, field: number, value: string): Hl7.Message => ({
      delimiters: m.delimiters,
      segments: m.segments.map((s, i) =>
        i === segment ? { name: s.name, fields: s.fields.map((f, n) => n === field ? value : f) } : s
      )
    })
    const broken: Array<[Hl7.Message, string]> = [
      [withField(3, 12 - 7, "x\rZZ1"), "segments"], // a segment more
      [withField(1, 2, "y\nMSH"), "second MSH"], // a second MSH
      [withField(1, 2, "a|b"), "segment 2 (PID)"], // a field more
      [withField(3, 6, "g/dL\r"), "segment 4 (OBX)"], // a trailing CR, dropped on reading
      [withField(0, 2, "^~\\#"), "other delimiters"] // the encoding characters
    ]
    for (const [message, detail] of broken) {
      const error = Result.getOrThrow(Result.flip(Hl7.formatChecked(message)))
      assert.strictEqual(error.reason, "BreaksMessage")
      assert.include(error.detail, detail)
    }
  })

  it("patch applies a batch in order and formats it once; a refusal names the patch", () => {
    const m = parsed()
    const patched = Hl7.patch(m, [
      { path: "PID-5.1", value: "ANONYMOUS" },
      { path: "PID-5.3", value: null },
      { path: "PID-3[2].1", value: "X" },
      { path: "PID-5", value: "A^B" },
      { path: "PID-5.2", value: "C" },
      { path: "OBX[2]-5", value: "99" },
      { path: "PID-30.2.3", value: "Z" }
    ])
    assert.strictEqual(
      Result.getOrThrow(patched),
      sample
        .replace("DOE^JOHN^Q", "A\\S\\B^C")
        .replace("987654^^^NATIONAL^NI", "X^^^NATIONAL^NI")
        .replace("1 MAIN ST^^SPRINGFIELD", "1 MAIN ST^^SPRINGFIELD|||||||||||||||||||^&&Z")
        .replace("||13.2|", "||99|")
    )
    const refused = (patches: ReadonlyArray<Hl7.Patch>) => {
      const failure = Result.getOrThrow(Result.flip(Hl7.patch(m, patches)))
      return [failure.index, failure.error.reason]
    }
    const ok = { path: "PID-5.1", value: "X" }
    assert.deepStrictEqual(refused([ok, ok, { path: "PID5", value: "Y" }]), [2, "InvalidPath"])
    assert.deepStrictEqual(refused([ok, { path: "OBX[3]-5", value: "Y" }, { path: "PID5", value: "Y" }]), [
      1,
      "NoSuchSegment"
    ])
    assert.deepStrictEqual(refused([ok, ok, ok, { path: "MSH-2", value: null }]), [3, "ReadOnly"])
    assert.strictEqual(Result.getOrThrow(Hl7.patch(m, [])), sample)
  })

  it("patch with an encoding that adds structure: the check refuses the batch and names the first patch to break it", () => {
    const m = parsed()
    const raw = { encode: (value: string) => value }
    // Encoded HL7 is written as it is, and a later patch sees the structure it added.
    assert.include(
      Result.getOrThrow(Hl7.patch(m, [{ path: "PID-5.1", value: "A~B^C" }, { path: "PID-5[2].2", value: "D" }], raw)),
      "|A~B^D^JOHN^Q|"
    )
    const refused = (patches: ReadonlyArray<Hl7.Patch>) => {
      const failure = Result.getOrThrow(Result.flip(Hl7.patch(m, patches, raw)))
      return [failure.index, failure.error.reason]
    }
    const ok = { path: "PID-5.1", value: "X" }
    assert.deepStrictEqual(refused([ok, { path: "PID-2", value: "a\rZZ1" }, ok]), [1, "BreaksMessage"])
    assert.deepStrictEqual(refused([ok, ok, { path: "OBX-5.1", value: "a|b" }, { path: "PID-2", value: "\n" }]), [
      2,
      "BreaksMessage"
    ])
    // Broken after patch 1 and mended by patch 2, which overwrites the value; broken again by patch 3, for good. The
    // index is the first patch after which the message was broken, as applying and checking after each one finds.
    assert.deepStrictEqual(
      refused([ok, { path: "PID-2", value: "\r" }, { path: "PID-2", value: "x" }, { path: "OBX-6", value: "|" }]),
      [1, "BreaksMessage"]
    )
    assert.isTrue(Result.isSuccess(Hl7.patch(m, [{ path: "PID-2", value: "\r" }, { path: "PID-2", value: null }], raw)))
  })

  it("patch under maxBytes refuses the batch at the patch that takes the message over the bound", () => {
    const m = parsed()
    const size = sample.length // ASCII: a byte a character
    const within = (patches: ReadonlyArray<Hl7.Patch>, maxBytes: number) =>
      outcomeOf(Hl7.patch(m, patches, { maxBytes }))
    const tooLarge = (index: number, limit: number, actual: number) => ({
      index,
      reason: "MessageTooLarge",
      detail: `the patches would make the message ${actual} bytes of UTF-8, more than the limit of ${limit}`,
      limit,
      actual
    })
    // At the bound exactly, and one byte over: "DOE" becomes "ANONYMOUS", 6 bytes more.
    const anonymous = [{ path: "PID-5.1", value: "ANONYMOUS" }]
    assert.strictEqual(within(anonymous, size + 6), sample.replace("DOE^", "ANONYMOUS^"))
    assert.deepStrictEqual(within(anonymous, size + 5), tooLarge(0, size + 5, size + 6))
    // The patches: each pads 9,998 repetitions, components and subcomponents, 29,996 bytes with its field
    // delimiter (the first pads PID-12 to PID-20: 8 more). The fourth crosses 100,000; the rest is never applied.
    const grow = Array.from({ length: 1000 }, (_, i) => ({ path: `PID-${i + 20}[9999].9999.9999`, value: "x" }))
    const crossed = size + 8 + 4 * 29_996
    assert.deepStrictEqual(within(grow, 100_000), tooLarge(3, 100_000, crossed))
    const folded = grow.slice(0, 4).reduce((message, p) => Result.getOrThrow(Hl7.set(message, p.path, p.value)), m)
    assert.strictEqual(Hl7.format(folded).length, crossed)
    // The first refusal wins: a bad path before the crossing, the size before a bad path after it.
    assert.deepStrictEqual(
      [
        within([grow[0], { path: "PID5", value: "x" }, ...grow.slice(1)], 100_000),
        within([...grow.slice(0, 4), { path: "PID5", value: "x" }], 100_000)
      ].map((o) => typeof o !== "string" && [o.index, o.reason]),
      [[1, "InvalidPath"], [3, "MessageTooLarge"]]
    )
    // Values count in UTF-8 as encoded: "é" 2 bytes, "€" 3, "|" 3 escaped (\F\); "😀" counts 6, 2 more than UTF-8.
    assert.strictEqual(within([{ path: "PID-5.1", value: "é€|" }], size + 5), sample.replace("DOE^", "é€\\F\\^"))
    assert.deepStrictEqual(within([{ path: "PID-5.1", value: "é€|" }], size + 4), tooLarge(0, size + 4, size + 5))
    assert.deepStrictEqual(within([{ path: "PID-5.1", value: "😀" }], size + 2), tooLarge(0, size + 2, size + 3))
    // What a patch clears or overwrites counts too, but only once it is done: no patch may leave the message over.
    const longer = { path: "PID-11.3", value: "SPRINGFIELD, IL" } // 4 bytes more
    const clear = { path: "PID-5", value: null } // "DOE^JOHN^Q": 10 bytes fewer
    assert.strictEqual(
      within([clear, longer], size),
      sample.replace("DOE^JOHN^Q", "").replace("SPRINGFIELD", "SPRINGFIELD, IL")
    )
    assert.deepStrictEqual(within([longer, clear], size), tooLarge(0, size, size + 4))
    // A message already over the bound may be patched as long as it grows no larger.
    assert.strictEqual(within([{ path: "PID-5", value: null }], 10), sample.replace("DOE^JOHN^Q", ""))
    assert.strictEqual(within([{ path: "PID-5.1", value: "ABC" }], 10), sample.replace("DOE^", "ABC^"))
    assert.deepStrictEqual(within([{ path: "PID-5.1", value: "ABCD" }], 10), tooLarge(0, 10, size + 1))
    // No bound by default, nor with Infinity or NaN.
    for (const maxBytes of [undefined, Infinity, NaN]) {
      assert.strictEqual(Result.getOrThrow(Hl7.patch(m, grow.slice(0, 2), { maxBytes })).length, size + 8 + 2 * 29_996)
    }
  })

  describe("properties", () => {
    // The same message written with the usual delimiters, with other ones, and with a surrogate half as field separator.
    const messages = [
      sample,
      sample.replace(/[|^~\\&]/g, (c) => ({ "|": "#", "^": "*", "~": "!", "\\": "/", "&": "$" })[c]!),
      sample.replaceAll("|", "\ud83d")
    ].map((text) => Result.getOrThrow(Hl7.parse(text)))

    // Leaves (`PID-7` holds one value), and places that do not exist yet, so that setting them pads.
    const paths = [
      "MSH-3",
      "MSH-9.2",
      "MSH-10",
      "MSH-21",
      "PID-2",
      "PID-3[1].1",
      "PID-3[2].4",
      "PID-3[3].2",
      "PID-5.1",
      "PID-5.3",
      "PID-7",
      "PID-11.3",
      "PID-30.2.3",
      "OBX-5",
      "OBX[2]-6",
      "OBX-12"
    ]

    const hostile = fc.constantFrom(
      "\r",
      "\n",
      "\r\n",
      "|",
      "^",
      "~",
      "\\",
      "&",
      "#",
      "*",
      "!",
      "/",
      "$",
      "\\X0D\\",
      "\\X0A\\",
      "\\X0D0A\\",
      "\\E\\",
      "\\F\\",
      "\\X\\",
      "\\.br\\",
      "/X0D/",
      "MSH",
      "ZZ1",
      "\u0000",
      "\u000b",
      "\u001c",
      "\u007f",
      "\t",
      "\u0085",
      "\u2028",
      "\ud800",
      "😀",
      "é",
      " ",
      "a"
    )
    const value = fc.oneof(fc.string({ unit: "binary" }), fc.string({ unit: hostile }), fc.string())

    // Every non-empty leaf of a message, decoded, by segment index, field, repetition, component and subcomponent.
    const leaves = (message: Hl7.Message): Map<string, string> => {
      const d = message.delimiters
      const out = new Map<string, string>()
      message.segments.forEach((segment, s) =>
        segment.fields.forEach((field, f) => {
          if (f === 0) return
          if (segment.name === "MSH" && f <= 2) return void out.set(`${s}-${f}`, field)
          field.split(d.repetition).forEach((repetition, r) =>
            repetition.split(d.component).forEach((component, c) =>
              component.split(d.subcomponent).forEach((sub, u) => {
                if (sub !== "") out.set(`${s}-${f}[${r + 1}].${c + 1}.${u + 1}`, Hl7.unescape(sub, d))
              })
            )
          )
        })
      )
      return out
    }

    const keyOf = (message: Hl7.Message, path: Hl7.Path): string => {
      let seen = 0
      const s = message.segments.findIndex((segment) => segment.name === path.segment && ++seen === path.occurrence)
      return `${s}-${path.field}[${path.repetition ?? 1}].${path.component ?? 1}.${path.subcomponent ?? 1}`
    }

    // What getMessage {format: "json"} shows at a path, after a trip through JSON text as on the wire.
    const jsonAt = (message: Hl7.Message, path: Hl7.Path): unknown => {
      const json = JSON.parse(JSON.stringify(Hl7.toJson(message)))
      const segments = json[path.segment]
      let at: any = Array.isArray(segments) ? segments[path.occurrence - 1] : segments
      at = at?.[String(path.field)]
      at = Array.isArray(at) ? at[(path.repetition ?? 1) - 1] : (path.repetition ?? 1) === 1 ? at : undefined
      for (const index of [path.component, path.subcomponent]) {
        if (index === undefined) continue
        at = typeof at === "string" ? (index === 1 ? at : undefined) : at?.[String(index)]
      }
      return at
    }

    it("a patch changes exactly the addressed value, reads back as written and adds no segment", () => {
      fc.assert(
        fc.property(fc.constantFrom(...messages), fc.constantFrom(...paths), value, (message, pathText, text) => {
          const path = Result.getOrThrow(Hl7.parsePath(pathText))
          const patched = Result.getOrThrow(Hl7.set(message, path, text))
          const formatted = Result.getOrThrow(Hl7.formatChecked(patched))
          const reparsed = Result.getOrThrow(Hl7.parse(formatted))
          // (c) no segment added or lost, and the same ones.
          assert.deepStrictEqual(reparsed.segments.map((s) => s.name), message.segments.map((s) => s.name))
          // (a) the addressed leaf changed, and nothing else did (padding adds empty values only).
          const expected = leaves(message)
          const key = keyOf(message, path)
          expected.delete(key)
          if (text !== "") expected.set(key, text)
          assert.deepStrictEqual([...leaves(reparsed)].sort(), [...expected].sort())
          // (b) read back, from the text and from the JSON view, it is the value written.
          assert.strictEqual(Hl7.get(reparsed, path), text)
          assert.strictEqual(jsonAt(reparsed, path), text === "" ? undefined : text)
        }),
        { numRuns: 2000 }
      )
    })

    it("unescape(escape(text)) is text, and escaped text has no delimiter and no control character", () => {
      fc.assert(
        fc.property(fc.constantFrom(...messages), value, (message, text) => {
          const d = message.delimiters
          const escaped = Hl7.escape(text, d)
          assert.strictEqual(Hl7.unescape(escaped, d), text)
          for (const delimiter of [d.field, d.component, d.repetition, d.subcomponent]) {
            assert.notInclude(escaped, delimiter)
          }
          assert.notMatch(escaped, /[\u0000-\u001f\u007f]/)
        }),
        { numRuns: 2000 }
      )
    })

    // Paths that meet: the same fields at every depth, places that do not exist yet, and now and then a refused one.
    const batchPath = fc.oneof(
      {
        weight: 30,
        arbitrary: fc.tuple(
          fc.constantFrom("MSH", "PID", "PID", "OBX", "OBX[2]"),
          fc.integer({ min: 1, max: 13 }),
          fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
          fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined }),
          fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined })
        ).map(([segment, field, repetition, component, subcomponent]) =>
          `${segment}-${segment === "MSH" && field <= 2 ? field + 2 : field}` +
          (repetition === undefined ? "" : `[${repetition}]`) +
          (component === undefined ? "" : `.${component}` + (subcomponent === undefined ? "" : `.${subcomponent}`))
        )
      },
      { weight: 1, arbitrary: fc.constantFrom("PID5", "PID-0", "MSH-1", "MSH-2", "MSH-2.1", "OBX[3]-5", "ZZZ-1") }
    )
    const batch = (values: fc.Arbitrary<string>) =>
      fc.array(fc.record({ path: batchPath, value: fc.option(values, { nil: null, freq: 3 }) }), { maxLength: 16 })

    it("patch gives what set after set gave, then formatChecked: the same text, or the same refusal", () => {
      fc.assert(
        fc.property(fc.constantFrom(...messages), batch(value), (message, patches) => {
          const expected = referencePatch(message, patches, Hl7.set)
          assert.deepStrictEqual(outcomeOf(Hl7.patch(message, patches)), expected)
        }),
        { numRuns: 2000 }
      )
    })

    const structure = fc.constantFrom("^", "~", "&", "\\", "*", "!", "$", "/", "a")

    const encodings: ReadonlyArray<Encode> = [
      Hl7.escape,
      (value) => value,
      // Escapes the delimiters but lets CR and LF through, as an escape missing a case would.
      (value, d) =>
        Hl7.escape(value, d).replaceAll(`${d.escape}X0D${d.escape}`, "\r").replaceAll(
          `${d.escape}X0A${d.escape}`,
          "\n"
        )
    ]

    it("patch with any encoding gives what set with that encoding gave, BreaksMessage and its index included", () => {
      fc.assert(
        fc.property(
          fc.constantFrom(...messages),
          fc.constantFrom(...encodings),
          // Structure without line breaks too, so that a later patch in the same field sees what an earlier one added.
          batch(fc.oneof(fc.string({ unit: hostile }), fc.string({ unit: structure }))),
          (message, encode, patches) => {
            const expected = referencePatch(message, patches, (m, path, v) => referenceSet(m, path, v, encode))
            assert.deepStrictEqual(outcomeOf(Hl7.patch(message, patches, { encode })), expected)
          }
        ),
        { numRuns: 2000 }
      )
    })

    // A bound from a little under the message's size (it may only shrink then) to a few patches over it.
    const slack = fc.integer({ min: -20, max: 160 })

    it("under maxBytes, patch refuses exactly when set after set would leave the message over the bound (BMP: UTF-8)", () => {
      // Without characters outside the BMP, the size maxBytes counts is the size in UTF-8.
      const bmp = fc.oneof(
        fc.string({ unit: hostile.filter((char) => !/[\ud800-\udfff]/.test(char)) }),
        fc.string({ unit: fc.constantFrom("é", "\u07ff", "\u0800", "€", "ア", "\uffff", "a", "|", "^") }),
        fc.string()
      )
      fc.assert(
        fc.property(fc.constantFrom(...messages), batch(bmp), slack, (message, patches, slack) => {
          const maxBytes = utf8(Hl7.format(message)) + slack
          const expected = referencePatchWithin(message, patches, Hl7.set, maxBytes, utf8)
          assert.deepStrictEqual(outcomeOf(Hl7.patch(message, patches, { maxBytes })), expected)
        }),
        { numRuns: 2000 }
      )
    })

    it("under maxBytes, with any values, patch never keeps a message over the bound, and refuses only 2 bytes per astral character early", () => {
      fc.assert(
        fc.property(fc.constantFrom(...messages), batch(value), slack, (message, patches, slack) => {
          const before = counted(Hl7.format(message))
          const maxBytes = utf8(Hl7.format(message)) + slack
          const outcome = outcomeOf(Hl7.patch(message, patches, { maxBytes }))
          assert.deepStrictEqual(outcome, referencePatchWithin(message, patches, Hl7.set, maxBytes))
          if (typeof outcome === "string") {
            // Never over the bound (or over the size it had, if it had more already).
            assert.isAtMost(utf8(outcome), Math.max(maxBytes, before))
          } else if (outcome.reason === "MessageTooLarge") {
            // Refused only when over the bound, counting each character outside the BMP 2 bytes more than UTF-8.
            const crossed = patches.slice(0, outcome.index + 1).reduce(
              (m, p) => Result.getOrThrow(Hl7.set(m, p.path, p.value)),
              message
            )
            const text = Hl7.format(crossed)
            assert.strictEqual(outcome.actual, utf8(text) + 2 * astral(text))
            assert.isAbove(utf8(text) + 2 * astral(text), Math.max(maxBytes, before))
          }
        }),
        { numRuns: 2000 }
      )
    })

    it("under maxBytes, patch with any encoding refuses where set with that encoding, measured after each patch, would", () => {
      fc.assert(
        fc.property(
          fc.constantFrom(...messages),
          fc.constantFrom(...encodings),
          batch(fc.oneof(fc.string({ unit: hostile }), fc.string({ unit: structure }))),
          slack,
          (message, encode, patches, slack) => {
            const maxBytes = utf8(Hl7.format(message)) + slack
            const expected = referencePatchWithin(
              message,
              patches,
              (m, path, v) => referenceSet(m, path, v, encode),
              maxBytes
            )
            assert.deepStrictEqual(outcomeOf(Hl7.patch(message, patches, { encode, maxBytes })), expected)
          }
        ),
        { numRuns: 2000 }
      )
    })
  })
})
