/**
 * Kills the child processes a crashed host left behind, for `Recovery.run({ reap })` or `ProcessRecord.reapOrphans`: a
 * recorded process and its process group, after checking that they are still the ones the host spawned. Works with
 * any `Journal` that recorded the spawns (`NodeChildProcess.make({ journal })`).
 *
 * @since 0.1.0
 */
import type * as ProcessRecord from "@lifeline/journal/ProcessRecord"
import type * as Duration from "effect/Duration"
import * as internal from "./internal/reaper.js"

/**
 * Kills an orphan child process for `Recovery.run({ reap })` or `ProcessRecord.reapOrphans`: if a process with the
 * recorded pid is alive and started when the record says (Linux `/proc`, `ps` elsewhere), it gets SIGTERM (its
 * process group when it leads one), then SIGKILL after `grace` (default 2 s). A pid that now names another process
 * is left alone (`Reused`), as is one whose start time cannot be read (`Unverified`). Bounds run on the Clock.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Recovery } from "@lifeline/journal"
 * import { NodeReaper } from "@lifeline/node"
 * import { SqliteJournal } from "@lifeline/sqlite"
 *
 * const startUp = Recovery.run({ reap: NodeReaper.reapProcess({ grace: "1 second" }) }).pipe(
 *   Effect.scoped,
 *   Effect.provide(SqliteJournal.layerConfig)
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const reapProcess: (options?: { readonly grace?: Duration.Input | undefined }) => ProcessRecord.Reaper =
  internal.reapProcess

/**
 * What `reapProcess` fails with when an orphan is still there after SIGKILL and `grace` (a process stuck in the
 * kernel): the recovery records its entry as `Failed` with this error and lists it in its report's `errors`.
 *
 * @example
 * ```ts
 * import { NodeReaper } from "@lifeline/node"
 *
 * const survived = (error: unknown) => error instanceof NodeReaper.ReapError && error.reason === "Survived"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export const ReapError = internal.ReapError
/**
 * @since 0.1.0
 * @category errors
 */
export type ReapError = internal.ReapError
