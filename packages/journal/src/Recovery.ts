/**
 * What a host does on start-up with the operations its journal says were interrupted: resume each one or fail it with
 * a typed `InterruptedByCrash` the user can retry, per kind, as the app decides; and what a shutdown cut off, recorded
 * for the next start to decide on. The child processes a host spawned are recorded by `ProcessRecord`.
 *
 * @since 0.1.0
 */
import type * as Peer from "@lifeline/kernel/Peer"
import type * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { InterruptedByCrash } from "./internal/interruptedByCrash.js"
import * as internal from "./internal/journalRecovery.js"
import type * as Journal from "./Journal.js"
import type * as JournalClaim from "./JournalClaim.js"
import type * as JournalEntry from "./JournalEntry.js"
import type * as JournalError from "./JournalError.js"
import type * as ProcessRecord from "./ProcessRecord.js"

/**
 * The operation was interrupted (a crash, a kill, a restart, or a shutdown that cut it off) and was not resumed. It is
 * recorded as the entry's error, so the user can be shown it and retry: beginning the same key again starts a new
 * attempt. `detail` says why it was not resumed.
 *
 * @since 0.1.0
 * @category errors
 */
export { InterruptedByCrash } from "./internal/interruptedByCrash.js"

/**
 * The `InterruptedByCrash` recorded on an entry, if that is why it failed.
 *
 * @example
 * ```ts
 * import { Effect, Option } from "effect"
 * import { Journal, Recovery } from "@lifeline/journal"
 *
 * const canRetry = (key: string) =>
 *   Effect.gen(function*() {
 *     const journal = yield* Journal.Journal
 *     const entry = yield* journal.get(key)
 *     return Option.isSome(Option.flatMap(entry, Recovery.interruptedByCrash))
 *   })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const interruptedByCrash: (entry: JournalEntry.Entry) => Option.Option<InterruptedByCrash> =
  internal.interruptedByCrash

/**
 * What to do with one interrupted operation.
 *
 * - `Resume`: run `run` again under the same key, as one more attempt, and record its end. Its value is stored as
 *   the entry's result when it is JSON.
 * - `Fail`: record an {@link InterruptedByCrash}, with `detail` if given.
 *
 * @since 0.1.0
 * @category models
 */
export type Decision<R = never> =
  | { readonly _tag: "Resume"; readonly run: (entry: JournalEntry.Entry) => Effect.Effect<unknown, unknown, R> }
  | { readonly _tag: "Fail"; readonly detail?: string | undefined }

/**
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Recovery } from "@lifeline/journal"
 *
 * const decision = Recovery.resume((entry) => Effect.succeed({ resumed: entry.key }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const resume = <R>(run: (entry: JournalEntry.Entry) => Effect.Effect<unknown, unknown, R>): Decision<R> => ({
  _tag: "Resume",
  run
})

/**
 * @example
 * ```ts
 * import { Recovery } from "@lifeline/journal"
 *
 * const decision = Recovery.fail("the tool's side effects are unknown")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fail = (detail?: string): Decision<never> => ({ _tag: "Fail", detail })

/**
 * Decides for one interrupted operation of a kind. A plain function of the entry: its payload, attempts, and status
 * (`InFlight` after a crash, `NeedsRecovery` after a drain timeout).
 *
 * @since 0.1.0
 * @category models
 */
export type Decide<R = never> = (entry: JournalEntry.Entry) => Decision<R>

/**
 * What went wrong with one entry during recovery: its resumer failed (the entry is then `Failed` with that error),
 * or a journal step failed.
 *
 * @since 0.1.0
 * @category models
 */
export interface EntryError {
  readonly key: string
  readonly kind: string
  readonly error: unknown
}

/**
 * What `run` did.
 *
 * - `resumed`: resumed and completed;
 * - `failed`: recorded as `InterruptedByCrash` (the default decision, or too many attempts);
 * - `errors`: resumers that failed (recorded as `Failed` with their error) and journal steps that failed;
 * - `skipped`: run by a fiber of this process right now, or taken by another recovery in the meantime;
 * - `reaped`: orphan child processes, with what happened to each.
 *
 * @since 0.1.0
 * @category models
 */
export interface Report {
  readonly resumed: ReadonlyArray<JournalEntry.Entry>
  readonly failed: ReadonlyArray<JournalEntry.Entry>
  readonly errors: ReadonlyArray<EntryError>
  readonly skipped: ReadonlyArray<JournalEntry.Entry>
  readonly reaped: ReadonlyArray<{ readonly entry: JournalEntry.Entry; readonly outcome: ProcessRecord.ReapOutcome }>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> {
  /** A decision per kind; kinds without one are failed with `InterruptedByCrash`. */
  readonly decisions?: { readonly [kind: string]: Decide<R> } | undefined
  /** Whose operations to recover. Default: the `JournalClaim.Owner` of the calling fiber. */
  readonly owner?: string | undefined
  /**
   * An operation that has been started this many times is failed instead of resumed, so that an operation that
   * crashes its host cannot crash it forever. Default 3.
   */
  readonly maxAttempts?: number | undefined
  /** How many resumers run at once. Default 4. */
  readonly concurrency?: number | "unbounded" | undefined
  /** Kills orphan child processes. Without it, `process` entries are left for `ProcessRecord.reapOrphans`. */
  readonly reap?: ProcessRecord.Reaper<R> | undefined
  /** The claim `run` takes on the owner (its `ttl`, default 30 s), unless the journal already holds it. */
  readonly claim?: JournalClaim.ClaimOptions | undefined
}

/**
 * Recovers every unfinished operation of the owner: first claims the owner for the Scope (`Journal.Service.claim`),
 * then, for each `InFlight` or `NeedsRecovery` entry that no fiber of this process runs, asks the decision of its kind
 * and resumes it (one more attempt under the same key, recorded when it ends) or records an `InterruptedByCrash`.
 * Each entry is taken under a guard, so an operation is never resumed twice, even by two recoveries at once. Waits
 * for the resumers; fork it to let start-up go on.
 *
 * The claim is what makes the entries leftovers: while another live process (or another journal instance) holds the
 * owner, `run` fails with `JournalError.OwnerInUse` and touches nothing. A holder that crashed is taken over once its claim
 * expires, or at once when it ran on this host and its process is gone. The claim stays held, and renewed, until the
 * Scope closes: run recovery in the Scope the host works in, so that no second instance can take its running work
 * for a crash's leftovers. A claim the journal already holds is shared, not taken again.
 *
 * Fails when the owner is in use or the journal cannot be listed; what goes wrong with one entry is in the report's
 * `errors`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal, Recovery } from "@lifeline/journal"
 *
 * const requestLlm = (turn: unknown) => Effect.succeed({ text: "continued", turn })
 *
 * const host = Effect.gen(function*() {
 *   yield* Recovery.run({
 *     decisions: {
 *       // an interrupted LLM request is safe to send again
 *       llm: (entry) => Recovery.resume(() => requestLlm(entry.payload)),
 *       // a tool's side effects are unknown: let the user retry
 *       tool: () => Recovery.fail("the tool was executing")
 *     },
 *     claim: { ttl: "30 seconds" }
 *   })
 *   // ... the host's work: the owner stays claimed until the Scope closes
 * }).pipe(
 *   Effect.catchTag("OwnerInUse", (error) => Effect.logError(`another host runs: pid ${error.pid} on ${error.host}`)),
 *   Effect.scoped,
 *   Effect.provide(Journal.layerMemory)
 * )
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const run: <R = never>(
  options?: Options<R>
) => Effect.Effect<Report, JournalError.JournalError | JournalError.OwnerInUse, Journal.Journal | Scope.Scope | R> =
  internal.run

/**
 * The part of a connection's shutdown report that the journal needs; `Connection.ShutdownReport` is one.
 *
 * @since 0.1.0
 * @category models
 */
export interface ShutdownReport {
  readonly policy: ShutdownPolicy.Policy
  readonly reason: string
  readonly drained: boolean
  readonly cutOff: ReadonlyArray<Peer.CutOff>
}

/**
 * Records in the journal what a shutdown cut off, as a connection's `onShutdown`: under `Drain` (its deadline
 * passed) the operations become `NeedsRecovery`, to be resumed or failed at the next start; under `FailFast` they
 * are recorded as `Failed` with a `ShutdownError` carrying the shutdown's reason.
 *
 * `keysOf` maps a cut-off request to the journal key of its operation. Without it, every `InFlight` operation of
 * the owner that no fiber of this process still runs counts as cut off, which is true only of the owner's sole live
 * holder: so without `keysOf` it records something only while the journal holds the owner's claim (as after
 * {@link run} in the same Scope), and otherwise logs a warning. Journal failures are logged, not raised: a shutdown
 * must finish.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal, Recovery } from "@lifeline/journal"
 *
 * const onShutdown = Effect.map(Journal.Journal, (journal) =>
 *   Recovery.recordShutdown(journal, {
 *     keysOf: (cutOff) => `rpc/${cutOff.direction}/${cutOff.id}`
 *   }))
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const recordShutdown: (
  journal: Journal.Journal.Service,
  options?: {
    readonly keysOf?: ((cutOff: Peer.CutOff) => string | undefined) | undefined
    readonly owner?: string | undefined
  }
) => (report: ShutdownReport) => Effect.Effect<void> = internal.recordShutdown
