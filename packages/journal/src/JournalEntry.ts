/**
 * The entries of a `Journal`: one operation each, written before it starts and again when it ends, with the status,
 * attempts and JSON values that `Recovery` decides on.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as internal from "./internal/journalJson.js"

/**
 * Where an operation stands.
 *
 * - `InFlight`: begun and not ended. After a crash, or after the fiber running it was interrupted, it stays so until
 *   `Recovery` decides.
 * - `NeedsRecovery`: a shutdown cut it off (a drain deadline passed); `Recovery` decides on the next start.
 * - `Completed`, `Failed`: ended. Beginning a `Failed` key again starts a retry; a `Completed` key is never run again.
 *
 * @example
 * ```ts
 * import { JournalEntry } from "@lifeline/journal"
 *
 * const ended = (status: JournalEntry.Status) => status === "Completed" || status === "Failed"
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export const Status = Schema.Literals(["InFlight", "NeedsRecovery", "Completed", "Failed"])

/**
 * @since 0.1.0
 * @category models
 */
export type Status = typeof Status.Type

/**
 * The statuses `Journal.Service.unfinished` lists and `Recovery` acts on.
 *
 * @since 0.1.0
 * @category models
 */
export const unfinishedStatuses: ReadonlyArray<Status> = ["InFlight", "NeedsRecovery"]

/**
 * One journaled operation. Times are epoch milliseconds read from the `Clock`. `attempts` is 1 when the operation is
 * first begun and grows by one each time it is resumed or retried under the same key.
 *
 * `payload`, `result` and `error` are JSON values: what `begin`, `complete` and `fail` were given, encoded once.
 * `reason` is a short human-readable text: the error's message, or why the operation needs recovery.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Entry = Schema.Struct({
  key: Schema.String,
  kind: Schema.String,
  owner: Schema.String,
  status: Status,
  attempts: Schema.Int,
  payload: Schema.Unknown,
  result: Schema.optional(Schema.Unknown),
  error: Schema.optional(Schema.Unknown),
  reason: Schema.optional(Schema.String),
  startedAt: Schema.Number,
  updatedAt: Schema.Number,
  finishedAt: Schema.optional(Schema.Number)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Entry extends Schema.Schema.Type<typeof Entry> {}

/**
 * What `begin` records. `key` is stable and names the operation: beginning it again while it is unfinished returns
 * the existing entry instead of a duplicate. `owner` names the host that runs it (see `JournalClaim.Owner`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Operation {
  readonly kind: string
  readonly key: string
  readonly payload: unknown
  readonly owner: string
}

/**
 * The answer of `begin`. `started` is true when this call recorded the operation as `InFlight` (a new key, or a retry
 * of a `Failed` one) and so owns running it; false when the key already existed unfinished or completed, in which
 * case `entry` is the stored one, unchanged, and the caller must not run the operation.
 *
 * @since 0.1.0
 * @category models
 */
export interface Began {
  readonly entry: Entry
  readonly started: boolean
}

/**
 * A condition on a recovery step (`resume`, or `fail` when it decides for a crashed operation): the entry must still
 * be unfinished with this many attempts, which is what the caller read, and no fiber of this process may be running
 * it. Two recoveries of the same entry cannot both pass it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Guard {
  readonly attempts: number
}

/**
 * The longest key, kind and owner a journal accepts, so that every SQL server can index it (`VARCHAR(255)`). Each
 * must also be well-formed Unicode (no lone surrogate, which a driver would store as U+FFFD, so that two keys
 * collide) without control characters (NUL, line breaks, escapes): anything else is `Invalid`.
 *
 * @since 0.1.0
 * @category models
 */
export const maxKeyLength = 255

/**
 * How a value is written to the journal as an error: a tagged error or an `Error` keeps its `_tag`, `name`, `message`
 * and own fields, anything that is not JSON is dropped. Used by `fail` and `JournaledOperation.run`.
 *
 * @example
 * ```ts
 * import { JournalEntry } from "@lifeline/journal"
 *
 * JournalEntry.errorToJson(new Error("boom")) // { name: "Error", message: "boom" }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const errorToJson: (error: unknown) => unknown = internal.errorToJson
