/**
 * A durable record of operations that must survive a crash: each one is written before it starts and again when it
 * ends, so that on start-up `Recovery` finds what was interrupted and resumes or fails it instead of losing it.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/journal.js"

/**
 * Where an operation stands.
 *
 * - `InFlight`: begun and not ended. After a crash, or after the fiber running it was interrupted, it stays so until
 *   `Recovery` decides.
 * - `NeedsRecovery`: a shutdown cut it off (a drain deadline passed); `Recovery` decides on the next start.
 * - `Completed`, `Failed`: ended. Beginning a `Failed` key again starts a retry; a `Completed` key is never run again.
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
 * The statuses `unfinished` lists and `Recovery` acts on.
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
 * the existing entry instead of a duplicate. `owner` names the host that runs it (see {@link Owner}).
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
 * The journal failed. `reason`:
 *
 * - `Storage`: the store could not be read or written;
 * - `Corrupt`: a stored entry could not be decoded;
 * - `NotFound`: no entry has this key;
 * - `Conflict`: the entry is not in a state that allows the step (completing a failed operation, resuming one that
 *   another fiber runs or another recovery took, running a key that is already in flight or completed);
 * - `Invalid`: the input cannot be stored (an empty or too long key, a payload that is not JSON).
 *
 * @since 0.1.0
 * @category errors
 */
export class JournalError extends Schema.TaggedError<JournalError>("@lifeline/kernel/JournalError")("JournalError", {
  reason: Schema.Literals(["Storage", "Corrupt", "NotFound", "Conflict", "Invalid"]),
  key: Schema.optional(Schema.String),
  detail: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {
  override get message(): string {
    return this.key === undefined
      ? `journal: ${this.reason}: ${this.detail}`
      : `journal: ${this.reason} (${this.key}): ${this.detail}`
  }
}

/**
 * Who holds an owner: the journal that claimed it (`holder`, a random token per journal instance), the process it runs
 * in as far as the journal knows it (`pid`, `host`, and `startedAt`, when that process started, epoch ms), when it
 * claimed it and until when the claim holds unless renewed (`claimedAt`, `expiresAt`, epoch ms from the `Clock`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const Claim = Schema.Struct({
  owner: Schema.String,
  holder: Schema.String,
  pid: Schema.optional(Schema.Int),
  host: Schema.optional(Schema.String),
  startedAt: Schema.optional(Schema.Number),
  claimedAt: Schema.Number,
  expiresAt: Schema.Number
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Claim extends Schema.Schema.Type<typeof Claim> {}

/**
 * Another live journal (another process, or another journal instance in this one) holds the owner: its unfinished
 * operations are that holder's running work, not a crash's leftovers, so they are not recovered. The fields say who
 * holds it, as far as its journal knows: its pid and host, when its process started, when it claimed the owner and
 * until when its claim holds unless it renews it.
 *
 * @since 0.1.0
 * @category errors
 */
export class OwnerInUse extends Schema.TaggedError<OwnerInUse>("@lifeline/kernel/OwnerInUse")("OwnerInUse", {
  owner: Schema.String,
  pid: Schema.optional(Schema.Int),
  host: Schema.optional(Schema.String),
  startedAt: Schema.optional(Schema.Number),
  claimedAt: Schema.Number,
  expiresAt: Schema.Number
}) {
  override get message(): string {
    const who = this.pid === undefined ? "another journal" : `process ${this.pid}`
    const where = this.host === undefined ? "" : ` on ${this.host}`
    return `journal: owner ${this.owner} is in use by ${who}${where} (claimed at ${
      new Date(this.claimedAt).toISOString()
    }, held until ${new Date(this.expiresAt).toISOString()} unless renewed)`
  }
}

/**
 * Options of a claim. `ttl` (default 30 s) is how long the claim holds without renewal: the holder renews it every
 * third of it, and a holder that stops renewing (it crashed, or hangs) loses it once `ttl` has passed. Clocks of
 * hosts that share a journal must agree to well within `ttl`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClaimOptions {
  readonly ttl?: Duration.Input | undefined
}

/**
 * The process a journal runs in, recorded with its claims so that a holder can be named and, on the same host,
 * checked (see {@link Liveness}). `startedAt` is when the process started (epoch ms), which tells it apart from a
 * later process that reused its pid. The in-memory journal knows none of it; `SqliteJournal` fills it in.
 *
 * @since 0.1.0
 * @category models
 */
export interface Identity {
  readonly pid?: number | undefined
  readonly host?: string | undefined
  readonly startedAt?: number | undefined
}

/**
 * Whether the process that holds a claim is still running, asked only for a claim made on this journal's host:
 * `Dead` (the pid is gone, or now names a process that started later) lets a claimant take the owner over at once,
 * without waiting for the claim to expire; `Alive` refuses it even after expiry (the holder is paused, not gone);
 * `Unknown` leaves it to expiry. Node's check is built into `SqliteJournal`.
 *
 * @since 0.1.0
 * @category models
 */
export type Liveness = (claim: Claim) => Effect.Effect<"Alive" | "Dead" | "Unknown">

/**
 * Options of {@link make}.
 *
 * @since 0.1.0
 * @category models
 */
export interface MakeOptions {
  readonly identity?: Identity | undefined
  readonly liveness?: Liveness | undefined
}

/**
 * How long a claim holds without renewal unless `ttl` says otherwise.
 *
 * @since 0.1.0
 * @category models
 */
export const defaultClaimTtl: Duration.Input = "30 seconds"

/**
 * The journal service.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal } from "@lifeline/kernel"
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
export class Journal extends Context.Service<Journal, Journal.Service>()("@lifeline/kernel/Journal") {}

/**
 * @since 0.1.0
 */
export declare namespace Journal {
  /**
   * Every write is durable when its effect succeeds (the SQLite journal commits it first), so a crash right after
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
    /** `InFlight` and `NeedsRecovery` entries, of one owner or of all, oldest first. */
    readonly unfinished: (owner?: string) => Effect.Effect<ReadonlyArray<Entry>, JournalError>
    readonly get: (key: string) => Effect.Effect<Option.Option<Entry>, JournalError>
    /** Deletes `Completed` and `Failed` entries that ended before `finishedBefore` (epoch ms); returns how many. */
    readonly prune: (finishedBefore: number) => Effect.Effect<number, JournalError>
    /**
     * Runs `effect` with its writes committed together (one SQLite transaction): for recording many entries at
     * once. A `begin` inside is durable only when the batch ends, so do not start the work from inside it.
     */
    readonly batch: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | JournalError, R>
    /**
     * Claims `owner` for this journal for the Scope: while the claim holds, another journal (another process, or
     * another instance on the same storage) that claims it gets an {@link OwnerInUse} instead. A fiber renews the
     * claim on the `Clock` every third of `ttl`; closing the Scope stops it and deletes the claim. A claim whose
     * holder stopped renewing it is taken over once it expires, or at once when the holder ran on this host and its
     * process is gone ({@link Liveness}). Claiming an owner this journal already holds shares that claim: it is
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
 * A stored entry as a storage backend sees it: JSON columns are text, absent values are `null`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Row {
  readonly key: string
  readonly kind: string
  readonly owner: string
  readonly status: Status
  readonly attempts: number
  readonly payload: string
  readonly result: string | null
  readonly error: string | null
  readonly reason: string | null
  readonly startedAt: number
  readonly updatedAt: number
  readonly finishedAt: number | null
}

/**
 * The fields a backend `update` may change.
 *
 * @since 0.1.0
 * @category models
 */
export type Patch = Partial<Omit<Row, "key">>

/**
 * Which row a backend `update` may change: its status must be one of `statuses`, and its attempts equal `attempts`
 * when given.
 *
 * @since 0.1.0
 * @category models
 */
export interface Where {
  readonly statuses: ReadonlyArray<Status>
  readonly attempts?: number | undefined
}

/**
 * What a storage must provide for {@link make} to build a journal on it. Each method is one atomic step; `make` adds
 * the rules (statuses, attempts, idempotency, who runs what) once for every storage.
 *
 * @since 0.1.0
 * @category models
 */
export interface Backend {
  /** Stores `row` unless its key exists. Returns the row stored under the key and whether this call wrote it. */
  readonly insert: (row: Row) => Effect.Effect<{ readonly row: Row; readonly inserted: boolean }, JournalError>
  /** Applies `patch` to the row of `key` if it matches `where`; the row after, or `None` when nothing matched. */
  readonly update: (key: string, where: Where, patch: Patch) => Effect.Effect<Option.Option<Row>, JournalError>
  readonly get: (key: string) => Effect.Effect<Option.Option<Row>, JournalError>
  /** Rows in one of `statuses` (of one owner when given), by `startedAt` then key. */
  readonly list: (
    statuses: ReadonlyArray<Status>,
    owner?: string | undefined
  ) => Effect.Effect<ReadonlyArray<Row>, JournalError>
  /** Deletes rows in one of `statuses` whose `finishedAt` is before `finishedBefore`; returns how many. */
  readonly remove: (statuses: ReadonlyArray<Status>, finishedBefore: number) => Effect.Effect<number, JournalError>
  /** Commits the writes of `effect` together. */
  readonly batch: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | JournalError, R>
  /** Stores `claim` unless its owner has one. Returns the claim stored for the owner and whether this call wrote it. */
  readonly insertClaim: (
    claim: Claim
  ) => Effect.Effect<{ readonly claim: Claim; readonly inserted: boolean }, JournalError>
  /** Replaces the claim of `claim.owner` by `claim` if the stored one matches `where`; whether it did. */
  readonly replaceClaim: (claim: Claim, where: ClaimWhere) => Effect.Effect<boolean, JournalError>
  readonly getClaim: (owner: string) => Effect.Effect<Option.Option<Claim>, JournalError>
  /** Deletes the claim of `owner` if `holder` holds it; whether it did. */
  readonly deleteClaim: (owner: string, holder: string) => Effect.Effect<boolean, JournalError>
}

/**
 * Which claim a backend `replaceClaim` may replace: the one `holder` holds, and, when given, only while it expires at
 * `expiresAt` (what the caller read), so that a holder that renewed in the meantime keeps it.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClaimWhere {
  readonly holder: string
  readonly expiresAt?: number | undefined
}

/**
 * The longest key a journal accepts, so that every SQL server can index it (`VARCHAR(255)`).
 *
 * @since 0.1.0
 * @category models
 */
export const maxKeyLength = 255

/**
 * Builds a journal on a storage backend. Times come from the `Clock`. The journal also knows which keys fibers of
 * this process run (`running`), which the storage cannot tell from what a crash left behind; a new journal on the
 * same storage, as after a restart, runs nothing, and holds no claim. `identity` and `liveness` describe the process
 * for claims (see {@link Identity}); without them a claim is taken over only when it expires.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal } from "@lifeline/kernel"
 *
 * const journal = Effect.flatMap(Journal.makeMemoryBackend, (backend) =>
 *   Journal.make(backend, { identity: { pid: 4242, host: "build-1" } }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (backend: Backend, options?: MakeOptions) => Effect.Effect<Journal.Service> = internal.make

/**
 * A backend that keeps rows in a `Ref`: nothing survives the process.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemoryBackend: Effect.Effect<Backend> = internal.makeMemoryBackend

/**
 * A journal in memory.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal } from "@lifeline/kernel"
 *
 * const journal = Journal.makeMemory
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
 * import { Journal } from "@lifeline/kernel"
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
 * The name of the host that owns the operations this program begins: `track` records it and `Recovery` recovers only
 * its operations. Hosts that share one journal (one SQL server) must use distinct, stable names; the default,
 * `"local"`, suits a journal of its own.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal } from "@lifeline/kernel"
 *
 * const program = Effect.gen(function*() {
 *   return yield* Journal.Owner // "hermes-host-1"
 * }).pipe(Effect.provide(Journal.layerOwner("hermes-host-1")))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const Owner: Context.Reference<string> = Context.Reference<string>("@lifeline/kernel/Journal/Owner", {
  defaultValue: () => "local"
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layerOwner = (owner: string): Layer.Layer<never> => Layer.succeedContext(Context.make(Owner, owner))

/**
 * Claims the current {@link Owner} (or `options.owner`) for the Scope, through the journal in context: see
 * `Journal.Service.claim`. `Recovery.run` claims the owner itself; claim it earlier to refuse a second instance
 * before doing anything else.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal } from "@lifeline/kernel"
 *
 * const program = Effect.gen(function*() {
 *   const claim = yield* Journal.claim({ ttl: "10 seconds" })
 *   // ... this process is the owner's only live host until the Scope closes
 *   return claim.expiresAt
 * }).pipe(
 *   Effect.catchTag("OwnerInUse", (error) => Effect.logError(`already running: pid ${error.pid}`)),
 *   Effect.scoped,
 *   Effect.provide(Journal.layerMemory)
 * )
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const claim: (
  options?: ClaimOptions & { readonly owner?: string | undefined }
) => Effect.Effect<Claim, OwnerInUse | JournalError, Journal | Scope.Scope> = internal.claim

/**
 * How a value is written to the journal as an error: a tagged error or an `Error` keeps its `_tag`, `name`, `message`
 * and own fields, anything that is not JSON is dropped. Used by `fail` and `track`.
 *
 * @example
 * ```ts
 * import { Journal } from "@lifeline/kernel"
 *
 * Journal.errorToJson(new Error("boom")) // { name: "Error", message: "boom" }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const errorToJson: (error: unknown) => unknown = internal.errorToJson

/**
 * Options of {@link track}. With `result`, the operation's value is stored on completion, and tracking a key that is
 * already completed returns the stored value instead of running the operation again.
 *
 * @since 0.1.0
 * @category models
 */
export interface TrackOptions<A, I> {
  readonly result?: Schema.Codec<A, I> | undefined
}

/**
 * Runs `effect` as a journaled operation: `begin` before it starts (durably, under the current {@link Owner}),
 * `complete` with its value after, `fail` with its error or defect.
 *
 * If the key is already known, the effect does not run: a completed key returns its stored value when `result` is
 * given and fails with a `Conflict` otherwise; an unfinished key (running here, or left by a crash and awaiting
 * `Recovery`) fails with a `Conflict`. A `Failed` key is retried, as one more attempt.
 *
 * Interruption leaves the entry `InFlight`: the operation did not end, and whether it had an effect is unknown, which
 * is exactly what a crash or a kill leaves behind, so both are recovered the same way. A failure with a kernel
 * `ShutdownError` (a call cut off by the connection's shutdown) is treated the same, not as the operation's failure.
 * The shutdown, which knows better, records it (`Recovery.recordShutdown`: `NeedsRecovery` after a drain timeout,
 * `Failed` after a fail-fast stop); without that, `Recovery` decides at the next start. If recording the end fails,
 * the caller gets the `JournalError`, since the journal then disagrees with what happened.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Journal } from "@lifeline/kernel"
 *
 * const callTool = Effect.succeed({ ok: true }).pipe(
 *   Journal.track("tool", "turn-1/tool-0", { name: "search" }, {
 *     result: Schema.Struct({ ok: Schema.Boolean })
 *   })
 * )
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const track: {
  <A, I>(
    kind: string,
    key: string,
    payload: unknown,
    options: TrackOptions<A, I> & { readonly result: Schema.Codec<A, I> }
  ): <E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | JournalError, R | Journal>
  (
    kind: string,
    key: string,
    payload: unknown,
    options?: TrackOptions<any, any>
  ): <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | JournalError, R | Journal>
} = internal.track
