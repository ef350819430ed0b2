/**
 * A fleet session's recovery, when a runner takes the session: the kernel's `Recovery.run` for the session's owner,
 * with the session's decisions (each resuming on the session's new child), waiting out a claim a dead runner still
 * holds, its resumed operations drained and recorded like the operations of a request. The session (`session.ts`)
 * starts it beside the entity's build; the claim it takes is kept as `sessionClaim.ts` says.
 *
 * @internal
 */
import * as Journal from "@lifeline/journal/Journal"
import type * as JournalEntry from "@lifeline/journal/JournalEntry"
import type * as JournalError from "@lifeline/journal/JournalError"
import type { OwnerInUse } from "@lifeline/journal/JournalError"
import * as Recovery from "@lifeline/journal/Recovery"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type * as ExtensionSession from "../ExtensionSession.js"
import { defaultDrainTimeout, drained, withRecordRetries } from "./operation.js"

/** The kernel's decisions for the session, each resuming on the session's new child. */
export const decisionsOf = <R>(
  decisions: { readonly [kind: string]: (entry: JournalEntry.Entry) => ExtensionSession.Decision } | undefined,
  resume: (entry: JournalEntry.Entry) => Effect.Effect<unknown, unknown, R>
): { readonly [kind: string]: Recovery.Decide<R> } =>
  Object.fromEntries(
    Object.entries(decisions ?? {}).map(([kind, decide]) => [
      kind,
      (entry: JournalEntry.Entry) =>
        decide(entry) === "Resume"
          ? Recovery.resume(resume)
          : Recovery.fail("the runner running it stopped, and its kind is not resumed")
    ])
  )

/**
 * Runs `Recovery.run` for the session, waiting out a claim that a dead runner still holds (it expires after its ttl
 * without renewal): the cluster gave this runner the session, so whoever holds the claim is gone or about to stop it.
 *
 * Once the claim is taken, the recovery is treated as the operations it resumes: interrupted (the session stops), it
 * gets `drainTimeout` to finish, and the end of each resumed operation is recorded with the retries of one run on
 * request (`recordRetryWindow`), so that a runner that stops records them rather than leave them to be resumed once
 * more. (The drain wraps the whole `Recovery.run`: the kernel records a resumed operation outside of it, and an
 * interruption would reach that step before a drain inside could return.)
 */
export const recover = <R>(
  options: Recovery.Options<R>,
  retryInterval: Duration.Input,
  /** Run before each try, under the same retries: the session's own claim, which the recovery then shares. */
  before: Effect.Effect<void, OwnerInUse | JournalError.JournalError, Scope.Scope> = Effect.void,
  drainTimeout: Duration.Input = defaultDrainTimeout
) =>
  Effect.suspend(() => {
    let waits = 0
    // Once the session stops, the recovery starts no more operations: one it has not started yet is left
    // unfinished (the kernel has counted the attempt already) for the next runner, and the drain waits only for
    // those already running.
    let stopping = false
    const decisions = Object.fromEntries(
      Object.entries(options.decisions ?? {}).map(([kind, decide]) => [
        kind,
        (entry: JournalEntry.Entry): Recovery.Decision<R> => {
          const decision = decide(entry)
          return decision._tag === "Resume"
            ? Recovery.resume((entry) => Effect.suspend(() => stopping ? Effect.interrupt : decision.run(entry)))
            : decision
        }
      ])
    )
    const run = Effect.flatMap(Journal.Journal, (journal) =>
      drained(
        Recovery.run({ ...options, decisions }).pipe(
          Effect.provideService(Journal.Journal, withRecordRetries(journal))
        ),
        {
          drainTimeout,
          label: `the recovery of ${options.owner ?? "the session"}`,
          onInterrupt: () => {
            stopping = true
          }
        }
      ))
    // The count lives outside the retried effect: each retry runs that effect again.
    return Effect.andThen(before, run).pipe(
      Effect.tapError((error) => {
        if (error._tag !== "OwnerInUse") return Effect.void
        waits += 1
        // Said once more loudly after 40 tries (10 s at the default interval), then every 240 (a minute): a claim
        // that stays is worth a line.
        return waits % 240 === 40
          ? Effect.logWarning(
            `session ${options.owner}: still waiting for the claim of its previous runner (${waits} tries): ${error.message}`
          )
          : Effect.logDebug(`session ${options.owner}: waiting for the claim of its previous runner`)
      }),
      Effect.retry({
        while: (error) => error._tag === "OwnerInUse",
        schedule: Schedule.spaced(retryInterval)
      })
    )
  })
