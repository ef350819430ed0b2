/**
 * Text that another process chose (an extension's name, titles, URLs, stderr, error messages; a server's answers),
 * made safe to print on a terminal: a control character is shown, never obeyed.
 *
 * @since 0.1.0
 */

// C0 controls, DEL, C1 controls, the Unicode line and paragraph separators, and the bidirectional embeddings,
// overrides and isolates (U+202A–U+202E, U+2066–U+2069) that reorder what follows them on the screen.
const unsafe = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g
// The same without C0: JSON.stringify writes those as \u escapes already.
const unsafeInJson = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g
const hexEscape = (char: string) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`

/**
 * `text` made safe to print on a terminal. C0 controls and DEL become their Unicode Control Pictures (ESC `␛`, LF `␊`,
 * CR `␍`, DEL `␡`), so no escape sequence (OSC 52 clipboard writes, OSC 0 titles, OSC 8 links, CSI screen clears) and
 * no line break reaches the terminal; C1 controls (U+0080–U+009F, U+009B is a one-byte CSI), line and paragraph
 * separators and bidirectional overrides become `\u009b`-style escapes. Everything else, other scripts and emoji
 * included, is left as it is. Idempotent.
 *
 * @example
 * ```ts
 * import { TerminalText } from "@lifeline/hermes-node"
 *
 * TerminalText.visible("ok\u001b]52;c;cm0gLXJm\u0007\n") // "ok␛]52;c;cm0gLXJm␇␊"
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const visible = (text: string): string =>
  text.replace(unsafe, (char) => {
    const code = char.charCodeAt(0)
    return code < 0x20 ? String.fromCharCode(0x2400 + code) : code === 0x7f ? "\u2421" : hexEscape(char)
  })

/**
 * `JSON.stringify(value, null, indent)` that is also safe to print on a terminal: JSON.stringify escapes C0 controls
 * but writes DEL, C1 controls, line separators and bidirectional overrides as they are; here they are `\u` escapes
 * too. The JSON means the same: a parser reads back the very same strings.
 *
 * @example
 * ```ts
 * import { TerminalText } from "@lifeline/hermes-node"
 *
 * TerminalText.visibleJson({ name: "evil\u202egnp.exe" }) // '{"name":"evil\\u202egnp.exe"}'
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const visibleJson = (value: unknown, indent?: number): string =>
  JSON.stringify(value, null, indent).replace(unsafeInJson, hexEscape)
