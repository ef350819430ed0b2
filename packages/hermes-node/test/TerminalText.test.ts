import { assert, describe, it } from "@effect/vitest"
import { TerminalText } from "@lifeline/hermes-node"

describe("TerminalText.visible", () => {
  it("shows C0 controls and DEL as Control Pictures", () => {
    assert.strictEqual(TerminalText.visible("a\u0000b\tc\nd\re\u001bf\u007f"), "a␀b␉c␊d␍e␛f␡")
  })

  it("defuses OSC and CSI sequences: no ESC and no BEL reach the terminal", () => {
    const shown = TerminalText.visible("ok\u001b]52;c;cm0gLXJm\u0007 \u001b[2J \u001b]8;;http://x\u001b\\link")
    assert.strictEqual(shown, "ok␛]52;c;cm0gLXJm␇ ␛[2J ␛]8;;http://x␛\\link")
    assert.isFalse(/[\u0000-\u001f\u007f]/.test(shown))
  })

  it("escapes C1 controls, line and paragraph separators and bidirectional controls", () => {
    assert.strictEqual(TerminalText.visible("\u009b2J"), "\\u009b2J")
    assert.strictEqual(TerminalText.visible("a\u0085b\u2028c\u2029d"), "a\\u0085b\\u2028c\\u2029d")
    assert.strictEqual(TerminalText.visible("evil\u202egnp.exe"), "evil\\u202egnp.exe")
    assert.strictEqual(TerminalText.visible("\u202a\u202d\u2066\u2069"), "\\u202a\\u202d\\u2066\\u2069")
  })

  it("leaves other scripts and emoji as they are", () => {
    const text = "héllo Ωμέγα 日本語 עברית 🎉 👩‍💻 \u00a0"
    assert.strictEqual(TerminalText.visible(text), text)
  })

  it("is idempotent", () => {
    for (const text of ["a\u001b[31mred\u001b[0m\n", "\u009b\u202e\u2028", "plain"]) {
      const once = TerminalText.visible(text)
      assert.strictEqual(TerminalText.visible(once), once)
    }
  })
})

describe("TerminalText.visibleJson", () => {
  it("is JSON.stringify when nothing needs escaping", () => {
    const value = { a: [1, "two", null], b: { c: "x\ny" } }
    assert.strictEqual(TerminalText.visibleJson(value), JSON.stringify(value))
    assert.strictEqual(TerminalText.visibleJson(value, 2), JSON.stringify(value, null, 2))
  })

  it("escapes DEL, C1, separators and bidirectional controls, which JSON.stringify leaves as they are", () => {
    const value = { name: "a\u007fb\u009bc\u2028d\u202ee\u2066" }
    const json = TerminalText.visibleJson(value)
    assert.strictEqual(json, "{\"name\":\"a\\u007fb\\u009bc\\u2028d\\u202ee\\u2066\"}")
    assert.isFalse(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/.test(json))
  })

  it("means the same JSON: a parser reads back the very same strings", () => {
    const value = { text: "\u001b]0;title\u0007 \u009b \u2029 \u202d x", list: ["\u007f", "ok"] }
    assert.deepStrictEqual(JSON.parse(TerminalText.visibleJson(value, 2)), value)
  })
})
