/**
 * Runs an effect as a journaled operation: recorded before it starts and when it ends, so that a crash in between
 * leaves an entry for `Recovery`, and a completed key is never run twice. (It was the module `JournalTrack`, with
 * `track` for `run`, which remains as a deprecated alias.)
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"
import * as internal from "./internal/journaledOperation.js"
import type { Journal } from "./Journal.js"
import type { JournalError } from "./JournalError.js"

/**
 * Options of {@link run}. With `result`, the operation's value is stored on completion, and running a key that is
 * already completed returns the stored value instead of running the operation again.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunOptions<A, I> {
  readonly result?: Schema.Codec<A, I> | undefined
}

/**
 * Runs `effect` as a journaled operation: `begin` before it starts (durably, under the current `JournalClaim.Owner`),
 * `complete` with its value after, `fail` with its error or defect.
 *
 * If the key is already known, the effect does not run: a completed key returns its stored value when `result` is
 * given and fails with a `Conflict` otherwise; an unfinished key (running here, or left by a crash and awaiting
 * `Recovery`) fails with a `Conflict`. A `Failed` key is retried, as one more attempt.
 *
 * Interruption leaves the entry `InFlight`: the operation did not end, and whether it had an effect is unknown, which
 * is exactly what a crash or a kill leaves behind, so both are recovered the same way. A failure with a kernel
 * `ShutdownError` (a call cut off by the connection's shutdown) is treated the same, not as the operation's failure.
 * The shutdown, which knows better, records it (`Recovery.recordShutdown`: `NeedsRecovery` after a drain timeout,
 * `Failed` after a fail-fast stop); without that, `Recovery` decides at the next start.
 *
 * If recording the end fails, the caller gets a `JournalError`, since the journal then disagrees with what happened:
 * when `complete` fails, that error (the operation's value is lost to the caller); when `fail` fails, a `JournalError`
 * with the same `reason` whose `cause` is the operation's own failure (its `Cause`), so neither is lost. In both cases
 * the entry stays unfinished and `Recovery` decides at the next start. An error too large to store
 * (`maxPayloadBytes`) is recorded as its message alone.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { JournaledOperation } from "@lifeline/journal"
 *
 * const callTool = Effect.succeed({ ok: true }).pipe(
 *   JournaledOperation.run("tool", "turn-1/tool-0", { name: "search" }, {
 *     result: Schema.Struct({ ok: Schema.Boolean })
 *   })
 * )
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const run: {
  <A, I>(
    kind: string,
    key: string,
    payload: unknown,
    options: RunOptions<A, I> & { readonly result: Schema.Codec<A, I> }
  ): <E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | JournalError, R | Journal>
  (
    kind: string,
    key: string,
    payload: unknown,
    options?: RunOptions<any, any>
  ): <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | JournalError, R | Journal>
} = internal.run
