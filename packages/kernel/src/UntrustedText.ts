/**
 * Text that came from the other side, made safe for a log line or an error message: control characters, line
 * separators and bidirectional overrides are written as `\uXXXX` escapes (one entry stays one line, and a terminal
 * shows what was logged instead of obeying it), and a long value is cut with a marker saying how long it was.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/untrustedText.js"

/**
 * `text` with every control character (C0, DEL, C1), line or paragraph separator and bidirectional override written
 * as a `\uXXXX` escape; nothing else changes.
 *
 * @example
 * ```ts
 * import { UntrustedText } from "@lifeline/kernel"
 *
 * UntrustedText.escape("done\nINFO forged") // "done\\u000aINFO forged"
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const escape: (text: string) => string = internal.escape

/**
 * {@link escape}, cut to `max` characters (default {@link maxShownLength}) with a marker saying how long the value
 * was: what a message or a log line shows of an untrusted value.
 *
 * @example
 * ```ts
 * import { UntrustedText } from "@lifeline/kernel"
 *
 * UntrustedText.shown("x".repeat(500), 10) // "xxxxxxxxxx…(500 characters)"
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const shown: (value: string, max?: number) => string = internal.shown

/**
 * How many characters of an untrusted value {@link shown} keeps by default: 120.
 *
 * @since 0.1.0
 * @category models
 */
export const maxShownLength: number = internal.maxShownLength

/**
 * Why `value` cannot be a name (a journal key, kind or owner, a fleet session id), or `undefined` when it can: 1 to
 * `max` characters of well-formed Unicode without control characters.
 *
 * @example
 * ```ts
 * import { UntrustedText } from "@lifeline/kernel"
 *
 * UntrustedText.nameProblem("turn-3/tool", 255) // undefined
 * UntrustedText.nameProblem("a\u0000b", 255) // "contains a control character (NUL, a line break, an escape, ...)"
 * ```
 *
 * @since 0.1.0
 * @category validation
 */
export const nameProblem = (value: unknown, max: number): string | undefined => internal.textProblem(value, max)

/**
 * Why `value` cannot be stored as a name or a key, or `undefined` when it can: as {@link nameProblem}, and with
 * `controls` true control characters are allowed (a key that names an entry already stored).
 *
 * @since 0.2.0
 * @category validation
 */
export const textProblem: (value: unknown, max: number, controls?: boolean) => string | undefined = internal.textProblem

/**
 * An instant for a message: ISO 8601, or the number itself when it is no date (`toISOString` throws on one out of
 * range).
 *
 * @since 0.2.0
 * @category combinators
 */
export const shownInstant: (millis: number) => string = internal.shownInstant

/**
 * Whether `text` takes at most `max` bytes in UTF-8, counted without encoding it and only as far as needed.
 *
 * @since 0.2.0
 * @category validation
 */
export const fitsUtf8: (text: string, max: number) => boolean = internal.fitsUtf8
