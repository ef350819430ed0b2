/**
 * One guardian process per host process, so that a host that dies without running any of its code (SIGKILL, the
 * out-of-memory killer, a signal it has no handler for) and is never started again leaves no child running. The
 * journal's sweep runs at the next start of a host; the guardian runs at the host's death.
 *
 * The guardian is a small Node program (no module of its own to load: `node -e`), spawned detached (a session of its
 * own: no terminal signal reaches it) when the first process group is watched, and kept for the host's life without
 * keeping the host's event loop alive. Its stdin is a pipe whose write end only the host holds: the host writes a line
 * per group it starts and per group that ended; when the host dies, however it dies, the kernel closes that end, the
 * guardian reads the end of its input, stops each watched group still there (SIGTERM, SIGKILL after the group's grace,
 * with `NodeReaper`'s checks against reused pids), and exits. A host that exits cleanly has forgotten its groups:
 * the guardian then exits at once. A guardian that dies while its host runs is replaced, and told what is watched.
 *
 * Linux has `PR_SET_PDEATHSIG` for this, but Node cannot set it in a child (no hook between fork and exec), it exists
 * on Linux only, and it names one signal for the direct child only, not its group. A guardian works wherever there are
 * process groups, for any command, at the cost of one idle process per host (not one per child).
 *
 * Hand-written on `node:child_process`, outside Effect: it must work from Promise code, and the watch must be in
 * place the moment a child is spawned, with no fiber or runtime between the host's death and the guardian's sweep.
 *
 * @since 0.2.0
 */
import * as internal from "./internal/guardian.js"

/**
 * @since 0.2.0
 * @category models
 */
export interface WatchOptions {
  /** When the process was spawned, epoch milliseconds (the start time a reused pid is told apart by). Default now. */
  readonly startedAt?: number | undefined
  /** After the guardian's SIGTERM to the group, how long before SIGKILL. Default 1 s (the kernel's `killGrace`). */
  readonly graceMillis?: number | undefined
}

/**
 * Watches the process group led by `pid` (a child spawned `detached`; for one that is not, the process alone): if
 * this process dies before the returned function is called, the guardian stops it. Call the returned function once
 * the group is gone (or is meant to outlive this process). Does nothing on Windows, which has no process groups.
 *
 * @example
 * ```ts
 * import { NodeGuardian } from "@lifeline/node"
 * import * as ChildProcess from "node:child_process"
 *
 * const child = ChildProcess.spawn("server", [], { detached: true })
 * const unwatch = NodeGuardian.watch(child.pid!)
 * child.once("exit", unwatch)
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const watch: (pid: number, options?: WatchOptions) => () => void = internal.watch

/**
 * The pid of this process's guardian while one runs, for tests and diagnostics.
 *
 * @since 0.2.0
 * @category combinators
 */
export const guardianPid: () => number | undefined = internal.guardianPid
