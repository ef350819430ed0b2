/**
 * The host's record of the child processes it spawned, in its journal, so that a restarted host can find and kill the
 * ones its crashed predecessor left behind (the orphan reaper). A child is an entry of kind {@link kind}: begun when it
 * is spawned, completed when it exits.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/processRecord.js"
import type * as Journal from "./Journal.js"
import type * as JournalClaim from "./JournalClaim.js"
import type * as JournalError from "./JournalError.js"
import type * as Recovery from "./Recovery.js"

/**
 * The journal kind of child-process entries.
 *
 * @since 0.1.0
 * @category models
 */
export const kind: "process" = internal.processKind

/**
 * What happened to an orphan process.
 *
 * - `Killed`: it was alive and was ours; it is gone now.
 * - `Gone`: it had already exited.
 * - `Reused`: its pid now belongs to another process, which was left alone.
 * - `Unverified`: it could not be told apart from a process that reused its pid, so it was left alone.
 *
 * @since 0.1.0
 * @category models
 */
export type ReapOutcome = "Killed" | "Gone" | "Reused" | "Unverified"

/**
 * A child process the host spawned, as its journal entry records it. `startedAt` is epoch milliseconds, which tells
 * the process apart from a later one that reused its pid.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ProcessInfo = internal.ProcessInfo

/**
 * @since 0.1.0
 * @category models
 */
export interface ProcessInfo extends Schema.Schema.Type<typeof ProcessInfo> {}

/**
 * Kills an orphan child process if it is still alive and still the one that was recorded. Node's implementation is
 * `NodeReaper.reapProcess` in `@lifeline/node`.
 *
 * @since 0.1.0
 * @category models
 */
export type Reaper<R = never> = (process: ProcessInfo) => Effect.Effect<ReapOutcome, unknown, R>

/**
 * Records a child process right after it was spawned, as an `InFlight` entry of kind `process` owned by the current
 * `JournalClaim.Owner`; returns its key. A crash between the spawn and this write leaves the child unrecorded, which is
 * why a child also shuts down when its stdin ends.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal, ProcessRecord } from "@lifeline/journal"
 *
 * const program = Effect.gen(function*() {
 *   const key = yield* ProcessRecord.record({ pid: 4242, command: ["node", "extension.js"] })
 *   // ... the child runs, then exits
 *   yield* ProcessRecord.exited(key, { exitCode: 0, signal: null })
 * }).pipe(Effect.provide(Journal.layerMemory))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const record: (process: {
  readonly pid: number
  readonly command: ReadonlyArray<string>
}) => Effect.Effect<string, JournalError.JournalError, Journal.Journal> = internal.record

/**
 * Records that a recorded child exited (or was killed), so that a restart does not look for it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const exited: (
  key: string,
  exit?: { readonly exitCode: number | null; readonly signal: string | null }
) => Effect.Effect<void, JournalError.JournalError, Journal.Journal> = internal.exited

/**
 * Finds the child processes the owner recorded and never saw exit (its previous run crashed), kills those still
 * alive with `reap`, and records each one as ended. Children recorded by this run are left alone. Like `Recovery.run`,
 * it first claims the owner for the Scope and fails with `JournalError.OwnerInUse` while another live process holds it:
 * that process's children are not orphans.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal, ProcessRecord } from "@lifeline/journal"
 *
 * const reapNothing: ProcessRecord.Reaper = () => Effect.succeed("Gone")
 *
 * const startUp = ProcessRecord.reapOrphans(reapNothing).pipe(Effect.scoped, Effect.provide(Journal.layerMemory))
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const reapOrphans: <R = never>(
  reap: Reaper<R>,
  options?: { readonly owner?: string | undefined; readonly claim?: JournalClaim.ClaimOptions | undefined }
) => Effect.Effect<
  Recovery.Report,
  JournalError.JournalError | JournalError.OwnerInUse,
  Journal.Journal | Scope.Scope | R
> = internal.reapOrphans
