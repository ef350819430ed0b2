/**
 * Who this process is, for the journal's owner claims, and whether the process that holds a claim on this host is
 * still running: its pid alive (not a zombie) and started when the claim says, so that a reused pid is not taken for
 * the holder.
 *
 * @internal
 */
import type * as Journal from "@lifeline/kernel/Journal"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import { isAlive } from "./processes.js"

// Both start times are read the same way (below), so they agree to the tick on Linux and to the second elsewhere; a
// pid is not reused within seconds of the start of the process that had it.
const startTolerance = 2_000

// Linux reports start times in USER_HZ ticks, which is 100 on every architecture Node runs on.
const userHz = 100

const procStart = (pid: number): Effect.Effect<Option.Option<number>> =>
  Effect.promise(async () => {
    try {
      const [stat, system] = await Promise.all([
        Fs.readFile(`/proc/${pid}/stat`, "utf8"),
        Fs.readFile("/proc/stat", "utf8")
      ])
      const boot = /^btime (\d+)$/m.exec(system)
      // The command name (field 2) may hold spaces and parentheses: fields are counted from the last ")".
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      if (boot === null || fields.length < 20) return Option.none()
      return Option.some(Number(boot[1]) * 1000 + Math.round((Number(fields[19]) * 1000) / userHz))
    } catch {
      return Option.none()
    }
  })

// Elsewhere (macOS, the BSDs) `ps` prints the start time, to the second, in local time.
const psStart = (pid: number): Effect.Effect<Option.Option<number>> =>
  Effect.async<Option.Option<number>>((resume) => {
    const child = ChildProcess.execFile("ps", ["-o", "lstart=", "-p", String(pid)], (error, stdout) => {
      const startedAt = error === null ? Date.parse(stdout.trim()) : NaN
      resume(Effect.succeed(Number.isNaN(startedAt) ? Option.none() : Option.some(startedAt)))
    })
    return Effect.sync(() => child.kill())
  })

const startOf = (pid: number): Effect.Effect<Option.Option<number>> =>
  process.platform === "linux"
    ? procStart(pid)
    : process.platform === "win32"
    ? Effect.succeedNone
    : psStart(pid)

/** This process, as its claims record it. @internal */
export const identity: Effect.Effect<Journal.Identity> = Effect.map(
  startOf(process.pid),
  (startedAt) => ({ pid: process.pid, host: Os.hostname(), startedAt: Option.getOrUndefined(startedAt) })
)

/** Asked by the journal only for a claim made on this host. @internal */
export const liveness: Journal.Liveness = (claim) =>
  Effect.gen(function*() {
    if (claim.pid === undefined) return "Unknown"
    if (!isAlive(claim.pid)) return "Dead"
    if (claim.startedAt === undefined) return "Unknown"
    const startedAt = yield* startOf(claim.pid)
    if (Option.isNone(startedAt)) return "Unknown"
    return Math.abs(startedAt.value - claim.startedAt) <= startTolerance ? "Alive" : "Dead"
  })
