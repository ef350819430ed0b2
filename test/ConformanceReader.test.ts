/**
 * The conformance kit's pure parts: the reader of an extension's stdout (frames, junk, a Content-Length that counts
 * characters or promises too much, a body that is not JSON, headers cut by chunk boundaries) and the rendering of
 * untrusted text in the scorecard, the JSON report and the HTML report, and the caps on evidence.
 */
import { assert, describe, it } from "@effect/vitest"
import { makeReader } from "../packages/hermes-node/src/internal/conformanceFraming.js"
import { html } from "../packages/hermes-node/src/internal/conformanceHtml.js"
import type { Summary } from "../packages/hermes-node/src/internal/conformanceReport.js"
import { json, scorecard } from "../packages/hermes-node/src/internal/conformanceReport.js"
import {
  capEvidence,
  collector,
  listed,
  maxEvidenceBytes,
  maxEvidenceLineBytes,
  maxEvidenceLines,
  maxListedCommands
} from "../packages/hermes-node/src/internal/conformanceVerdict.js"

const framed = (body: string, length = Buffer.byteLength(body, "utf8")) => `Content-Length: ${length}\r\n\r\n${body}`
const bytes = (text: string) => Buffer.from(text, "utf8")

describe("conformance kit: the stdout reader", () => {
  it("reads exact frames, byte by byte as well as all at once", () => {
    const text = framed("{\"a\":\"ü\"}") + framed("{\"b\":2}")
    const whole = makeReader().push(bytes(text))
    assert.deepStrictEqual(whole.frames.map((f) => f.message), [{ a: "ü" }, { b: 2 }])
    assert.deepStrictEqual(whole.junk, [])
    const reader = makeReader()
    const frames = Array.from(bytes(text)).flatMap((byte) => reader.push(Uint8Array.of(byte)).frames)
    assert.deepStrictEqual(frames.map((f) => [f.declared, f.actual]), [[10, 10], [7, 7]])
    assert.strictEqual(reader.pending(), 0)
  })

  it("counts bytes outside frames as junk, a header cut by a chunk boundary excepted", () => {
    const reader = makeReader()
    const first = reader.push(bytes("hello world\nContent-Le"))
    assert.deepStrictEqual(first.junk, ["hello world\n"])
    const second = reader.push(bytes(`ngth: 2\r\n\r\n{}junk`))
    assert.deepStrictEqual(second.frames.map((f) => f.message), [{}])
    assert.deepStrictEqual(second.junk, ["junk"])
  })

  it("finds a body whose Content-Length counts characters, not bytes, and reports both numbers", () => {
    const body = "{\"title\":\"Zähle\"}"
    const decoded = makeReader().push(bytes(framed(body, body.length) + framed("{}")))
    assert.deepStrictEqual(decoded.frames.map((f) => [f.message, f.declared, f.actual]), [
      [{ title: "Zähle" }, 17, 18],
      [{}, 2, 2]
    ])
    assert.deepStrictEqual(decoded.junk, [])
    // The last frame of all, cut short, is found once everything written has been read.
    const alone = makeReader().push(bytes(framed(body, body.length)))
    assert.deepStrictEqual(alone.frames.map((f) => f.actual), [18])
  })

  it("finds a body whose Content-Length promises more than was written: at the next header, or at the flush", () => {
    const reader = makeReader()
    const next = reader.push(bytes(framed("{\"a\":1}", 50) + framed("{}")))
    assert.deepStrictEqual(next.frames.map((f) => [f.message, f.declared, f.actual]), [[{ a: 1 }, 50, 7], [{}, 2, 2]])
    const waiting = makeReader()
    assert.deepStrictEqual(waiting.push(bytes("Content-Length: 50\r\n\r\n{\"a\":")).frames, [])
    assert.deepStrictEqual(waiting.flush().junk.length, 1)
  })

  it("keeps a body that is not JSON as such, once nothing more comes", () => {
    const reader = makeReader()
    assert.deepStrictEqual(reader.push(bytes(framed("not json"))).frames, [])
    const flushed = reader.flush()
    assert.deepStrictEqual(flushed.frames.map((f) => [f.json, f.text]), [[false, "not json"]])
  })

  it("skips a header without Content-Length, or one whose length is over the bound", () => {
    const decoded = makeReader().push(bytes(`Content-Type: x\r\n\r\n${framed("{}")}`))
    assert.deepStrictEqual(decoded.frames.map((f) => f.message), [{}])
    assert.deepStrictEqual(decoded.junk, ["Content-Type: x\r\n\r\n"])
    const huge = makeReader().push(bytes(`Content-Length: 999999999\r\n\r\n{}`))
    assert.deepStrictEqual(huge.frames, [])
  })
})

describe("conformance kit: untrusted text in the reports", () => {
  const hostile = "evil\u001b]52;c;aGk=\u0007<script>alert(1)</script>\u009b2J\u202e"
  const summary: Summary = {
    command: `ext ${hostile}`,
    name: hostile,
    version: "1\u001b[2J",
    commands: [{ id: "x", title: hostile }],
    commandCount: 1,
    checks: [
      { id: "handshake.initialize-within-10s", status: "fail", evidence: [hostile, "second line"], rule: "r" },
      { id: "wire.unknown-method", status: "pass", evidence: ["fine"], ms: 3, rule: "r" }
    ],
    elapsedMs: 1234,
    timeline: [
      { kind: "spawn", at: 0, label: hostile },
      { kind: "request", at: 10, end: 20, label: `editor/getMessage ${hostile}` },
      { kind: "exit", at: 30, label: "exit 0" }
    ]
  }
  // C0 controls, DEL and C1 controls, as `visible` shows them or JSON escapes them.
  const controls = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e]/

  it("the scorecard shows control characters, never sends them", () => {
    const text = scorecard(summary, false)
    assert.notMatch(text, controls)
    assert.include(text, "␛]52;c;aGk=␇")
    assert.include(text, "\\u009b2J")
    assert.include(text, "1 passed, 1 failed")
  })

  it("the JSON report escapes them and keeps the exact strings", () => {
    const text = json(summary)
    assert.notMatch(text, controls)
    const parsed = JSON.parse(text)
    assert.strictEqual(parsed.extension.name, hostile)
    assert.deepStrictEqual([parsed.passed, parsed.failed, parsed.warned], [1, 1, 0])
  })

  it("the HTML report escapes markup and shows controls", () => {
    const page = html(summary)
    assert.notMatch(page, controls)
    assert.notInclude(page, "<script>")
    assert.include(page, "&lt;script&gt;alert(1)&lt;/script&gt;")
    assert.notMatch(page, /\b(src|href)=/)
    assert.include(page, "<svg id=\"timeline\"")
  })
})

describe("conformance kit: evidence within the caps", () => {
  it("200,000 lines: the first ones kept, one line counts the rest and their size, under maxEvidenceBytes", () => {
    const evidence = collector()
    for (let i = 0; i < 200_000; i++) evidence.add(`main: an answer to no request at ${i} ms: ${"x".repeat(200)}`)
    const lines = evidence.lines()
    assert.strictEqual(evidence.count(), 200_000)
    assert.isAtMost(lines.length, maxEvidenceLines)
    assert.match(lines.at(-1)!, /^… and 199,9\d\d more \(\d+\.\d MB\) left out$/)
    assert.isAtMost(Buffer.byteLength(lines.join("")), maxEvidenceBytes)
    // Already within the caps: the judge's own cap leaves it as it is.
    assert.deepStrictEqual(capEvidence(lines), lines)
  })

  it("one long line is cut to maxEvidenceLineBytes and says how much it lost; short evidence is left alone", () => {
    const [line] = capEvidence(["é".repeat(1_000_000)])
    assert.isAtMost(Buffer.byteLength(line), maxEvidenceLineBytes)
    assert.match(line, /… \(2\.0 MB more left out\)$/)
    assert.notInclude(line, "\uFFFD")
    assert.deepStrictEqual(capEvidence(["a", "b"]), ["a", "b"])
  })

  it("a list of command ids names the first maxListedCommands and counts the rest", () => {
    const ids = Array.from({ length: 2000 }, (_, i) => `command.${i}`)
    const text = listed(ids)
    assert.match(text, /^command\.0, command\.1, .* … and 1,980 more$/)
    assert.strictEqual(text.split(", ").length, maxListedCommands)
  })
})
