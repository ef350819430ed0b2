/**
 * What the operating system says about processes and process groups. On Linux the answers come from `/proc`, where a
 * zombie (exited, not yet reaped by its parent) can be told apart from a live process: in a container whose init does
 * not reap orphans, `kill(pid, 0)` would report a dead grandchild as alive forever. Elsewhere `kill(pid, 0)` is used.
 *
 * @internal
 */
import * as Fs from "node:fs"

const hasProc = process.platform === "linux" && Fs.existsSync("/proc/self/stat")

interface Stat {
  readonly state: string
  readonly ppid: number
  readonly pgrp: number
}

const readStat = (pid: number | string): Stat | undefined => {
  try {
    const text = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
    // The command name is in parentheses and may itself contain spaces and parentheses: read after the last one.
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
    return { state: fields[0], ppid: Number(fields[1]), pgrp: Number(fields[2]) }
  } catch {
    return undefined
  }
}

const isDead = (stat: Stat | undefined): boolean => stat === undefined || stat.state === "Z" || stat.state === "X"

const probe = (target: number): boolean => {
  try {
    process.kill(target, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
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
  process.platform === "win32" ? false : hasProc ? groupMembers(pgid).length > 0 : probe(-pgid)
