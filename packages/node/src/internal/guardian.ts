/**
 * The host's side of `NodeGuardian`: the guardian process, spawned with the first watch, and what it was told.
 *
 * @internal
 */
import * as ChildProcess from "node:child_process"
import type { Writable } from "node:stream"
import type { WatchOptions } from "../NodeGuardian.js"
import { source } from "./guardianScript.js"

const defaultGrace = 1000
const maxGrace = 2_147_483_647
/** How long a guardian must have run for its loss to start another at once. */
const respawnAfter = 1000

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
    // Named in `ps` (the title replaces the command line, which would show the whole script).
    child = ChildProcess.spawn(process.execPath, ["--title=lifeline-guardian", "-e", source], {
      // A session of its own: the terminal's SIGINT and SIGHUP to the host's job do not reach it.
      detached: true,
      // No output: a guardian that held the host's stdout or stderr would keep a reader of the host waiting.
      stdio: ["pipe", "ignore", "ignore"],
      // Nothing of the host's `NODE_OPTIONS` (a loader, `--inspect`) and no directory kept busy; `PATH` for `ps`
      // (systems without /proc). Under Electron, `process.execPath` is the app: it runs the program as Node.
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        ...(process.versions.electron === undefined ? {} : { ELECTRON_RUN_AS_NODE: "1" })
      },
      cwd: "/"
    })
  } catch {
    return undefined
  }
  const input = child.stdin
  if (input === null) return undefined
  const self: Guardian = { child, input }
  const spawnedAt = Date.now()
  const lost = () => {
    if (guardian !== self) return
    guardian = undefined
    // A guardian killed while groups are watched is replaced at once (and told everything again), unless it did not
    // live a second: then the next watch tries again, so that a guardian that cannot run is not started in a loop.
    if (watched.size > 0 && Date.now() - spawnedAt >= respawnAfter) replace()
  }
  child.once("error", lost)
  child.once("exit", lost)
  input.on("error", lost)
  child.unref()
  ;(input as Writable & { unref?: () => void }).unref?.()
  return self
}

/**
 * The lines that end watches, not yet written: written together on the next turn of the event loop, or before the next
 * line that starts one. A pipe write wakes the guardian, which on a busy machine takes the CPU from the host: on the
 * path of every close, after the group is gone, it cost about half of the close of a server that exits at once. A line
 * lost with the host (it died before the turn) leaves the guardian watching a group that is gone: it then checks the
 * leader's start time before any signal, as for any group it watches, and finds nothing to stop.
 */
let unwatchedLines = ""
let flushScheduled = false

const flushUnwatched = (): void => {
  flushScheduled = false
  if (unwatchedLines === "") return
  const lines = unwatchedLines
  unwatchedLines = ""
  guardian?.input.write(lines)
}

/** A new guardian, told everything watched now. */
const replace = (): void => {
  // A new guardian is told only what is watched now: the watches that ended are not in it.
  unwatchedLines = ""
  guardian = spawnGuardian()
  for (const watch of watched.values()) guardian?.input.write(watch)
}

const send = (line: string): void => {
  if (guardian === undefined) return replace()
  // A pipe write is tried at once, in this call: the line is in the pipe before a SIGKILL can come.
  // After the ends of watches not yet written, in order: a pid reused by a new watch must not have its watch ended.
  const lines = unwatchedLines + line
  unwatchedLines = ""
  guardian.input.write(lines)
}

/**
 * @internal
 */
export const watch = (pid: number, options?: WatchOptions): () => void => {
  if (process.platform === "win32") return () => {}
  const grace = options?.graceMillis ?? defaultGrace
  // An infinite grace (a `killGrace` of "infinity") is the longest the guardian's timer takes: a line with `Infinity`
  // or `NaN` in it would not parse, and the group would not be watched at all.
  const graceMillis = Number.isNaN(grace) ? defaultGrace : Math.min(maxGrace, Math.max(0, Math.round(grace)))
  const startedAt = Math.round(options?.startedAt ?? Date.now())
  const line = `+ ${pid} ${Number.isFinite(startedAt) ? startedAt : Date.now()} ${graceMillis}\n`
  watched.set(pid, line)
  send(line)
  let done = false
  return () => {
    if (done) return
    done = true
    if (watched.get(pid) !== line) return
    watched.delete(pid)
    if (guardian === undefined) return
    unwatchedLines += `- ${pid}\n`
    if (!flushScheduled) {
      flushScheduled = true
      setImmediate(flushUnwatched)
    }
  }
}

/**
 * @internal
 */
export const guardianPid = (): number | undefined => guardian?.child.pid
