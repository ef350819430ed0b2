/**
 * The body of `JournaledOperation.run`: begin before the effect starts, complete or fail after, and what a key already
 * known, an interruption or a shutdown leave behind.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as Journal from "../Journal.js"
import type * as JournaledOperation from "../JournaledOperation.js"
import { JournalError } from "../JournalError.js"
import { Owner } from "./journalClaim.js"
import { errorToJson, messageOf } from "./journalJson.js"
import { JournalService } from "./journalService.js"

const boundedMessage = (message: string | null) =>
  message === null ? "the operation failed" : message.length > 1000 ? `${message.slice(0, 1000)}…` : message

const conflict = (key: string, detail: string) => new JournalError({ reason: "Conflict", key, detail })

const failureOf = <E>(cause: Cause.Cause<E>): unknown =>
  Option.match(Cause.findErrorOption(cause), {
    onSome: errorToJson,
    onNone: () => {
      const defect = errorToJson(Cause.squash(cause))
      return { _tag: "Defect", message: messageOf(defect) ?? "a defect", defect }
    }
  })

// A shutdown error means the connection cut the operation off, not that the operation failed: like an interruption,
// its outcome is unknown. The entry stays InFlight for the shutdown recorder (NeedsRecovery under a drain timeout,
// Failed under fail-fast) or, without one, for Recovery at the next start.
const isCutOff = <E>(cause: Cause.Cause<E>): boolean =>
  Cause.hasInterruptsOnly(cause) ||
  Option.exists(Cause.findErrorOption(cause), (error) => Predicate.isTagged(error, "ShutdownError"))

/** @internal */
export const run = (
  kind: string,
  key: string,
  payload: unknown,
  options?: JournaledOperation.RunOptions<any, any>
) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | JournalError, R | Journal.Journal> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const journal = yield* JournalService
      const owner = yield* Owner
      const { entry, started } = yield* journal.begin({ kind, key, payload, owner })
      if (!started) {
        if (entry.status === "Completed" && options?.result !== undefined) {
          return yield* Schema.decodeUnknownEffect(options.result)(entry.result ?? null).pipe(
            Effect.mapError((cause) =>
              new JournalError({ reason: "Corrupt", key, detail: "the stored result does not match its schema", cause })
            )
          ) as Effect.Effect<A, JournalError>
        }
        return yield* conflict(
          key,
          entry.status === "Completed"
            ? "the operation is already completed"
            : `the operation is already ${entry.status} (running here, or awaiting recovery)`
        )
      }
      const exit = yield* Effect.exit(restore(effect))
      if (Exit.isSuccess(exit)) {
        const result = options?.result === undefined
          ? Effect.succeed(undefined)
          : Schema.encodeEffect(options.result)(exit.value).pipe(
            Effect.mapError((cause) =>
              new JournalError({ reason: "Invalid", key, detail: "the result does not match its schema", cause })
            )
          )
        yield* Effect.flatMap(result, (json) => journal.complete(key, json)).pipe(
          Effect.tapError(() => journal.release(key))
        )
        return exit.value
      }
      if (isCutOff(exit.cause)) {
        yield* journal.release(key)
      } else {
        const failure = failureOf(exit.cause)
        const recorded = yield* journal.fail(key, failure).pipe(
          // An error too large to store: record the operation's failure with its message (bounded) instead.
          Effect.catchIf(
            (error) => error.reason === "Invalid",
            () => journal.fail(key, { message: boundedMessage(messageOf(failure)) })
          ),
          Effect.result
        )
        if (Result.isFailure(recorded)) {
          // The journal still says InFlight while the operation failed: the caller must know (Recovery decides at the
          // next start). The operation's own failure is kept as this error's cause.
          yield* journal.release(key)
          return yield* new JournalError({
            reason: recorded.failure.reason,
            key,
            detail: `the operation failed, and its failure could not be recorded (${recorded.failure.detail}); ` +
              "the entry stays unfinished until Recovery decides; the operation's failure is this error's cause",
            cause: exit.cause
          })
        }
      }
      return yield* exit
    })
  )
