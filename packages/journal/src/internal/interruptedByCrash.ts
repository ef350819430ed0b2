/**
 * `Recovery.InterruptedByCrash`, apart from `Recovery.ts` so that recovery's body (`journalRecovery.ts`) builds it
 * without importing the public module that imports it. `Recovery.ts` re-exports it.
 */
import * as Schema from "effect/Schema"

/**
 * The operation was interrupted (a crash, a kill, a restart, or a shutdown that cut it off) and was not resumed. It is
 * recorded as the entry's error, so the user can be shown it and retry: beginning the same key again starts a new
 * attempt. `detail` says why it was not resumed.
 *
 * @since 0.1.0
 * @category errors
 */
export class InterruptedByCrash extends Schema.TaggedError<InterruptedByCrash>("@lifeline/journal/InterruptedByCrash")(
  "InterruptedByCrash",
  {
    key: Schema.String,
    kind: Schema.String,
    attempts: Schema.Int,
    startedAt: Schema.Number,
    detail: Schema.String
  }
) {
  override get message(): string {
    return `${this.kind} ${this.key} was interrupted (attempt ${this.attempts}): ${this.detail}`
  }
}
