/**
 * What a peer does with work in flight when it stops: fail it at once (`FailFast`, the default) or let it finish until
 * a deadline (`Drain`). {@link resolve} is the one rule for where a connection's policy comes from.
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import * as Bounds from "./Bounds.js"
import * as DurationText from "./DurationText.js"

/**
 * The shutdown policy: `FailFast` or `Drain` until `timeout`, then the rest cut off as under `FailFast`
 * (docs/lifecycle.md, "stop").
 *
 * @since 0.1.0
 * @category models
 */
export type Policy = Data.TaggedEnum<{
  FailFast: {}
  Drain: { readonly timeout: Duration.Duration }
}>

/**
 * Constructors, `$is` and `$match` for {@link Policy}.
 *
 * @example
 * ```ts
 * import { ShutdownPolicy } from "@lifeline/kernel"
 *
 * const describe = ShutdownPolicy.Policy.$match({
 *   FailFast: () => "fail at once",
 *   Drain: ({ timeout }) => `drain for ${timeout}`
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const Policy = Data.taggedEnum<Policy>()

/**
 * Fail everything in flight at once.
 *
 * @example
 * ```ts
 * import { ShutdownPolicy } from "@lifeline/kernel"
 *
 * const policy = ShutdownPolicy.FailFast()
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const FailFast: (args: void) => Policy = Policy.FailFast

/**
 * Let work in flight finish for at most `timeout`, then fail the rest.
 *
 * @example
 * ```ts
 * import { Duration } from "effect"
 * import { ShutdownPolicy } from "@lifeline/kernel"
 *
 * const policy = ShutdownPolicy.Drain({ timeout: Duration.seconds(3) })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const Drain: (args: { readonly timeout: Duration.Duration }) => Policy = Policy.Drain

/**
 * `Drain` from any `Duration.Input`, decoded once here. A negative input is a zero timeout.
 *
 * @example
 * ```ts
 * import { ShutdownPolicy } from "@lifeline/kernel"
 *
 * const policy = ShutdownPolicy.drain("3 seconds")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const drain = (timeout: Duration.Input): Policy =>
  Drain({ timeout: Duration.max(Duration.fromInputUnsafe(timeout), Duration.zero) })

/**
 * @since 0.1.0
 * @category models
 */
export const isFailFast: (u: unknown) => u is Extract<Policy, { readonly _tag: "FailFast" }> = Policy.$is("FailFast")

/**
 * @since 0.1.0
 * @category models
 */
export const isDrain: (u: unknown) => u is Extract<Policy, { readonly _tag: "Drain" }> = Policy.$is("Drain")

/**
 * The policy a peer reads in its shutdown finalizer. The service is the {@link Policy} value itself.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ShutdownPolicy } from "@lifeline/kernel"
 *
 * const program = Effect.gen(function*() {
 *   const policy = yield* ShutdownPolicy.ShutdownPolicy
 *   return policy._tag
 * }).pipe(Effect.provide(ShutdownPolicy.layerDrain("2 seconds")))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class ShutdownPolicy extends Context.Service<ShutdownPolicy, Policy>()("@lifeline/kernel/ShutdownPolicy") {}

/**
 * The environment variable naming the policy: `fail-fast` or `drain`.
 *
 * @since 0.1.0
 * @category models
 */
export const POLICY_VARIABLE = "LIFELINE_SHUTDOWN_POLICY"

/**
 * The environment variable holding the drain timeout, read with `DurationText.parse`: a compact duration (`4s`,
 * `250ms`, `1.5s`, `1m30s`) or Effect's form (`3 seconds`, `500 millis`). A number without a unit (but `0`), a negative
 * duration and `Infinity` are refused.
 *
 * @since 0.1.0
 * @category models
 */
export const DRAIN_TIMEOUT_VARIABLE = "LIFELINE_DRAIN_TIMEOUT"

/**
 * The drain timeout used when `LIFELINE_DRAIN_TIMEOUT` is not set.
 *
 * @since 0.1.0
 * @category models
 */
export const defaultDrainTimeout: Duration.Duration = Bounds.drainTimeout

// An invalid value of `variable`, reported at its path like the errors `Config.schema` makes.
const invalid = (variable: string, text: string, message: string): Config.ConfigError =>
  new Config.ConfigError(
    new Schema.SchemaError(new SchemaIssue.Pointer([variable], new SchemaIssue.InvalidValue({ message }, text)))
  )

// The part of a `DurationText.parse` refusal that says why; its message reads
// `not a duration: "<text>" (<why>; use <forms>)`, and the variable's message names the forms itself.
const whyOf = (text: string, refusal: string): string => {
  const prefix = `not a duration: ${JSON.stringify(text)} (`
  const suffix = `; use ${DurationText.forms})`
  return refusal.startsWith(prefix) && refusal.endsWith(suffix)
    ? refusal.slice(prefix.length, refusal.length - suffix.length)
    : refusal
}

// A negative duration is refused by name: a timeout would treat it as zero, a typo that turns drain into fail-fast.
const drainTimeoutConfigRaw: Config.Config<Duration.Duration> = Config.schema(
  Schema.String.annotate({
    description: "How long the drain policy lets in-flight work finish, e.g. 3s, 500ms or \"3 seconds\""
  }),
  DRAIN_TIMEOUT_VARIABLE
).pipe(
  Config.mapEffect((text) => {
    const trimmed = text.trim()
    // The parser refuses any leading "-" as negative; what follows it says whether this is a negative duration or
    // no duration at all ("-3x").
    const negative = trimmed.startsWith("-")
    const unsigned = negative ? trimmed.slice(1) : text
    return Result.match(DurationText.parse(unsigned), {
      onFailure: (refusal) =>
        Effect.fail(invalid(
          DRAIN_TIMEOUT_VARIABLE,
          text,
          `Expected a duration such as "3 seconds", "500 millis", 3s or 500ms (${whyOf(unsigned, refusal)}) ` +
            `but received ${JSON.stringify(text)}`
        )),
      onSuccess: (duration) =>
        negative
          ? Effect.fail(
            invalid(
              DRAIN_TIMEOUT_VARIABLE,
              text,
              `Expected a duration that is not negative but received ${JSON.stringify(text)}`
            )
          )
          : Effect.succeed(duration)
    })
  })
)

/**
 * `LIFELINE_DRAIN_TIMEOUT` when it is set, validated as the policy reads it (an invalid value fails with the
 * `ConfigError` that names it); `None` when it is not set. For a drain of its own that honours the operator's choice
 * without the policy's default: the fleet's operations (`ExtensionSession`'s `drainTimeout`).
 *
 * @since 0.2.0
 * @category models
 */
export const drainTimeoutVariable: Config.Config<Option.Option<Duration.Duration>> = Config.option(
  drainTimeoutConfigRaw
)

const drainTimeoutConfig: Config.Config<Duration.Duration> = drainTimeoutConfigRaw.pipe(
  Config.withDefault(defaultDrainTimeout)
)

const policyNames = ["fail-fast", "drain"] as const

const policyName: Config.Config<"fail-fast" | "drain"> = Config.schema(
  Schema.String.annotate({
    description: "What a peer does with in-flight work when it stops: fail-fast (default) or drain"
  }),
  POLICY_VARIABLE
).pipe(
  Config.mapEffect((text) => {
    const name = policyNames.find((name) => name === text)
    return name === undefined
      ? Effect.fail(
        invalid(
          POLICY_VARIABLE,
          text,
          `Expected one of (${policyNames.join(", ")}) but received ${JSON.stringify(text)}`
        )
      )
      : Effect.succeed(name)
  }),
  Config.withDefault("fail-fast" as const)
)

// Config.all stops at the first invalid value; reading each as a Result lets `config` report both together.
const settled = <A>(config: Config.Config<A>): Config.Config<Result.Result<A, Config.ConfigError>> =>
  config.pipe(
    Config.map(Result.succeed),
    Config.orElse((error) => Config.succeed(Result.fail(error)))
  )

const variables = Schema.Struct({ [POLICY_VARIABLE]: Schema.String, [DRAIN_TIMEOUT_VARIABLE]: Schema.String })

// Two invalid values become one error with both issues, each at its variable's path. A source that could not be read
// is reported alone: it is not about the values.
const together = (first: Config.ConfigError, second: Config.ConfigError): Config.ConfigError =>
  first.cause._tag === "SchemaError" && second.cause._tag === "SchemaError"
    ? new Config.ConfigError(
      new Schema.SchemaError(new SchemaIssue.Composite(variables.ast, [first.cause.issue, second.cause.issue]))
    )
    : first.cause._tag === "SourceError"
    ? first
    : second

/**
 * Reads the policy from `LIFELINE_SHUTDOWN_POLICY` (default `fail-fast`) and `LIFELINE_DRAIN_TIMEOUT`. Both are
 * validated whichever policy is chosen, so a bad timeout is reported before someone switches to `drain`.
 *
 * @example
 * ```ts
 * import { ConfigProvider, Effect } from "effect"
 * import { ShutdownPolicy } from "@lifeline/kernel"
 *
 * const policy = ShutdownPolicy.config.pipe(
 *   Effect.provideService(
 *     ConfigProvider.ConfigProvider,
 *     ConfigProvider.fromEnv({ env: { LIFELINE_SHUTDOWN_POLICY: "drain", LIFELINE_DRAIN_TIMEOUT: "3 seconds" } })
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const config: Config.Config<Policy> = Config.all([settled(policyName), settled(drainTimeoutConfig)]).pipe(
  Config.mapEffect(([name, timeout]) =>
    Result.isFailure(name)
      ? Effect.fail(Result.isFailure(timeout) ? together(name.failure, timeout.failure) : name.failure)
      : Result.isFailure(timeout)
      ? Effect.fail(timeout.failure)
      : Effect.succeed(name.success === "drain" ? Drain({ timeout: timeout.success }) : FailFast())
  )
)

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (policy: Policy): Layer.Layer<ShutdownPolicy> => Layer.succeed(ShutdownPolicy, policy)

/**
 * @example
 * ```ts
 * import { ShutdownPolicy } from "@lifeline/kernel"
 *
 * const PolicyLive = ShutdownPolicy.layerFailFast
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFailFast: Layer.Layer<ShutdownPolicy> = layer(FailFast())

/**
 * @example
 * ```ts
 * import { ShutdownPolicy } from "@lifeline/kernel"
 *
 * const PolicyLive = ShutdownPolicy.layerDrain("3 seconds")
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerDrain = (timeout: Duration.Input): Layer.Layer<ShutdownPolicy> => layer(drain(timeout))

/**
 * The policy read from the environment with {@link config}; fails with a `ConfigError` naming the variable when a
 * value is invalid.
 *
 * @example
 * ```ts
 * import { ShutdownPolicy } from "@lifeline/kernel"
 *
 * // LIFELINE_SHUTDOWN_POLICY=drain LIFELINE_DRAIN_TIMEOUT=3s node app.js
 * const PolicyLive = ShutdownPolicy.layerConfig
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<ShutdownPolicy, Config.ConfigError> = Layer.effect(ShutdownPolicy, config)

/**
 * The one rule for where a connection's policy comes from (`Connection.make` uses it): `policy` when given, else the
 * {@link ShutdownPolicy} service, else the environment read with {@link config}, else fail-fast. An invalid value in
 * the environment fails with the `ConfigError` that names it. Why a rule: docs/shutdown.md, "Where the policy comes
 * from".
 *
 * @example
 * ```ts
 * import { ConfigProvider, Effect } from "effect"
 * import { ShutdownPolicy } from "@lifeline/kernel"
 *
 * const fromEnvironment = ShutdownPolicy.resolve().pipe(
 *   Effect.provideService(
 *     ConfigProvider.ConfigProvider,
 *     ConfigProvider.fromEnv({ env: { LIFELINE_SHUTDOWN_POLICY: "drain", LIFELINE_DRAIN_TIMEOUT: "10 seconds" } })
 *   )
 * ) // Drain({ timeout: 10 seconds })
 * const fromCode = ShutdownPolicy.resolve(ShutdownPolicy.FailFast()) // FailFast, whatever the environment says
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const resolve = (policy?: Policy | undefined): Effect.Effect<Policy, Config.ConfigError> =>
  policy !== undefined ? Effect.succeed(policy) : Effect.flatMap(
    Effect.serviceOption(ShutdownPolicy),
    Option.match({ onSome: Effect.succeed, onNone: () => config })
  )

/**
 * How long `policy` lets work in flight finish: the drain timeout, zero under fail-fast.
 *
 * @example
 * ```ts
 * import { ShutdownPolicy } from "@lifeline/kernel"
 *
 * ShutdownPolicy.drainTimeout(ShutdownPolicy.drain("10 seconds")) // 10 seconds
 * ShutdownPolicy.drainTimeout(ShutdownPolicy.FailFast()) // zero
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const drainTimeout = (policy: Policy): Duration.Duration =>
  policy._tag === "Drain" ? policy.timeout : Duration.zero
