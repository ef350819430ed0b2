/**
 * What a `Journal` needs from Node: who this process is, recorded with its owner claims (`identity`), and whether the
 * process that holds a claim on this host still runs (`liveness`). Pass both to `Journal.make` over any backend;
 * `@lifeline/sqlite`'s `SqliteJournal` does.
 *
 * @since 0.1.0
 */
import type * as JournalClaim from "@lifeline/journal/JournalClaim"
import type * as Effect from "effect/Effect"
import * as internal from "./internal/journalIdentity.js"

/**
 * This process as its claims record it: its pid, the host name and when it started (epoch ms), which tells it apart
 * from a later process that reuses the pid.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { NodeJournal } from "@lifeline/node"
 *
 * const pid = Effect.map(NodeJournal.identity, (self) => self.pid)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const identity: Effect.Effect<JournalClaim.Identity> = internal.identity

/**
 * Whether the holder of a claim made on this host still runs: `Dead` when its pid is gone or now names a process
 * that started later, `Alive` when the pid runs and started when the claim says, `Unknown` when no start time can
 * be read.
 *
 * @example
 * ```ts
 * import { Journal, JournalBackend } from "@lifeline/journal"
 * import { NodeJournal } from "@lifeline/node"
 *
 * declare const backend: JournalBackend.Backend
 * const journal = Journal.make(backend, { liveness: NodeJournal.liveness })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const liveness: JournalClaim.Liveness = internal.liveness
