import { assert, describe, it } from "@effect/vitest"
import { Hl7 } from "@lifeline/hermes"
import { Result } from "effect"

const sample = [
  "MSH|^~\\&|LAB|HOSPITAL|HERMES|HERMES|20240101120000||ADT^A01|MSG00042|P|2.5",
  "PID|1||123456^^^HOSP^MR~987654^^^NATIONAL^NI||DOE^JOHN^Q||19800101|M|||1 MAIN ST^^SPRINGFIELD",
  "OBX|1|ST|GLU||5.4|mmol/L",
  "OBX|2|ST|HGB||13.2|g/dL"
].join("\r")

const parsed = () => Result.getOrThrow(Hl7.parse(sample))

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
    // Seed 002's example result.
    assert.deepStrictEqual(Hl7.toJson(Result.getOrThrow(Hl7.parse("MSH|^~\\&"))), { MSH: { "1": "|", "2": "^~\\&" } })
  })
})
