/**
 * The body of `JournalClaim.deleteUnreleased`: a claim this journal let go of but could not delete (its storage was
 * down), deleted once it is back, unless someone holds it now.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Journal from "../Journal.js"
import type { ClaimOptions } from "../JournalClaim.js"
import { JournalError } from "../JournalError.js"

/** @internal */
export const deleteUnreleased = (
  journal: Journal.Journal.Service,
  owner: string,
  token: string,
  options: ClaimOptions
): Effect.Effect<"deleted" | "held again" | "not ours", JournalError> =>
  Effect.gen(function*() {
    if (yield* journal.holds(owner)) return "held again" as const
    const stored = yield* journal.holder(owner)
    if (Option.isNone(stored) || stored.value.holder !== token) return "not ours" as const
    // Taken again (the journal replaces a row it left itself), then let go.
    const taken = yield* Effect.scoped(journal.claim(owner, options)).pipe(
      Effect.as(true),
      // Taken by another holder meanwhile: it is theirs now.
      Effect.catchTag("OwnerInUse", () => Effect.succeed(false))
    )
    if (!taken) return "not ours" as const
    // Let go again: deleted, unless the journal failed once more (then the row is still ours).
    const after = yield* journal.holder(owner)
    if (Option.isSome(after) && after.value.holder === token && !(yield* journal.holds(owner))) {
      return yield* new JournalError({ reason: "Storage", detail: "the claim is still stored" })
    }
    return "deleted" as const
  })
