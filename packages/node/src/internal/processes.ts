/**
 * What the operating system says about processes and process groups, and when a process started. On Linux the answers
 * come from `/proc`, where a zombie (exited, not yet reaped by its parent) can be told apart from a live process: in a
 * container whose init does not reap orphans, `kill(pid, 0)` would report a dead grandchild as alive forever.
 * Elsewhere `kill(pid, 0)` is used, and `ps` for start times.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as FsPromises from "node:fs/promises"

const hasProc = process.platform === "linux" && Fs.existsSync("/proc/self/stat")

// Linux reports start times in USER_HZ ticks, which is 100 on every architecture Node runs on.
const userHz = 100

// The command name (field 2) is in parentheses and may itself contain spaces and parentheses: the fields from the
// state (field 3) on are counted from the last ")".
const statFields = (text: string): Array<string> => text.slice(text.lastIndexOf(")") + 2).split(" ")

interface Stat {
  readonly state: string
  readonly ppid: number
  readonly pgrp: number
}

const readStat = (pid: number | string): Stat | undefined => {
  try {
    const fields = statFields(Fs.readFileSync(`/proc/${pid}/stat`, "latin1"))
    return { state: fields[0], ppid: Number(fields[1]), pgrp: Number(fields[2]) }
  } catch {
    return undefined
  }
}

const isDead = (stat: Stat | undefined): boolean => stat === undefined || stat.state === "Z" || stat.state === "X"

/**
 * `process.kill(target, signal)`, and the error code when it fails (`ESRCH`: no such process or group; `EPERM`: not
 * ours), or `undefined` when it was sent. Node reports a failed kill only by throwing, and the error it builds records
 * the stack: on a stop's path, where a group that is gone is the common case, that stack costs more than the system
 * call. Its depth is set to zero only for this one synchronous call (no other code runs before it is restored).
 *
 * @internal
 */
export const kill = (target: number, signal: NodeJS.Signals | 0): string | undefined => {
  const depth = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    process.kill(target, signal)
    return undefined
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? "UNKNOWN"
  } finally {
    Error.stackTraceLimit = depth
  }
}

const probe = (target: number): boolean => {
  const code = kill(target, 0)
  return code === undefined || code === "EPERM"
}

/**
 * Whether `pid` is a live process (not a zombie).
 *
 * @internal
 */
export const isAlive = (pid: number): boolean => hasProc ? !isDead(readStat(pid)) : probe(pid)

/**
 * The live (non-zombie) members of process group `pgid`. Empty where `/proc` is not available.
 *
 * @internal
 */
export const groupMembers = (pgid: number): Array<number> => {
  if (!hasProc) return []
  const members: Array<number> = []
  let entries: Array<string>
  try {
    entries = Fs.readdirSync("/proc")
  } catch {
    return members
  }
  for (const entry of entries) {
    const code = entry.charCodeAt(0)
    if (code < 48 || code > 57) continue
    const stat = readStat(entry)
    if (stat !== undefined && stat.pgrp === pgid && !isDead(stat)) members.push(Number(entry))
  }
  return members
}

/**
 * Whether process group `pgid` has a live member.
 *
 * @internal
 */
export const isGroupAlive = (pgid: number): boolean =>
  // kill(-pgid, 0) fails with ESRCH when the group has no member at all, zombies included: the scan of /proc, which
  // costs milliseconds on a busy machine, is needed only to tell zombies from live members.
  process.platform === "win32" ? false : hasProc ? probe(-pgid) && groupMembers(pgid).length > 0 : probe(-pgid)

/**
 * A process as `/proc/<pid>/stat` describes it; `startedAt` is in epoch milliseconds, to the tick (10 ms).
 *
 * @internal
 */
export interface ProcStat {
  readonly state: string
  readonly processGroup: number
  readonly session: number
  readonly startedAt: number
}

/**
 * A process found by a scan of `/proc`.
 *
 * @internal
 */
export interface ProcessEntry extends ProcStat {
  readonly pid: number
}

const bootMillis = (system: string): number | undefined => {
  const bootSeconds = /^btime (\d+)$/m.exec(system)
  return bootSeconds === null ? undefined : Number(bootSeconds[1]) * 1000
}

const parseProcStat = (text: string, boot: number): ProcStat | undefined => {
  const fields = statFields(text)
  if (fields.length < 20) return undefined
  return {
    state: fields[0],
    processGroup: Number(fields[2]),
    session: Number(fields[3]),
    // A whole number of milliseconds already while USER_HZ is 100; rounded so that it stays one otherwise.
    startedAt: boot + Math.round((Number(fields[19]) * 1000) / userHz)
  }
}

/**
 * The processes of group `pgid` that have not exited (zombies are left out), with their session and start time: one
 * scan of `/proc`. None where `/proc` is not available, so that "no member" and "cannot tell" stay apart.
 *
 * @internal
 */
export const groupEntries = (pgid: number): Option.Option<ReadonlyArray<ProcessEntry>> => {
  if (!hasProc) return Option.none()
  let boot: number | undefined
  let entries: Array<string>
  try {
    boot = bootMillis(Fs.readFileSync("/proc/stat", "latin1"))
    entries = Fs.readdirSync("/proc")
  } catch {
    return Option.none()
  }
  if (boot === undefined) return Option.none()
  const members: Array<ProcessEntry> = []
  for (const entry of entries) {
    const code = entry.charCodeAt(0)
    if (code < 48 || code > 57) continue
    let text: string
    try {
      text = Fs.readFileSync(`/proc/${entry}/stat`, "latin1")
    } catch {
      continue // exited since the directory was read
    }
    const stat = parseProcStat(text, boot)
    if (stat !== undefined && stat.processGroup === pgid && stat.state !== "Z" && stat.state !== "X") {
      members.push({ pid: Number(entry), ...stat })
    }
  }
  return Option.some(members)
}

/**
 * What `kill(-pgid, 0)` says about process group `pgid`: it has a member (a zombie counts), it has none, or its
 * members belong to another user (EPERM). `Gone` on Windows, which has no process groups.
 *
 * @internal
 */
export const probeGroup = (pgid: number): "Alive" | "Gone" | "Foreign" => {
  if (process.platform === "win32") return "Gone"
  const code = kill(-pgid, 0)
  return code === undefined ? "Alive" : code === "EPERM" ? "Foreign" : "Gone"
}

/**
 * What `/proc` says about `pid`: none where there is no `/proc` or no such process.
 *
 * @internal
 */
export const procStat = (pid: number): Effect.Effect<Option.Option<ProcStat>> =>
  Effect.promise(async () => {
    try {
      const [stat, system] = await Promise.all([
        FsPromises.readFile(`/proc/${pid}/stat`, "utf8"),
        FsPromises.readFile("/proc/stat", "utf8")
      ])
      const boot = bootMillis(system)
      return Option.fromNullishOr(boot === undefined ? undefined : parseProcStat(stat, boot))
    } catch {
      return Option.none()
    }
  })

/**
 * When `pid` started, as `ps -o lstart=` prints it: to the second, in local time (macOS, the BSDs, and Linux too).
 *
 * @internal
 */
export const psStartTime = (pid: number): Effect.Effect<Option.Option<number>> =>
  Effect.callback<Option.Option<number>>((resume) => {
    const child = ChildProcess.execFile("ps", ["-o", "lstart=", "-p", String(pid)], (error, stdout) => {
      const startedAt = error === null ? Date.parse(stdout.trim()) : NaN
      resume(Effect.succeed(Number.isNaN(startedAt) ? Option.none() : Option.some(startedAt)))
    })
    return Effect.sync(() => child.kill())
  })

/**
 * When `pid` started, in epoch milliseconds: from `/proc` on Linux, from `ps` elsewhere, none on Windows.
 *
 * @internal
 */
export const startTime = (pid: number): Effect.Effect<Option.Option<number>> =>
  process.platform === "linux"
    ? Effect.map(procStat(pid), Option.map((stat) => stat.startedAt))
    : process.platform === "win32"
    ? Effect.succeedNone
    : psStartTime(pid)
