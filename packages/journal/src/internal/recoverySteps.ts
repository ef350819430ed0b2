/** @internal */
import * as UntrustedText from "@lifeline/kernel/UntrustedText"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type { Journal } from "../Journal.js"
import type * as JournalEntry from "../JournalEntry.js"
import type * as JournalError from "../JournalError.js"
import type * as ProcessRecord from "../ProcessRecord.js"
import type * as Recovery from "../Recovery.js"

// The steps `Recovery.run` and `ProcessRecord.reapOrphans` share: what one entry came to, and how its end is recorded.
/** @internal */
export interface Outcome {
  readonly resumed?: JournalEntry.Entry
  readonly failed?: JournalEntry.Entry
  readonly error?: Recovery.EntryError
  readonly skipped?: JournalEntry.Entry
  readonly reaped?: { readonly entry: JournalEntry.Entry; readonly outcome: ProcessRecord.ReapOutcome }
}

/** @internal */
export const toReport = (outcomes: ReadonlyArray<Outcome>): Recovery.Report => ({
  resumed: outcomes.flatMap((outcome) => outcome.resumed === undefined ? [] : [outcome.resumed]),
  failed: outcomes.flatMap((outcome) => outcome.failed === undefined ? [] : [outcome.failed]),
  errors: outcomes.flatMap((outcome) => outcome.error === undefined ? [] : [outcome.error]),
  skipped: outcomes.flatMap((outcome) => outcome.skipped === undefined ? [] : [outcome.skipped]),
  reaped: outcomes.flatMap((outcome) => outcome.reaped === undefined ? [] : [outcome.reaped])
})

/** @internal */
const entryError = (entry: JournalEntry.Entry, error: unknown): Outcome => ({
  error: { key: entry.key, kind: entry.kind, error }
})

// A Conflict means another fiber or recovery owns the entry now: not an error, just not ours.
/** @internal */
export const orSkip = (entry: JournalEntry.Entry) => (error: JournalError.JournalError): Effect.Effect<Outcome> =>
  error.reason === "Conflict"
    ? Effect.succeed({ skipped: entry })
    : Effect.as(
      Effect.logWarning("recovery: a journal step failed", error).pipe(
        Effect.annotateLogs("key", UntrustedText.shown(entry.key))
      ),
      entryError(entry, error)
    )

// Runs `effect` for an entry this fiber owns and records how it ended. Interruption leaves the entry InFlight, as a
// crash would, and only forgets that this process runs it.
/** @internal */
export const settle = <R>(
  journal: Journal.Service,
  entry: JournalEntry.Entry,
  effect: Effect.Effect<unknown, unknown, R>,
  done: (entry: JournalEntry.Entry) => Outcome
): Effect.Effect<Outcome, never, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(restore(effect))
      if (Exit.isSuccess(exit)) {
        const completed = yield* journal.complete(entry.key, exit.value).pipe(
          // A value that is not JSON: the operation did complete, so record that, without its value.
          Effect.catchIf((error) => error.reason === "Invalid", () => journal.complete(entry.key)),
          Effect.result
        )
        if (Result.isFailure(completed)) {
          yield* journal.release(entry.key)
          return entryError(entry, completed.failure)
        }
        return done(completed.success)
      }
      if (Cause.hasInterruptsOnly(exit.cause)) {
        yield* journal.release(entry.key)
        return yield* Effect.interrupt
      }
      const error = Option.getOrElse(Cause.findErrorOption(exit.cause), () => Cause.squash(exit.cause))
      yield* journal.fail(entry.key, error).pipe(
        Effect.catch((journalError) =>
          Effect.andThen(
            journal.release(entry.key),
            Effect.logWarning("recovery: could not record a failed resume", journalError).pipe(
              Effect.annotateLogs("key", UntrustedText.shown(entry.key))
            )
          )
        )
      )
      yield* Effect.logWarning(
        `recovery: resuming ${UntrustedText.shown(entry.kind)} ${UntrustedText.shown(entry.key)} failed`,
        exit.cause
      ).pipe(
        Effect.annotateLogs("key", UntrustedText.shown(entry.key))
      )
      return entryError(entry, error)
    })
  )
