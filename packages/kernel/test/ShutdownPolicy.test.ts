import { assert, describe, it } from "@effect/vitest"
import { DurationText, ShutdownPolicy } from "@lifeline/kernel"
import type { Config, SchemaIssue } from "effect"
import { ConfigProvider, Duration, Effect, Layer, Result, Schema } from "effect"

// An environment holding exactly `entries`. Effect 4's providers read an empty value as unset unless told otherwise;
// these tests are about the values themselves, so an empty one stays a value, as Effect 3's `fromMap` kept it.
const providerOf = (entries: ReadonlyArray<readonly [string, string]>) =>
  ConfigProvider.fromEnv({ env: Object.fromEntries(entries), preserveEmptyStrings: true })

const withEnv = (entries: ReadonlyArray<readonly [string, string]>) =>
  Effect.provideService(ConfigProvider.ConfigProvider, providerOf(entries))

const read = (entries: ReadonlyArray<readonly [string, string]>) => ShutdownPolicy.config.pipe(withEnv(entries))

// Effect 4's ConfigError wraps a SchemaError: its issues, each with the path it sits at and its message.
const invalidData = (error: Config.ConfigError): Array<{ path: string; message: string }> => {
  const collect = (issue: SchemaIssue.Issue, path: ReadonlyArray<PropertyKey>): Array<{
    path: string
    message: string
  }> => {
    switch (issue._tag) {
      case "Pointer":
        return collect(issue.issue, [...path, ...issue.path])
      case "Composite":
        return issue.issues.flatMap((inner) => collect(inner, path))
      default:
        return [{ path: path.map(String).join("."), message: new Schema.SchemaError(issue).message }]
    }
  }
  return error.cause._tag === "SchemaError" ? collect(error.cause.issue, []) : []
}

describe("ShutdownPolicy", () => {
  describe("constructors", () => {
    it("FailFast and Drain are tagged data with structural equality", () => {
      assert.strictEqual(ShutdownPolicy.FailFast()._tag, "FailFast")
      const policy = ShutdownPolicy.Drain({ timeout: Duration.seconds(3) })
      assert.isTrue(ShutdownPolicy.isDrain(policy))
      assert.isFalse(ShutdownPolicy.isFailFast(policy))
      assert.deepStrictEqual(policy, ShutdownPolicy.Drain({ timeout: Duration.millis(3000) }))
    })

    it("drain decodes any DurationText once", () => {
      const fromString = ShutdownPolicy.drain("3 seconds")
      const fromMillis = ShutdownPolicy.drain(3000)
      assert.isTrue(ShutdownPolicy.isDrain(fromString) && Duration.isDuration(fromString.timeout))
      assert.deepStrictEqual(fromString, fromMillis)
      assert.deepStrictEqual(fromString, ShutdownPolicy.Drain({ timeout: Duration.seconds(3) }))
    })

    it("$match covers both variants", () => {
      const describePolicy = ShutdownPolicy.Policy.$match({
        FailFast: () => "fail-fast",
        Drain: ({ timeout }) => `drain ${Duration.toMillis(timeout)}`
      })
      assert.strictEqual(describePolicy(ShutdownPolicy.FailFast()), "fail-fast")
      assert.strictEqual(describePolicy(ShutdownPolicy.drain("2 seconds")), "drain 2000")
    })
  })

  describe("layers", () => {
    it.effect("layerFailFast provides FailFast", () =>
      Effect.gen(function*() {
        const policy = yield* ShutdownPolicy.ShutdownPolicy
        assert.deepStrictEqual(policy, ShutdownPolicy.FailFast())
      }).pipe(Effect.provide(ShutdownPolicy.layerFailFast)))

    it.effect("layerDrain provides Drain with the decoded timeout", () =>
      Effect.gen(function*() {
        const policy = yield* ShutdownPolicy.ShutdownPolicy
        assert.deepStrictEqual(policy, ShutdownPolicy.Drain({ timeout: Duration.millis(1500) }))
      }).pipe(Effect.provide(ShutdownPolicy.layerDrain("1500 millis"))))

    it.effect("layerConfig reads the environment", () =>
      Effect.gen(function*() {
        const policy = yield* ShutdownPolicy.ShutdownPolicy
        assert.deepStrictEqual(policy, ShutdownPolicy.drain("3 seconds"))
      }).pipe(
        Effect.provide(
          ShutdownPolicy.layerConfig.pipe(
            Layer.provide(
              ConfigProvider.layer(
                providerOf([[ShutdownPolicy.POLICY_VARIABLE, "drain"], [
                  ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE,
                  "3 seconds"
                ]])
              )
            )
          )
        )
      ))

    it.effect("layerConfig fails with the ConfigError", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(Layer.build(ShutdownPolicy.layerConfig).pipe(Effect.scoped))
        assert.deepStrictEqual(invalidData(error).map((_) => _.path), [ShutdownPolicy.POLICY_VARIABLE])
      }).pipe(withEnv([[ShutdownPolicy.POLICY_VARIABLE, "graceful"]])))
  })

  describe("config", () => {
    it.effect("defaults to fail-fast when nothing is set (docs/lifecycle.md)", () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* read([]), ShutdownPolicy.FailFast())
      }))

    it.effect("fail-fast", () =>
      Effect.gen(function*() {
        assert.deepStrictEqual(yield* read([[ShutdownPolicy.POLICY_VARIABLE, "fail-fast"]]), ShutdownPolicy.FailFast())
      }))

    it.effect("fail-fast ignores a valid drain timeout", () =>
      Effect.gen(function*() {
        const policy = yield* read([[ShutdownPolicy.POLICY_VARIABLE, "fail-fast"], [
          ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE,
          "9 seconds"
        ]])
        assert.deepStrictEqual(policy, ShutdownPolicy.FailFast())
      }))

    it.effect("drain without a timeout defaults to 5 seconds", () =>
      Effect.gen(function*() {
        const policy = yield* read([[ShutdownPolicy.POLICY_VARIABLE, "drain"]])
        assert.deepStrictEqual(policy, ShutdownPolicy.Drain({ timeout: Duration.seconds(5) }))
        assert.deepStrictEqual(policy, ShutdownPolicy.Drain({ timeout: ShutdownPolicy.defaultDrainTimeout }))
      }))

    it.effect("drain with an Effect duration string or a compact one", () =>
      Effect.gen(function*() {
        for (
          const [text, millis] of [
            ["3 seconds", 3000],
            ["500 millis", 500],
            ["1 minute", 60_000],
            ["1.5 seconds", 1500],
            ["0 millis", 0],
            ["  2 seconds  ", 2000],
            ["3s", 3000],
            ["1.5s", 1500],
            ["250ms", 250]
          ] as const
        ) {
          const policy = yield* read([[ShutdownPolicy.POLICY_VARIABLE, "drain"], [
            ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE,
            text
          ]])
          assert.isTrue(ShutdownPolicy.isDrain(policy), text)
          if (ShutdownPolicy.isDrain(policy)) assert.strictEqual(Duration.toMillis(policy.timeout), millis, text)
        }
      }))

    it.effect("an unknown policy name is an InvalidData error naming the variable and the choices", () =>
      Effect.gen(function*() {
        for (const name of ["graceful", "Drain", "FAIL-FAST", "failfast", ""]) {
          const error = yield* Effect.flip(read([[ShutdownPolicy.POLICY_VARIABLE, name]]))
          const [issue, ...rest] = invalidData(error)
          assert.strictEqual(rest.length, 0, name)
          assert.strictEqual(issue?.path, ShutdownPolicy.POLICY_VARIABLE, name)
          assert.include(issue?.message, "fail-fast, drain", name)
          assert.include(String(error), ShutdownPolicy.POLICY_VARIABLE, name)
        }
      }))

    it.effect("a malformed drain timeout is an InvalidData error that shows the format", () =>
      Effect.gen(function*() {
        for (const text of ["3x", "three seconds", "3", "seconds", "3 fortnights", ""]) {
          const error = yield* Effect.flip(
            read([[ShutdownPolicy.POLICY_VARIABLE, "drain"], [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE, text]])
          )
          const [issue, ...rest] = invalidData(error)
          assert.strictEqual(rest.length, 0, text)
          assert.strictEqual(issue?.path, ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE, text)
          assert.include(issue?.message, "\"3 seconds\"", text)
          assert.include(issue?.message, `received "${text}"`, text)
        }
      }))

    it.effect("a negative drain timeout is rejected instead of being clamped to zero", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(
          read([[ShutdownPolicy.POLICY_VARIABLE, "drain"], [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE, "-3 seconds"]])
        )
        const [issue] = invalidData(error)
        assert.strictEqual(issue?.path, ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE)
        assert.include(issue?.message, "not negative")
      }))

    it.effect("a malformed drain timeout is reported with fail-fast too", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(
          read([[ShutdownPolicy.POLICY_VARIABLE, "fail-fast"], [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE, "3x"]])
        )
        assert.deepStrictEqual(invalidData(error).map((_) => _.path), [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE])
      }))

    it.effect("two bad values are reported together", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(
          read([[ShutdownPolicy.POLICY_VARIABLE, "nope"], [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE, "3x"]])
        )
        assert.sameMembers(invalidData(error).map((_) => _.path), [
          ShutdownPolicy.POLICY_VARIABLE,
          ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE
        ])
      }))
  })

  describe("resolve: the one rule for where the policy comes from", () => {
    const drainEnv: ReadonlyArray<readonly [string, string]> = [
      [ShutdownPolicy.POLICY_VARIABLE, "drain"],
      [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE, "10 seconds"]
    ]

    it.effect("option, else service, else environment, else fail-fast", () =>
      Effect.gen(function*() {
        const option = ShutdownPolicy.drain("1 second")
        assert.deepStrictEqual(yield* ShutdownPolicy.resolve(option), option)
        assert.deepStrictEqual(
          yield* ShutdownPolicy.resolve().pipe(Effect.provide(ShutdownPolicy.layerDrain("2 seconds"))),
          ShutdownPolicy.drain("2 seconds")
        )
        assert.deepStrictEqual(
          yield* ShutdownPolicy.resolve(option).pipe(Effect.provide(ShutdownPolicy.layerDrain("2 seconds"))),
          option
        )
        assert.deepStrictEqual(yield* ShutdownPolicy.resolve(), ShutdownPolicy.drain("10 seconds"))
        assert.deepStrictEqual(
          yield* ShutdownPolicy.resolve().pipe(
            withEnv([[ShutdownPolicy.POLICY_VARIABLE, "drain"], [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE, "4s"]])
          ),
          ShutdownPolicy.drain("4 seconds")
        )
        assert.deepStrictEqual(yield* ShutdownPolicy.resolve().pipe(withEnv([])), ShutdownPolicy.FailFast())
      }).pipe(withEnv(drainEnv)))

    it.effect("an invalid environment is a ConfigError, never a silent fail-fast; it is not read when not needed", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(ShutdownPolicy.resolve())
        assert.deepStrictEqual(invalidData(error).map((_) => _.path), [ShutdownPolicy.POLICY_VARIABLE])
        assert.deepStrictEqual(yield* ShutdownPolicy.resolve(ShutdownPolicy.FailFast()), ShutdownPolicy.FailFast())
      }).pipe(withEnv([[ShutdownPolicy.POLICY_VARIABLE, "graceful"]])))

    it("drainTimeout: the drain's timeout, zero under fail-fast", () => {
      assert.strictEqual(Duration.toMillis(ShutdownPolicy.drainTimeout(ShutdownPolicy.drain("10 seconds"))), 10_000)
      assert.strictEqual(Duration.toMillis(ShutdownPolicy.drainTimeout(ShutdownPolicy.FailFast())), 0)
    })
  })

  describe("what an invalid environment says (mutation testing)", () => {
    const why = (text: string) => {
      const refusal = Result.getFailure(DurationText.parse(text))
      assert.isTrue(refusal._tag === "Some")
      const message = refusal._tag === "Some" ? refusal.value : ""
      return message.slice(`not a duration: ${JSON.stringify(text)} (`.length, -`; use ${DurationText.forms})`.length)
    }

    it.effect("a malformed drain timeout: the parser's reason alone, between the accepted forms and the value", () =>
      Effect.gen(function*() {
        for (const [text, unsigned] of [["3x", "3x"], ["three seconds", "three seconds"], ["-3x", "3x"]] as const) {
          const error = yield* Effect.flip(
            read([[ShutdownPolicy.POLICY_VARIABLE, "drain"], [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE, text]])
          )
          assert.deepStrictEqual(invalidData(error), [{
            path: ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE,
            message: `Expected a duration such as "3 seconds", "500 millis", 3s or 500ms (${
              why(unsigned)
            }) but received ${JSON.stringify(text)}`
          }])
        }
      }))

    it.effect("a negative drain timeout, also with spaces around it, names the value as written", () =>
      Effect.gen(function*() {
        for (const text of ["-3 seconds", "  -3s "]) {
          const error = yield* Effect.flip(
            read([[ShutdownPolicy.POLICY_VARIABLE, "drain"], [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE, text]])
          )
          assert.deepStrictEqual(invalidData(error), [{
            path: ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE,
            message: `Expected a duration that is not negative but received ${JSON.stringify(text)}`
          }])
        }
      }))

    it.effect("an unknown policy name: the choices and the value", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(read([[ShutdownPolicy.POLICY_VARIABLE, "graceful"]]))
        assert.deepStrictEqual(invalidData(error), [{
          path: ShutdownPolicy.POLICY_VARIABLE,
          message: `Expected one of (fail-fast, drain) but received "graceful"`
        }])
      }))

    // A source that cannot be read (a secret store that is down) is reported alone: it is not about the values.
    const failing = (down: ReadonlyArray<string>, values: Record<string, string>) =>
      Effect.provideService(
        ConfigProvider.ConfigProvider,
        ConfigProvider.make((path) =>
          down.includes(String(path[0]))
            ? Effect.fail(new ConfigProvider.SourceError({ message: `${String(path[0])} is unreachable` }))
            : Effect.succeed(
              values[String(path[0])] === undefined ? undefined : ConfigProvider.makeValue(values[String(path[0])])
            )
        )
      )

    it.effect("a source that cannot be read is reported alone, whichever variable it was reading", () =>
      Effect.gen(function*() {
        const sourceMessage = (error: Config.ConfigError) =>
          error.cause._tag === "SourceError" ? error.cause.message : `not a SourceError: ${error.cause._tag}`
        const policyDown = yield* Effect.flip(
          ShutdownPolicy.config.pipe(
            failing([ShutdownPolicy.POLICY_VARIABLE], { [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "3x" })
          )
        )
        assert.strictEqual(sourceMessage(policyDown), `${ShutdownPolicy.POLICY_VARIABLE} is unreachable`)
        const timeoutDown = yield* Effect.flip(
          ShutdownPolicy.config.pipe(
            failing([ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE], { [ShutdownPolicy.POLICY_VARIABLE]: "nope" })
          )
        )
        assert.strictEqual(sourceMessage(timeoutDown), `${ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE} is unreachable`)
        const bothDown = yield* Effect.flip(
          ShutdownPolicy.config.pipe(
            failing([ShutdownPolicy.POLICY_VARIABLE, ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE], {})
          )
        )
        assert.strictEqual(sourceMessage(bothDown), `${ShutdownPolicy.POLICY_VARIABLE} is unreachable`)
        const timeoutOnly = yield* Effect.flip(
          ShutdownPolicy.config.pipe(
            failing([ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE], { [ShutdownPolicy.POLICY_VARIABLE]: "drain" })
          )
        )
        assert.strictEqual(sourceMessage(timeoutOnly), `${ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE} is unreachable`)
      }))
  })
})
