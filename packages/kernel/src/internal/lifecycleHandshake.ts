/**
 * The handshake on a lifecycle: `Starting → Initializing → Ready`, or `Failed` with what went wrong, bounded by a
 * Clock timeout.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Lifecycle from "../Lifecycle.js"
import type { IllegalTransition } from "./lifecycleState.js"
import { Failed, State } from "./lifecycleState.js"

/**
 * The handshake did not finish within its timeout; the lifecycle is `Failed` with this error.
 *
 * @since 0.1.0
 * @category errors
 */
export class HandshakeTimeout extends Schema.TaggedError<HandshakeTimeout>("@lifeline/kernel/HandshakeTimeout")(
  "HandshakeTimeout",
  { timeoutMillis: Schema.Number }
) {
  override get message(): string {
    return `the handshake did not finish within ${this.timeoutMillis} ms`
  }
}

/** @internal */
export const runHandshake = <A, E extends Lifecycle.Failure, R>(
  lifecycle: Lifecycle.Lifecycle,
  handshake: Effect.Effect<A, E, R>,
  timeout: Duration.Input
): Effect.Effect<A, E | HandshakeTimeout | IllegalTransition, R> => {
  // Effect 4 durations may be negative; a negative timeout is a zero one, as it was with Effect 3.
  const duration = Duration.max(Duration.fromInputUnsafe(timeout), Duration.zero)
  const timeoutMillis = Duration.toMillis(duration)
  return Effect.gen(function*() {
    yield* lifecycle.transition(State.Initializing(), { from: "Starting" })
    const result = yield* handshake.pipe(
      Effect.timeoutOrElse({ duration, orElse: () => Effect.fail(new HandshakeTimeout({ timeoutMillis })) }),
      Effect.tapError((error: E | HandshakeTimeout) =>
        Effect.ignore(lifecycle.transition(Failed({ error }), { from: "Initializing" }))
      )
    )
    yield* lifecycle.transition(State.Ready(), { from: "Initializing" })
    return result
  }).pipe(Effect.withSpan("Lifecycle.runHandshake", { attributes: { timeoutMillis } }))
}
