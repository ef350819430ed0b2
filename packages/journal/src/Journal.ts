/**
 * The journal service: a durable record of operations that must survive a crash. Each one is written before it starts
 * and again when it ends, so that on start-up `Recovery` finds what was interrupted and resumes or fails it instead of
 * losing it. `make` builds the service on a storage backend (`JournalBackend`); `layerMemory` keeps it in memory,
 * `@lifeline/sqlite` and `@lifeline/postgres` on disk. The entries are in `JournalEntry`, the errors in
 * `JournalError`, owner claims in `JournalClaim`, and `JournaledOperation.run` runs an effect as a journaled operation.
 *
 * @since 0.1.0
 */
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/journal.js"
import * as retries from "./internal/journalRetries.js"
import { JournalService } from "./internal/journalService.js"
import type { Backend } from "./JournalBackend.js"
import type { Claim, ClaimOptions, Identity, Liveness } from "./JournalClaim.js"
import type { Began, Entry, Guard, Operation } from "./JournalEntry.js"
import type { JournalError, OwnerInUse } from "./JournalError.js"

/**
 * The journal service.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal } from "@lifeline/journal"
 *
 * const program = Effect.gen(function*() {
 *   const journal = yield* Journal.Journal
 *   const { started } = yield* journal.begin({ kind: "turn", key: "turn-1", payload: { text: "hi" }, owner: "host" })
 *   if (started) yield* journal.complete("turn-1", { answer: "hello" })
 *   return yield* journal.unfinished()
 * }).pipe(Effect.provide(Journal.layerMemory))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class Journal extends JournalService {}

/**
 * @since 0.1.0
 */
export declare namespace Journal {
  /**
   * Every write is durable when its effect succeeds (the SQL journals commit it first), so a crash right after
   * `begin` returns still finds the entry. Each step is atomic.
   *
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /** Records the operation as `InFlight` before it starts, or returns the entry its key already has. */
    readonly begin: (operation: Operation) => Effect.Effect<Began, JournalError>
    /**
     * Records the end of an unfinished operation with its result (JSON). Completing a completed entry returns it
     * unchanged; completing a failed one is a `Conflict`.
     */
    readonly complete: (key: string, result?: unknown) => Effect.Effect<Entry, JournalError>
    /**
     * Records that an unfinished operation failed. `error` is stored as JSON: a tagged error keeps its `_tag` and
     * fields (so `Schema.decodeUnknownEffect` of its class reads it back) and its message becomes the entry's `reason`.
     * Failing a failed entry returns it unchanged; failing a completed one is a `Conflict`. With a {@link Guard},
     * it is a recovery decision and fails with `Conflict` unless the guard holds.
     */
    readonly fail: (key: string, error: unknown, guard?: Guard) => Effect.Effect<Entry, JournalError>
    /**
     * Takes over an unfinished operation left by a crash or a shutdown: `InFlight` again, one more attempt, and
     * owned by the caller, who must then `complete` or `fail` it. `Conflict` when a fiber of this process runs it,
     * or when the guard does not hold.
     */
    readonly resume: (key: string, guard?: Guard) => Effect.Effect<Entry, JournalError>
    /** Marks the `InFlight` entries among `keys` as `NeedsRecovery`; returns those it changed. Unknown keys are skipped. */
    readonly markNeedsRecovery: (
      keys: Iterable<string>,
      reason: string
    ) => Effect.Effect<ReadonlyArray<Entry>, JournalError>
    /**
     * Forgets that a fiber of this process runs `key`, leaving the entry as it is: an interrupted operation stays
     * `InFlight`, as it would after a crash, and may then be resumed.
     */
    readonly release: (key: string) => Effect.Effect<void>
    /** The keys that fibers of this process run now: begun or resumed here, and not yet ended or released. */
    readonly running: Effect.Effect<ReadonlyArray<string>>
    /**
     * `InFlight` and `NeedsRecovery` entries, of one owner or of all, oldest first. One row that cannot be read (a
     * `Corrupt` one, or one the driver refuses) fails the whole listing: that is why `begin`, `complete` and `fail`
     * refuse values over `maxPayloadBytes` before writing them.
     */
    readonly unfinished: (owner?: string) => Effect.Effect<ReadonlyArray<Entry>, JournalError>
    readonly get: (key: string) => Effect.Effect<Option.Option<Entry>, JournalError>
    /** Deletes `Completed` and `Failed` entries that ended before `finishedBefore` (epoch ms); returns how many. */
    readonly prune: (finishedBefore: number) => Effect.Effect<number, JournalError>
    /**
     * Runs `effect` with its writes committed together (one SQL transaction): for recording many entries at
     * once. A `begin` inside is durable only when the batch ends, so do not start the work from inside it.
     */
    readonly batch: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | JournalError, R>
    /**
     * Claims `owner` for this journal for the Scope: while the claim holds, another journal (another process, or
     * another instance on the same storage) that claims it gets an `OwnerInUse` instead. A fiber renews the
     * claim on the `Clock` every third of `ttl`; closing the Scope stops it and deletes the claim. A claim whose
     * holder stopped renewing it is taken over once it expires, or at once when the holder ran on this host and its
     * process is gone (`JournalClaim.Liveness`). Claiming an owner this journal already holds shares that claim: it is
     * released when the last Scope that claimed it closes. Do not claim inside `batch`.
     *
     * A holder that cannot renew for `ttl` (its storage fails, its process is paused) may lose the claim to another
     * journal: it logs an error, and `holds` says false from then on.
     */
    readonly claim: (
      owner: string,
      options?: ClaimOptions
    ) => Effect.Effect<Claim, OwnerInUse | JournalError, Scope.Scope>
    /** Whether this journal holds a claim on `owner` now: claimed, not released, not lost, not expired. */
    readonly holds: (owner: string) => Effect.Effect<boolean>
    /** The claim stored for `owner`, whoever holds it, expired or not. */
    readonly holder: (owner: string) => Effect.Effect<Option.Option<Claim>, JournalError>
  }
}

/**
 * Options of {@link make}: the process the journal runs in, for its claims, and how to tell whether a claim's holder
 * on this host still runs (see `JournalClaim.Identity` and `JournalClaim.Liveness`); and the journal's limits.
 *
 * @since 0.1.0
 * @category models
 */
export interface MakeOptions {
  readonly identity?: Identity | undefined
  readonly liveness?: Liveness | undefined
  /**
   * How long one storage step (a read, a write, a claim renewal, a whole `batch`) may take, on the `Clock`
   * (default {@link defaultOperationTimeout}, 5 seconds). A step that takes longer fails with a `Storage` error that
   * says it timed out, and whether it took effect is then unknown (as after a crash); the driver's query is
   * interrupted in the background, so a server that stopped answering holds neither the caller nor a shutdown.
   */
  readonly operationTimeout?: Duration.Input | undefined
  /**
   * The largest payload, result or error a journal stores, in bytes of its JSON as UTF-8 (default
   * {@link defaultMaxPayloadBytes}, 1 MiB). A larger one is refused as `Invalid` before anything is written, by
   * every backend: a row that the driver cannot read back (PostgreSQL's driver refuses a message over 16 MiB) would
   * otherwise make every later listing, and so every `Recovery.run`, fail.
   */
  readonly maxPayloadBytes?: number | undefined
}

/**
 * How long one storage step may take by default (`MakeOptions.operationTimeout`).
 *
 * @since 0.1.0
 * @category models
 */
export const defaultOperationTimeout: Duration.Input = internal.defaultOperationTimeout

/**
 * The largest payload, result or error stored by default, in bytes of JSON (`MakeOptions.maxPayloadBytes`): 1 MiB.
 *
 * @since 0.1.0
 * @category models
 */
export const defaultMaxPayloadBytes: number = internal.defaultMaxPayloadBytes

/**
 * Builds a journal on a storage backend. Times come from the `Clock`. The journal also knows which keys fibers of
 * this process run (`running`), which the storage cannot tell from what a crash left behind; a new journal on the
 * same storage, as after a restart, runs nothing, and holds no claim. `identity` and `liveness` describe the process
 * for claims; without them a claim is taken over only when it expires. Every step is bounded by `operationTimeout`;
 * keys, kinds, owners and payloads are checked (see `JournalError`) before the backend sees them.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal, JournalBackend } from "@lifeline/journal"
 *
 * const journal = Effect.flatMap(JournalBackend.makeMemory, (backend) =>
 *   Journal.make(backend, { identity: { pid: 4242, host: "build-1" } }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (backend: Backend, options?: MakeOptions) => Effect.Effect<Journal.Service> = internal.make

/**
 * A journal in memory.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal } from "@lifeline/journal"
 *
 * const unfinished = Effect.flatMap(Journal.makeMemory, (journal) => journal.unfinished())
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<Journal.Service> = internal.makeMemory

/**
 * The in-memory journal, for tests and short-lived hosts: nothing survives the process.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal } from "@lifeline/journal"
 *
 * const program = Journal.Journal.pipe(
 *   Effect.flatMap((journal) => journal.unfinished()),
 *   Effect.provide(Journal.layerMemory)
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<Journal> = Layer.effect(Journal, makeMemory)

/**
 * `journal` with its end records (`complete` and `fail`) retried while its storage cannot be reached (a `Storage`
 * error), every 500 ms for up to `window`, each try bounded by the journal's `operationTimeout`: a short outage then
 * does not leave an operation that finished unrecorded, to be run again or failed by the next start's recovery. Any
 * other error is not retried, and neither is `begin` (an operation not begun has not run). The fleet records with it
 * for `Bounds.recordRetryWindow`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal } from "@lifeline/journal"
 *
 * const program = Effect.gen(function*() {
 *   const journal = Journal.withRecordRetries(yield* Journal.makeMemory, "30 seconds")
 *   yield* journal.begin({ kind: "tool", key: "k-1", payload: {}, owner: "host" })
 *   yield* journal.complete("k-1", { ok: true })
 * })
 * ```
 *
 * @since 0.2.0
 * @category combinators
 */
export const withRecordRetries: (journal: Journal.Service, window: Duration.Input) => Journal.Service =
  retries.withRecordRetries
