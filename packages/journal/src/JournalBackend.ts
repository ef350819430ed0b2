/**
 * The storage under a journal: what a backend (memory, SQLite, Postgres, or your own) must provide for `Journal.make`
 * to build a journal on it, as rows of text and numbers. Each method is one atomic step; `Journal.make` adds the
 * rules (statuses, attempts, idempotency, who runs what, claims) once for every backend. `makeMemory` is the backend
 * in memory; `JournalSql.makeBackend` the one on any Effect SQL client.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as internal from "./internal/journalMemory.js"
import type { Claim } from "./JournalClaim.js"
import type { Status } from "./JournalEntry.js"
import type { JournalError } from "./JournalError.js"

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
 * What a storage must provide for `Journal.make` to build a journal on it. Each method is one atomic step, durable
 * when its effect succeeds (outside `batch`).
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
 * A backend that keeps rows in a `Ref`: nothing survives the process. Two journals made on the same backend share its
 * rows and claims, as two processes share a database.
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
export const makeMemory: Effect.Effect<Backend> = internal.makeMemoryBackend
