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
 * the guardian then exits at once.
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
import * as ChildProcess from "node:child_process"
import type { Writable } from "node:stream"
import { source } from "./internal/guardianScript.js"

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

const defaultGrace = 1000

interface Guardian {
  readonly child: ChildProcess.ChildProcess
  readonly input: Writable
}

let guardian: Guardian | undefined
/** What is watched now, by leader pid: sent again to a guardian that replaces one that died. */
const watched = new Map<number, string>()

const spawnGuardian = (): Guardian | undefined => {
  let child: ChildProcess.ChildProcess
  try {
    child = ChildProcess.spawn(process.execPath, ["-e", source], {
      // A session of its own: the terminal's SIGINT and SIGHUP to the host's job do not reach it.
      detached: true,
      // No output: a guardian that held the host's stdout or stderr would keep a reader of the host waiting.
      stdio: ["pipe", "ignore", "ignore"],
      // Nothing of the host's `NODE_OPTIONS` (a loader, `--inspect`) and no directory kept busy.
      env: {},
      cwd: "/"
    })
  } catch {
    return undefined
  }
  const input = child.stdin
  if (input === null) return undefined
  const self: Guardian = { child, input }
  const lost = () => {
    if (guardian === self) guardian = undefined
  }
  // A guardian that failed to start, or was killed: the next watch starts another and tells it everything again.
  child.once("error", lost)
  child.once("exit", lost)
  input.on("error", lost)
  child.unref()
  ;(input as Writable & { unref?: () => void }).unref?.()
  return self
}

const send = (line: string): void => {
  if (guardian === undefined) {
    guardian = spawnGuardian()
    // A new guardian is told everything watched now, this line included.
    for (const watch of watched.values()) guardian?.input.write(watch)
    return
  }
  // A pipe write is tried at once, in this call: the line is in the pipe before a SIGKILL can come.
  guardian.input.write(line)
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
export const watch = (pid: number, options?: WatchOptions): () => void => {
  if (process.platform === "win32") return () => {}
  const line = `+ ${pid} ${Math.round(options?.startedAt ?? Date.now())} ${
    Math.max(0, Math.round(options?.graceMillis ?? defaultGrace))
  }\n`
  watched.set(pid, line)
  send(line)
  let done = false
  return () => {
    if (done) return
    done = true
    if (watched.get(pid) !== line) return
    watched.delete(pid)
    guardian?.input.write(`- ${pid}\n`)
  }
}

/**
 * The pid of this process's guardian while one runs, for tests and diagnostics.
 *
 * @since 0.2.0
 * @category combinators
 */
export const guardianPid = (): number | undefined => guardian?.child.pid
