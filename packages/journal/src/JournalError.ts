/**
 * How a journal fails: `JournalError` for a step that could not be done (storage, corrupt data, unknown key, a state
 * that does not allow the step, bad input), and `OwnerInUse` when another live journal holds the owner.
 *
 * @since 0.1.0
 */
import * as UntrustedText from "@lifeline/kernel/UntrustedText"
import * as Schema from "effect/Schema"

/**
 * The journal failed. `reason`:
 *
 * - `Storage`: the store could not be read or written;
 * - `Corrupt`: a stored entry could not be decoded;
 * - `NotFound`: no entry has this key;
 * - `Conflict`: the entry is not in a state that allows the step (completing a failed operation, resuming one that
 *   another fiber runs or another recovery took, running a key that is already in flight or completed);
 * - `Invalid`: the input cannot be stored: a key, kind or owner that is empty, too long (`JournalEntry.maxKeyLength`),
 *   not well-formed Unicode or with a control character; a payload, result or error that is not JSON (a function, a
 *   `bigint`, `NaN` or `Infinity`) or larger than the journal's `maxPayloadBytes`.
 * - `Storage` also says when a step timed out (`operationTimeout`): the server did not answer in time.
 *
 * `message` shows untrusted values (keys, server messages) escaped and cut to a bounded length.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal, JournalError } from "@lifeline/journal"
 *
 * const entry = Effect.flatMap(Journal.Journal, (journal) => journal.complete("turn-1")).pipe(
 *   Effect.catchTag("JournalError", (error: JournalError.JournalError) =>
 *     error.reason === "NotFound" ? Effect.succeed(undefined) : Effect.fail(error))
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class JournalError extends Schema.TaggedError<JournalError>("@lifeline/journal/JournalError")("JournalError", {
  reason: Schema.Literals(["Storage", "Corrupt", "NotFound", "Conflict", "Invalid"]),
  key: Schema.optional(Schema.String),
  detail: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {
  /** The key (cut to 120 characters) and the detail (to 1000), with control characters escaped. */
  override get message(): string {
    return this.key === undefined
      ? `journal: ${this.reason}: ${UntrustedText.shown(this.detail, 1000)}`
      : `journal: ${this.reason} (${UntrustedText.shown(this.key)}): ${UntrustedText.shown(this.detail, 1000)}`
  }
}

/**
 * Another live journal (another process, or another journal instance in this one) holds the owner: its unfinished
 * operations are that holder's running work, not a crash's leftovers, so they are not recovered. The fields say who
 * holds it, as far as its journal knows: its pid and host, when its process started, when it claimed the owner and
 * until when its claim holds unless it renews it.
 *
 * @since 0.1.0
 * @category errors
 */
export class OwnerInUse extends Schema.TaggedError<OwnerInUse>("@lifeline/journal/OwnerInUse")("OwnerInUse", {
  owner: Schema.String,
  pid: Schema.optional(Schema.Int),
  host: Schema.optional(Schema.String),
  startedAt: Schema.optional(Schema.Number),
  claimedAt: Schema.Number,
  expiresAt: Schema.Number
}) {
  override get message(): string {
    const who = this.pid === undefined ? "another journal" : `process ${this.pid}`
    const where = this.host === undefined ? "" : ` on ${UntrustedText.shown(this.host)}`
    return `journal: owner ${UntrustedText.shown(this.owner)} is in use by ${who}${where} (claimed at ${
      UntrustedText.shownInstant(this.claimedAt)
    }, held until ${UntrustedText.shownInstant(this.expiresAt)} unless renewed)`
  }
}
