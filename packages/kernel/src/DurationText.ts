/**
 * Durations as people type them, on a command line or in an environment variable: the compact forms `250ms`, `1.5s`,
 * `1m30s` (as `Duration.format` prints them), and Effect's own `1500 millis`, the only ones `Config.Duration` reads.
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import * as SchemaTransformation from "effect/SchemaTransformation"

/**
 * Effect's unit names (`Duration.Unit`), by every spelling {@link parse} reads.
 */
const units: Record<string, "nanos" | "micros" | "millis" | "seconds" | "minutes" | "hours" | "days" | "weeks"> = {
  ns: "nanos",
  nano: "nanos",
  nanos: "nanos",
  us: "micros",
  "µs": "micros", // U+00B5 MICRO SIGN, as `Duration.format` writes it
  "μs": "micros", // U+03BC GREEK SMALL LETTER MU
  micro: "micros",
  micros: "micros",
  ms: "millis",
  milli: "millis",
  millis: "millis",
  s: "seconds",
  second: "seconds",
  seconds: "seconds",
  m: "minutes",
  minute: "minutes",
  minutes: "minutes",
  h: "hours",
  hour: "hours",
  hours: "hours",
  d: "days",
  day: "days",
  days: "days",
  w: "weeks",
  week: "weeks",
  weeks: "weeks"
}

/** One `<number><unit>` with optional blanks around and between; the number may have a fraction. */
const component = /\s*(\d+(?:\.\d+)?|\.\d+)\s*([A-Za-zµμ]*)\s*/y

/**
 * The forms {@link parse} reads, for an error message or a usage text.
 *
 * @since 0.1.0
 * @category models
 */
export const forms = `250ms, 4s, 1.5s, 2m, 1h, 1m30s, or Effect's "1500 millis", "4 seconds"`

/**
 * How {@link parse} reads a number without a unit. By default it is refused: `--timeout 5` could mean anything.
 *
 * @since 0.1.0
 * @category models
 */
export interface ParseOptions {
  /** The unit of a bare number, e.g. `"millis"` for a flag whose name says so (`--llm-ms 800`). Default: refused. */
  readonly unitless?: "millis" | "seconds" | undefined
}

/**
 * Reads a duration as a person types it: `<number><unit>` parts (a fraction allowed, a blank between allowed) that add
 * up, the unit short (`ms`, `s`, `m`, ...) or Effect's name; `0` alone is zero. Refused with a message that says why:
 * no unit (unless {@link ParseOptions.unitless}), an unknown unit, a negative duration, `Infinity`.
 *
 * @example
 * ```ts
 * import { Duration, Result } from "effect"
 * import { DurationText } from "@lifeline/kernel"
 *
 * Result.map(DurationText.parse("1.5s"), Duration.toMillis) // Result.succeed(1500)
 * Result.map(DurationText.parse("1500 millis"), Duration.toMillis) // Result.succeed(1500)
 * Result.map(DurationText.parse("800", { unitless: "millis" }), Duration.toMillis) // Result.succeed(800)
 * DurationText.parse("4x") // Result.fail('not a duration: "4x" (unknown unit "x"; ...)')
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const parse = (text: string, options?: ParseOptions): Result.Result<Duration.Duration, string> => {
  const refuse = (why: string) => Result.fail(`not a duration: ${JSON.stringify(text)} (${why}; use ${forms})`)
  const trimmed = text.trim()
  if (trimmed === "") return refuse("it is empty")
  if (trimmed.startsWith("-")) return refuse("it is negative")
  if (/^\+?infinity$/i.test(trimmed)) return refuse("it has no end")
  if (trimmed === "0") return Result.succeed(Duration.zero)
  let total = Duration.zero
  let at = 0
  component.lastIndex = 0
  while (at < trimmed.length) {
    component.lastIndex = at
    const match = component.exec(trimmed)
    if (match === null || match[0] === "") return refuse(`unexpected ${JSON.stringify(trimmed.slice(at))}`)
    at = component.lastIndex
    const [, digits, word] = match
    const unit = word === "" ? options?.unitless : Object.hasOwn(units, word) ? units[word] : undefined
    if (unit === undefined) {
      return refuse(word === "" ? `${digits} has no unit` : `unknown unit ${JSON.stringify(word)}`)
    }
    // Effect's own reader, so fractions of every unit come out as it computes them ("1.5 seconds" is 1500 ms).
    const value = digits.startsWith(".") ? `0${digits}` : digits
    total = Duration.sum(total, Duration.fromInputUnsafe(`${value} ${unit}` as Duration.Input))
  }
  return Duration.isFinite(total) ? Result.succeed(total) : refuse("it is too large")
}

/**
 * A string read with {@link parse}, decoded to a `Duration`; encoded as `Duration.format` writes it (`1s 500ms`),
 * which {@link parse} reads back. For `Config.schema` and wherever a duration comes as text.
 *
 * @example
 * ```ts
 * import { Config } from "effect"
 * import { DurationText } from "@lifeline/kernel"
 *
 * const timeout = Config.schema(DurationText.FromString, "REQUEST_TIMEOUT")
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const FromString: Schema.decodeTo<Schema.Duration, Schema.String> = Schema.String.annotate({
  expected: `a duration such as ${forms}`
}).pipe(
  Schema.decodeTo(
    Schema.Duration,
    SchemaTransformation.transformEffect<Duration.Duration, string>({
      decode: (text, options) =>
        Result.match(parse(text), {
          onFailure: (message) => Effect.fail(new SchemaIssue.InvalidValue({ message }, text, options)),
          onSuccess: Effect.succeed
        }),
      encode: (duration) => Effect.succeed(Duration.format(duration))
    })
  )
)

/**
 * Reads the variable `name` (a `Config` path) with {@link parse}: an invalid value fails with a `ConfigError` whose
 * message says what was read and which forms are accepted.
 *
 * @example
 * ```ts
 * import { Config, ConfigProvider, Duration, Effect } from "effect"
 * import { DurationText } from "@lifeline/kernel"
 *
 * const program = DurationText.config("DRAIN_TIMEOUT").pipe(
 *   Config.withDefault(Duration.seconds(5)),
 *   Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env: { DRAIN_TIMEOUT: "4s" } }))
 * ) // 4 seconds
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const config = (name: string): Config.Config<Duration.Duration> => Config.schema(FromString, name)
