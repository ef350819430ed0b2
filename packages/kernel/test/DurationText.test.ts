import { assert, describe, it } from "@effect/vitest"
import { DurationText } from "@lifeline/kernel"
import { Config, ConfigProvider, Duration, Effect, Result, Schema } from "effect"

const millis = (text: string, options?: DurationText.ParseOptions) =>
  Result.map(DurationText.parse(text, options), Duration.toMillis)

const refusal = (text: string, options?: DurationText.ParseOptions): string =>
  Result.match(DurationText.parse(text, options), {
    onFailure: (message) => message,
    onSuccess: (duration) => assert.fail(`${text} read as ${Duration.format(duration)}`)
  })

describe("DurationText", () => {
  it("reads the compact forms a command-line user types", () => {
    const cases: ReadonlyArray<readonly [string, number]> = [
      ["250ms", 250],
      ["1500ms", 1500],
      ["4s", 4000],
      ["1.5s", 1500],
      [".5s", 500],
      ["2m", 120_000],
      ["1h", 3_600_000],
      ["1d", 86_400_000],
      ["1w", 604_800_000],
      ["1m30s", 90_000],
      ["1h 30m", 5_400_000],
      ["2500us", 2.5],
      ["2500µs", 2.5],
      ["1000000ns", 1],
      ["  4s  ", 4000],
      ["4 s", 4000],
      ["0", 0],
      ["0ms", 0]
    ]
    for (const [text, expected] of cases) assert.deepStrictEqual(millis(text), Result.succeed(expected), text)
  })

  it("reads Effect's own forms, and what Duration.format prints", () => {
    const cases: ReadonlyArray<readonly [string, number]> = [
      ["1500 millis", 1500],
      ["4 seconds", 4000],
      ["1 second", 1000],
      ["1.5 seconds", 1500],
      ["3 minutes", 180_000],
      ["2 hours", 7_200_000],
      ["1 day", 86_400_000],
      ["500000 nanos", 0.5],
      ["10micros", 0.01]
    ]
    for (const [text, expected] of cases) assert.deepStrictEqual(millis(text), Result.succeed(expected), text)
    for (const duration of [Duration.millis(1500), Duration.minutes(90), Duration.nanos(1500n), Duration.zero]) {
      assert.deepStrictEqual(millis(Duration.format(duration)), Result.succeed(Duration.toMillis(duration)))
    }
  })

  it("refuses what is not a duration, saying why and which forms it reads", () => {
    assert.include(refusal("4x"), `unknown unit "x"`)
    assert.include(refusal("4x"), "250ms, 4s, 1.5s")
    assert.include(refusal("1500"), "1500 has no unit")
    assert.include(refusal("-3 seconds"), "negative")
    assert.include(refusal("-3s"), "negative")
    assert.include(refusal("Infinity"), "no end")
    assert.include(refusal(""), "empty")
    assert.include(refusal("s"), `unexpected "s"`)
    assert.include(refusal("4s!"), `unexpected "!"`)
    assert.include(refusal("1e3ms"), `unknown unit "e"`)
    assert.include(refusal("4 Seconds"), `unknown unit "Seconds"`)
    assert.include(refusal(`${"9".repeat(400)}ms`), "too large")
  })

  it("reads a bare number in the unit the caller names", () => {
    assert.deepStrictEqual(millis("800", { unitless: "millis" }), Result.succeed(800))
    assert.deepStrictEqual(millis("2", { unitless: "seconds" }), Result.succeed(2000))
    assert.deepStrictEqual(millis("1.5s", { unitless: "millis" }), Result.succeed(1500))
  })

  it("FromString decodes as parse does and encodes as Duration.format", () => {
    assert.deepStrictEqual(
      Result.map(Schema.decodeUnknownResult(DurationText.FromString)("4s"), Duration.toMillis),
      Result.succeed(4000)
    )
    assert.isTrue(Result.isFailure(Schema.decodeUnknownResult(DurationText.FromString)("4x")))
    assert.strictEqual(Schema.encodeSync(DurationText.FromString)(Duration.millis(1500)), "1s 500ms")
  })

  it.effect("config reads an environment variable, and names it when the value is invalid", () =>
    Effect.gen(function*() {
      const read = (env: Record<string, string>) =>
        DurationText.config("DRAIN_TIMEOUT").pipe(
          Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env }))
        )
      assert.strictEqual(Duration.toMillis(yield* read({ DRAIN_TIMEOUT: "4s" })), 4000)
      assert.strictEqual(Duration.toMillis(yield* read({ DRAIN_TIMEOUT: "1500 millis" })), 1500)
      const error = yield* Effect.flip(read({ DRAIN_TIMEOUT: "soon" }))
      assert.instanceOf(error, Config.ConfigError)
      assert.include(String(error), "DRAIN_TIMEOUT")
      assert.include(String(error), `not a duration: "soon"`)
    }))
})
