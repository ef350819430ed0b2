/**
 * Owner claims: which host owns the operations it begins (`Owner`), and the claim that makes a journal the owner's
 * only live holder, renewed on the `Clock` and taken over when its holder stops renewing it or its process is gone.
 * `Recovery` acts only under a claim, so that another live host's running work is never taken for a crash's
 * leftovers.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/journalClaim.js"
import * as unreleased from "./internal/journalUnreleased.js"
import type * as Journal from "./Journal.js"
import type { JournalError, OwnerInUse } from "./JournalError.js"

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
 * Options of a claim. `ttl` (default {@link defaultTtl}, 30 s) is how long the claim holds without renewal: the holder
 * renews it every third of it, and a holder that stops renewing (it crashed, or hangs) loses it once `ttl` has
 * passed. Clocks of hosts that share a journal must agree to well within `ttl`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClaimOptions {
  readonly ttl?: Duration.Input | undefined
}

/**
 * How long a claim holds without renewal unless `ttl` says otherwise.
 *
 * @since 0.1.0
 * @category models
 */
export const defaultTtl: Duration.Input = internal.defaultTtl

/**
 * The process a journal runs in, recorded with its claims so that a holder can be named and, on the same host,
 * checked (see {@link Liveness}). `startedAt` is when the process started (epoch ms), which tells it apart from a
 * later process that reused its pid. The in-memory journal knows none of it; the SQL journals fill it in.
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
 * `Unknown` leaves it to expiry. Node's check is `NodeJournal.liveness` in `@lifeline/node`.
 *
 * @since 0.1.0
 * @category models
 */
export type Liveness = (claim: Claim) => Effect.Effect<"Alive" | "Dead" | "Unknown">

/**
 * The name of the host that owns the operations this program begins: `JournaledOperation.run` records it and `Recovery`
 * recovers only its operations. Hosts that share one journal (one SQL server) must use distinct, stable names; the
 * default, `"local"`, suits a journal of its own.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { JournalClaim } from "@lifeline/journal"
 *
 * const program = Effect.gen(function*() {
 *   return yield* JournalClaim.Owner // "hermes-host-1"
 * }).pipe(Effect.provide(JournalClaim.layerOwner("hermes-host-1")))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const Owner: Context.Reference<string> = internal.Owner

/**
 * Sets the {@link Owner} of the program.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Journal, JournalClaim } from "@lifeline/journal"
 *
 * const JournalLive = Layer.merge(Journal.layerMemory, JournalClaim.layerOwner("host-1"))
 * ```
 *
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
 * import { Journal, JournalClaim } from "@lifeline/journal"
 *
 * const program = Effect.gen(function*() {
 *   const claim = yield* JournalClaim.claim({ ttl: "10 seconds" })
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
) => Effect.Effect<Claim, OwnerInUse | JournalError, Journal.Journal | Scope.Scope> = internal.claim

/**
 * Deletes the claim on `owner` that the journal holding `token` (`Claim.holder`) let go of but left stored, its
 * storage unreachable at the time. On the same host such a claim does not expire while that journal's process lives
 * (a live holder keeps its claim past expiry), so it would hold up the owner's next claimant for as long. One try:
 * `"held again"` when this journal holds the owner again, `"not ours"` when the claim is gone or someone else's (taken
 * meanwhile), `"deleted"` when it was taken again and let go; a `Storage` error when the journal still cannot reach
 * its storage, for the caller to retry (the fleet retries every 500 ms for ten minutes).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal, JournalClaim } from "@lifeline/journal"
 *
 * const program = Effect.gen(function*() {
 *   const journal = yield* Journal.makeMemory
 *   const token = yield* Effect.scoped(Effect.map(journal.claim("host-a", { ttl: "10 seconds" }), (c) => c.holder))
 *   return yield* JournalClaim.deleteUnreleased(journal, "host-a", token, { ttl: "10 seconds" }) // "not ours": gone
 * })
 * ```
 *
 * @since 0.2.0
 * @category combinators
 */
export const deleteUnreleased: (
  journal: Journal.Journal.Service,
  owner: string,
  token: string,
  options: ClaimOptions
) => Effect.Effect<"deleted" | "held again" | "not ours", JournalError> = unreleased.deleteUnreleased
