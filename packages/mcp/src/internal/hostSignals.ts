/**
 * What a host's death by a signal would have done to its servers, had they stayed in its process group. Each server
 * runs in a group of its own (so that its whole group can be stopped), which takes it out of the terminal's job: a
 * Ctrl-C (SIGINT), a closed terminal (SIGHUP) or a `kill` of the host (SIGTERM) no longer reaches it. A host that
 * handles the signal closes its transports itself; a host that does not would die at once and leave them running.
 *
 * So, while any server runs, and only for a signal the host has no listener of its own for, this module listens: it
 * sends the signal to each server's group (as the terminal would have) and ends its stdin, waits at most {@link grace} for the groups
 * to be gone, SIGKILLs what is left, and raises the signal again on the host, which then dies of it as it would have
 * (no listener is left). A listener the host adds later wins: at the signal, this module then does nothing.
 *
 * Hand-written on `process.on`: it must run when the host's own code (and its Effect runtime) is about to die.
 *
 * @internal
 */
import * as Fs from "node:fs"

/** The signals that kill a host that has no listener for them, and that a terminal sends to its foreground job. */
const signals: ReadonlyArray<NodeJS.Signals> = ["SIGINT", "SIGHUP", "SIGTERM"]

/**
 * How long the servers' groups have, after the signal, before SIGKILL: the host's death waits for it.
 *
 * @internal
 */
export const grace = 1000

const servers = new Map<number, () => void>()
const listeners = new Map<NodeJS.Signals, () => void>()

const hasProc = process.platform === "linux"

/**
 * Whether the group has a live member. Zombies do not count, on Linux: a server's helpers are reparented to init once
 * the server exits, and an init that reaps late would keep the host waiting its whole grace for nothing.
 */
const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
  } catch {
    return false
  }
  if (!hasProc) return true
  for (const name of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = Fs.readFileSync(`/proc/${name}/stat`, "latin1")
      // After the command name (which may hold spaces): state, ppid, pgrp.
      const [state, , group] = stat.slice(stat.lastIndexOf(")") + 2).split(" ", 3)
      if (group === String(pgid) && state !== "Z") return true
    } catch {
      // Gone in the meantime.
    }
  }
  return false
}

const signalGroup = (pid: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(-pid, signal)
  } catch {
    // The group is gone.
  }
}

const uninstall = (): void => {
  for (const [signal, listener] of listeners) process.off(signal, listener)
  listeners.clear()
}

const onSignal = async (signal: NodeJS.Signals): Promise<void> => {
  // The host listens too: its own shutdown closes the transports.
  if (process.listenerCount(signal) > 1) return
  uninstall()
  const groups = [...servers.keys()]
  for (const pid of groups) signalGroup(pid, signal)
  // And the end of their stdin, which the host's death would have brought too (some servers wait for it).
  for (const endInput of servers.values()) endInput()
  const deadline = Date.now() + grace
  while (groups.some(groupAlive) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
  for (const pid of groups) signalGroup(pid, "SIGKILL")
  process.kill(process.pid, signal)
}

const install = (): void => {
  for (const signal of signals) {
    if (listeners.has(signal) || process.listenerCount(signal) > 0) continue
    const listener = () => void onSignal(signal)
    listeners.set(signal, listener)
    process.on(signal, listener)
  }
}

/**
 * Registers the leader of a server's process group, and how to end its stdin, while it runs; the returned function
 * unregisters it. The listeners are there while at least one server is registered.
 *
 * @internal
 */
export const register = (pid: number, endInput: () => void): () => void => {
  if (process.platform === "win32") return () => {}
  servers.set(pid, endInput)
  install()
  return () => {
    servers.delete(pid)
    if (servers.size === 0) uninstall()
  }
}
