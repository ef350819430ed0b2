/**
 * What a peer does with work in flight when it stops: fail it at once (`FailFast`, seed 003's default) or let it
 * finish until a deadline (`Drain`). The policy is plain data, provided as a service so an app picks it per
 * environment without code changes.
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

/**
 * The shutdown policy.
 *
 * - `FailFast`: every pending outbound call fails at once with a `ShutdownError`, inbound handlers are interrupted,
 *   the transport is closed. Finishes in milliseconds whatever the other side does.
 * - `Drain`: new inbound requests are refused, in-flight work in both directions may finish until `timeout` has
 *   passed, then whatever is left is failed as in `FailFast` and reported as cut off.
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
 * `Drain` from any `DurationInput`, decoded once here.
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
export const drain = (timeout: Duration.DurationInput): Policy => Drain({ timeout: Duration.decode(timeout) })

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
export class ShutdownPolicy extends Context.Tag("@lifeline/kernel/ShutdownPolicy")<ShutdownPolicy, Policy>() {}

/**
 * The environment variable naming the policy: `fail-fast` or `drain`.
 *
 * @since 0.1.0
 * @category models
 */
export const POLICY_VARIABLE = "LIFELINE_SHUTDOWN_POLICY"

/**
 * The environment variable holding the drain timeout, as an Effect duration string (`3 seconds`, `500 millis`).
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
export const defaultDrainTimeout: Duration.Duration = Duration.seconds(5)

// Config.duration's parser, with a message that shows the expected format, and negative values rejected: Duration
// would silently clamp "-3 seconds" to zero, which reads like a typo that turned drain into fail-fast.
const drainTimeout: Config.Config<Duration.Duration> = Config.string(DRAIN_TIMEOUT_VARIABLE).pipe(
  Config.mapOrFail((text) => {
    const trimmed = text.trim()
    return Option.match(Duration.decodeUnknown(trimmed), {
      onNone: () =>
        Either.left(
          ConfigError.InvalidData(
            [],
            `Expected a duration such as "3 seconds" or "500 millis" (a number, a space, then nanos, micros, millis, ` +
              `seconds, minutes, hours, days or weeks) but received "${text}"`
          )
        ),
      onSome: (duration) =>
        trimmed.startsWith("-")
          ? Either.left(ConfigError.InvalidData([], `Expected a duration that is not negative but received "${text}"`))
          : Either.right(duration)
    })
  }),
  Config.withDefault(defaultDrainTimeout),
  Config.withDescription("How long the drain policy lets in-flight work finish, e.g. \"3 seconds\"")
)

const policyName: Config.Config<"fail-fast" | "drain"> = Config.literal("fail-fast", "drain")(POLICY_VARIABLE).pipe(
  Config.withDefault("fail-fast" as const),
  Config.withDescription("What a peer does with in-flight work when it stops: fail-fast (default) or drain")
)

/**
 * Reads the policy from `LIFELINE_SHUTDOWN_POLICY` (`fail-fast` or `drain`, default `fail-fast`) and
 * `LIFELINE_DRAIN_TIMEOUT` (default 5 seconds). Both are validated whichever policy is chosen, so a bad timeout is
 * reported when it is written, not on the day someone switches to `drain`; invalid values in both are reported
 * together.
 *
 * @example
 * ```ts
 * import { ConfigProvider, Effect } from "effect"
 * import { ShutdownPolicy } from "@lifeline/kernel"
 *
 * const policy = ShutdownPolicy.config.pipe(
 *   Effect.withConfigProvider(
 *     ConfigProvider.fromMap(new Map([["LIFELINE_SHUTDOWN_POLICY", "drain"], ["LIFELINE_DRAIN_TIMEOUT", "3 seconds"]]))
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const config: Config.Config<Policy> = Config.all([policyName, drainTimeout]).pipe(
  Config.map(([name, timeout]) => name === "drain" ? Drain({ timeout }) : FailFast())
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
export const layerDrain = (timeout: Duration.DurationInput): Layer.Layer<ShutdownPolicy> => layer(drain(timeout))

/**
 * The policy read from the environment with {@link config}; fails with a `ConfigError` naming the variable when a
 * value is invalid.
 *
 * @example
 * ```ts
 * import { ShutdownPolicy } from "@lifeline/kernel"
 *
 * // LIFELINE_SHUTDOWN_POLICY=drain LIFELINE_DRAIN_TIMEOUT="3 seconds" node app.js
 * const PolicyLive = ShutdownPolicy.layerConfig
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<ShutdownPolicy, ConfigError.ConfigError> = Layer.effect(ShutdownPolicy, config)
