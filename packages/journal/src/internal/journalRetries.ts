/**
 * The body of `Journal.withRecordRetries`: a journal whose end records are retried while its storage cannot be
 * reached.
 *
 * @internal
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Journal from "../Journal.js"
import type { JournalError } from "../JournalError.js"

/** The pause between two tries of an end record. @internal */
export const recordRetryInterval: Duration.Input = "500 millis"

/** @internal */
export const withRecordRetries = (
  journal: Journal.Journal.Service,
  window: Duration.Input
): Journal.Journal.Service => {
  const recording = <A>(step: Effect.Effect<A, JournalError>) =>
    Effect.retry(step, {
      while: (error) => error.reason === "Storage",
      schedule: Schedule.spaced(recordRetryInterval).pipe(Schedule.upTo({ duration: window }))
    })
  return {
    ...journal,
    complete: (key, result) => recording(journal.complete(key, result)),
    fail: (key, error, guard) => recording(journal.fail(key, error, guard))
  }
}
