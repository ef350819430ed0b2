/**
 * The states of a lifecycle and the one table of transitions between them: which moves are legal, which states end
 * it, and the error for a move the table (or a compare-and-set) refuses.
 *
 * @internal
 */
import * as Data from "effect/Data"
import type * as Lifecycle from "../Lifecycle.js"

/** @internal */
export const State = Data.taggedEnum<Lifecycle.State>()

/** @internal */
export const Failed = (args: { readonly error: Lifecycle.Failure }): Lifecycle.State =>
  State.Failed({ error: args.error })

// Typed against `Next`, so a missing or extra entry does not compile: the type and the runtime check cannot drift.
const table: { readonly [From in Lifecycle.Tag]: { readonly [To in Lifecycle.Next<From>]: true } } = {
  Starting: { Initializing: true, Ready: true, Closing: true, Failed: true },
  Initializing: { Ready: true, Closing: true, Failed: true },
  Ready: { Closing: true, Failed: true },
  Closing: { Closed: true, Failed: true },
  Closed: {},
  Failed: {}
}

/** @internal */
// Reads the entry's value, not only its presence: a `true` is what makes a move legal (an inherited key such as
// `constructor` is never `true`).
export const isLegal = (from: Lifecycle.Tag, to: Lifecycle.Tag): boolean =>
  (table[from] as { readonly [To in Lifecycle.Tag]?: true })[to] === true

/** @internal */
export const isTerminal = (state: Lifecycle.State): boolean => state._tag === "Closed" || state._tag === "Failed"

/** @internal */
export const isShuttingDown = (state: Lifecycle.State): boolean =>
  state._tag === "Closing" || state._tag === "Closed" || state._tag === "Failed"

/**
 * A transition the table does not allow (`from → to`), or a compare-and-set transition whose expected state was no
 * longer current. The state is left unchanged.
 *
 * This is a typed failure, not a defect, because it is an expected race rather than a bug: a handshake that completes
 * just after `stop` tries `Closing → Ready`, and the caller decides that this is fine.
 *
 * @since 0.1.0
 * @category errors
 */
export class IllegalTransition extends Data.TaggedError("IllegalTransition")<{
  readonly from: Lifecycle.State
  readonly to: Lifecycle.State
  readonly expected: Lifecycle.Tag | undefined
}> {
  override get message(): string {
    return this.expected !== undefined && this.expected !== this.from._tag
      ? `expected ${this.expected} but was ${this.from._tag}, so ${this.from._tag} → ${this.to._tag} was not made`
      : `${this.from._tag} → ${this.to._tag} is not a legal lifecycle transition`
  }
}
