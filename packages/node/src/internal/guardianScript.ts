/**
 * The program of the guardian process (`NodeGuardian`), run as `node -e <source>`: plain CommonJS with Node's
 * built-ins only, no file of its own to find (the host may be bundled, or run from TypeScript sources), nothing to
 * load but Node itself.
 *
 * It reads lines from its stdin, whose write end only the host holds: `+ <pid> <startedAt> <graceMs>` watches a
 * process group the host started (its leader `pid`, spawned at `startedAt`, epoch ms), `- <pid>` forgets it. When
 * its stdin ends, the host is gone (however it died: a clean exit has forgotten everything first): each watched
 * group still there gets SIGTERM, SIGKILL `graceMs` later, with the checks `NodeReaper` makes against reused pids
 * (internal/reaper.ts: the leader's start time within 3 s of the record, a member that started before the record or,
 * with the leader gone, outside the leader's session, and the group is left alone). Then the guardian exits.
 *
 * @internal
 */

/**
 * @internal
 */
export const source = String.raw`"use strict"
const fs = require("node:fs")
const childProcess = require("node:child_process")
const startTolerance = 3000
const poll = 25
const procFound = process.platform === "linux" && fs.existsSync("/proc/self/stat")
const watched = new Map()
let buffer = ""
let swept = false

const bootMillis = () => {
  const match = /^btime (\d+)$/m.exec(fs.readFileSync("/proc/stat", "latin1"))
  return match === null ? undefined : Number(match[1]) * 1000
}
const boot = procFound ? bootMillis() : undefined
// Start times from /proc need the boot time: without it, the ps path (a running leader only).
const hasProc = boot !== undefined

// Fields from the state on, counted from the last ")": the command name may hold spaces and parentheses.
const stat = (pid) => {
  try {
    const text = fs.readFileSync("/proc/" + pid + "/stat", "latin1")
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
    return {
      pid: Number(pid),
      state: fields[0],
      group: Number(fields[2]),
      session: Number(fields[3]),
      startedAt: boot + Math.round((Number(fields[19]) * 1000) / 100)
    }
  } catch {
    return undefined
  }
}
const exited = (info) => info === undefined || info.state === "Z" || info.state === "X"

// The live members of a group, zombies left out.
const members = (pgid) => {
  const found = []
  for (const name of fs.readdirSync("/proc")) {
    const code = name.charCodeAt(0)
    if (code < 48 || code > 57) continue
    const info = stat(name)
    if (info !== undefined && info.group === pgid && !exited(info)) found.push(info)
  }
  return found
}

const probe = (target) => {
  try {
    process.kill(target, 0)
    return true
  } catch (error) {
    return error.code === "EPERM"
  }
}
const send = (target, signal) => {
  try {
    process.kill(target, signal)
  } catch {
    // gone
  }
}
const psStart = (pid) => {
  try {
    const started = Date.parse(childProcess.execFileSync("ps", ["-o", "lstart=", "-p", String(pid)], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"]
    }).trim())
    return Number.isNaN(started) ? undefined : started
  } catch {
    return undefined
  }
}

// What to signal for one watched group, and how to tell that it is gone: none when it is not ours any more.
const targetOf = (pid, record) => {
  if (!hasProc) {
    // Without /proc the members cannot be checked: only a running leader that started when recorded is ours.
    if (!probe(pid)) return undefined
    const started = psStart(pid)
    if (started === undefined || Math.abs(started - record.startedAt) > startTolerance) return undefined
    return { signals: [-pid, pid], gone: () => !probe(-pid) && !probe(pid) }
  }
  const leader = stat(pid)
  if (leader !== undefined && Math.abs(leader.startedAt - record.startedAt) > startTolerance) return undefined
  const running = !exited(leader)
  const group = members(pid)
  const strangers = group.filter((member) =>
    member.pid !== pid &&
    (member.startedAt < record.startedAt - startTolerance || (leader === undefined && member.session !== pid))
  )
  const signalGroup = strangers.length === 0 && group.length > 0
  const signalLeader = running && !(signalGroup && group.some((member) => member.pid === pid))
  if (!signalGroup && !signalLeader) return undefined
  const signals = [...(signalGroup ? [-pid] : []), ...(signalLeader ? [pid] : [])]
  return {
    signals,
    gone: () => (!signalGroup || !probe(-pid) || members(pid).length === 0) && (!signalLeader || exited(stat(pid)))
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const until = async (targets, ms) => {
  const deadline = Date.now() + ms
  while (targets.some((target) => !target.gone()) && Date.now() < deadline) await sleep(poll)
}

const sweep = async () => {
  if (swept) return
  swept = true
  const targets = []
  for (const [pid, record] of watched) {
    try {
      const target = targetOf(pid, record)
      if (target !== undefined) targets.push({ ...target, grace: record.grace })
    } catch {
      // One group that cannot be read does not keep the others running.
    }
  }
  for (const target of targets) for (const signal of target.signals) send(signal, "SIGTERM")
  const grace = Math.max(0, ...targets.map((target) => target.grace))
  await until(targets, grace)
  for (const target of targets) if (!target.gone()) for (const signal of target.signals) send(signal, "SIGKILL")
  await until(targets, grace)
  process.exit(0)
}

process.stdin.setEncoding("latin1")
process.stdin.on("data", (chunk) => {
  buffer += chunk
  let end
  while ((end = buffer.indexOf("\n")) >= 0) {
    const [op, pid, startedAt, grace] = buffer.slice(0, end).split(" ")
    buffer = buffer.slice(end + 1)
    // A line that does not parse is dropped: a NaN start time would pass every comparison of the checks, and pid 1
    // (or less) would make kill(-pid) signal every process.
    const numbers = [Number(pid), Number(startedAt), Number(grace)]
    if (op === "+" && numbers.every(Number.isFinite) && numbers[0] > 1) {
      watched.set(numbers[0], { startedAt: numbers[1], grace: numbers[2] })
    } else if (op === "-") watched.delete(Number(pid))
  }
})
process.stdin.on("end", () => void sweep())
process.stdin.on("error", () => void sweep())
`
