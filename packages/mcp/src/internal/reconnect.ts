/**
 * The restart loop behind `Reconnect.reconnecting`, on the Clock so that TestClock drives it: after each connection
 * that ended by itself, the next delay of the backoff (an Effect `Schedule`), until the budget is spent; a connection
 * that lived `stableAfter` starts the schedule afresh. The Promise face hands it a `connect` that knows nothing of
 * time.
 *
 * @internal
 */
import * as Bounds from "@lifeline/kernel/Bounds"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Pull from "effect/Pull"
import * as Schedule from "effect/Schedule"
import type * as Reconnect from "../Reconnect.js"

/**
 * The decoded options.
 *
 * @internal
 */
export interface Settings {
  readonly budget: number
  readonly initialDelay: Duration.Duration
  readonly factor: number
  readonly maxDelay: Duration.Duration
  readonly stableAfter: Duration.Duration
  readonly connectTimeout: Duration.Duration
}

/**
 * The options with their defaults, from the kernel's MCP profile of bounds.
 *
 * @internal
 */
export const decode = (options: Reconnect.ReconnectOptions): Settings => ({
  budget: options.restartBudget ?? Bounds.mcp.restartBudget,
  initialDelay: Duration.fromInputUnsafe(options.initialDelay ?? Bounds.mcp.restartInitialDelay),
  factor: options.factor ?? Bounds.mcp.restartFactor,
  maxDelay: Duration.fromInputUnsafe(options.maxDelay ?? Bounds.mcp.restartMaxDelay),
  stableAfter: Duration.fromInputUnsafe(options.stableAfter ?? Bounds.mcp.restartStableAfter),
  connectTimeout: Duration.fromInputUnsafe(options.connectTimeout ?? Bounds.mcp.restartConnectTimeout)
})

/**
 * How a connection ended: closed by the host (the loop ends), or lost (the server exited, or its transport failed).
 *
 * @internal
 */
export type End = { readonly _tag: "Closed" } | { readonly _tag: "Lost"; readonly error: Error }

/**
 * The backoff: `initialDelay`, times `factor` at each restart, capped at `maxDelay`; `budget` restarts, then done.
 *
 * @internal
 */
export const backoff = (settings: Settings): Schedule.Schedule<Duration.Duration, Error> =>
  Schedule.exponential(settings.initialDelay, settings.factor).pipe(
    Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.min(duration, settings.maxDelay))),
    Schedule.upTo({ times: settings.budget }),
    Schedule.setInputType<Error>()
  )

/**
 * What the loop tells its host, from its fiber (the callbacks must not throw).
 *
 * @internal
 */
export interface Hooks {
  /** Before the wait of a restart: `restart` counts from 1 since the last stable run. */
  readonly restarting: (event: Reconnect.RestartEvent) => void
}

/**
 * Runs connections one after another: `connect` resolves once a connection is up, to the wait for its end. Succeeds
 * when the host closed a connection; fails with the last error once the budget is spent. The first connection is the
 * caller's: the loop starts with the end of one that is up.
 *
 * @internal
 */
export const loop = (
  settings: Settings,
  first: Effect.Effect<End>,
  connect: Effect.Effect<Effect.Effect<End>, Error>,
  hooks: Hooks
): Effect.Effect<void, { readonly restarts: number; readonly error: Error }> =>
  Effect.gen(function*() {
    const schedule = backoff(settings)
    let step = yield* Schedule.toStep(schedule)
    let restarts = 0
    // Either a connection that is up (its end to wait for) or the error of an attempt that did not connect.
    let current: Effect.Effect<End> | Error = first
    while (true) {
      let error: Error
      if (current instanceof Error) {
        error = current
      } else {
        const since = yield* Clock.currentTimeMillis
        const end = yield* current
        if (end._tag === "Closed") return
        error = end.error
        // A stable run: the crash that ended it is the first of a new series, with the first delay.
        if ((yield* Clock.currentTimeMillis) - since >= Duration.toMillis(settings.stableAfter)) {
          step = yield* Schedule.toStep(schedule)
          restarts = 0
        }
      }
      const delay = yield* step(yield* Clock.currentTimeMillis, error).pipe(
        Effect.map(([, delay]) => Option.some(delay)),
        Pull.catchDone(() => Effect.succeedNone)
      )
      if (Option.isNone(delay)) return yield* Effect.fail({ restarts, error })
      restarts++
      hooks.restarting({ restart: restarts, delay: delay.value, delayMillis: Duration.toMillis(delay.value), error })
      yield* Effect.sleep(delay.value)
      const attempt = yield* Effect.exit(connect)
      current = Exit.isSuccess(attempt)
        ? attempt.value
        : Option.getOrElse(Exit.findErrorOption(attempt), () => new Error("the restart was interrupted"))
    }
  })
