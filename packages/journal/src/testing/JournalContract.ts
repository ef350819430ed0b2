/**
 * The journal contract as a test kit: the behaviour every journal backend must have for `Recovery` to be right
 * (idempotent begin, one end per entry, listing the unfinished work, guarded recovery steps, owner claims renewed,
 * expired, taken over and lost, concurrent journals on one store), as cases to run in any test framework against a
 * store of your own. Memory, SQLite and PostgreSQL run it; so should a third-party backend.
 *
 * The cases read the `Clock` and move it with `TestClock` (`@effect/vitest`'s `it.effect` provides one); a broken
 * rule dies with a `ContractViolation` that says which. Nothing here depends on a test framework.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as internal from "../internal/journalContract.js"
import * as checks from "../internal/journalContractChecks.js"
import type * as Journal from "../Journal.js"
import type * as JournalBackend from "../JournalBackend.js"

/**
 * One store under test: a database (a file, a server database, a memory backend) that journals share.
 *
 * @since 0.1.0
 * @category models
 */
export interface Store {
  /**
   * A new journal on this store, as a new process would open it: its own connection (so that two journals are two
   * clients, as concurrent as the store allows), nothing running, no claim. Closed with the Scope.
   */
  readonly open: Effect.Effect<Journal.Journal.Service, unknown, Scope.Scope>
  /**
   * The store's backend, to stage what a crashed process leaves behind (a claim that is no longer renewed) or what a
   * takeover does to a paused holder.
   */
  readonly backend: JournalBackend.Backend
}

/**
 * Makes a fresh, empty store for one case, removed with the Scope.
 *
 * @since 0.1.0
 * @category models
 */
export type MakeStore = Effect.Effect<Store, unknown, Scope.Scope>

/**
 * One rule of the contract: its name, and the effect that checks it (run it scoped, under a `TestClock`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Case {
  readonly name: string
  readonly run: Effect.Effect<void, unknown, Scope.Scope>
}

/**
 * A rule of the contract that a journal broke.
 *
 * @since 0.1.0
 * @category errors
 */
export const ContractViolation: new(message: string) => Error = checks.ContractViolation

/**
 * The cases of the contract, each on a store of its own from `makeStore`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Journal, JournalBackend } from "@lifeline/journal"
 * import { JournalContract } from "@lifeline/journal/testing"
 *
 * const memoryStore: JournalContract.MakeStore = Effect.map(JournalBackend.makeMemory, (backend) => ({
 *   backend,
 *   open: Journal.make(backend)
 * }))
 *
 * // with @effect/vitest:
 * // for (const { name, run } of JournalContract.cases(memoryStore)) it.effect(name, () => Effect.scoped(run))
 * const names = JournalContract.cases(memoryStore).map((rule) => rule.name)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const cases: (makeStore: MakeStore) => ReadonlyArray<Case> = internal.cases
