/**
 * Who this process is, for the journal's owner claims, and whether the process that holds a claim on this host is
 * still running: its pid alive (not a zombie) and started when the claim says, so that a reused pid is not taken for
 * the holder.
 *
 * @internal
 */
import type * as JournalClaim from "@lifeline/journal/JournalClaim"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Os from "node:os"
import { isAlive, startTime } from "./processes.js"

// Both start times are read the same way (`startTime`), so they agree to the tick on Linux and to the second
// elsewhere; a pid is not reused within seconds of the start of the process that had it.
const startTolerance = 2_000

/** This process, as its claims record it. @internal */
export const identity: Effect.Effect<JournalClaim.Identity> = Effect.map(
  startTime(process.pid),
  (startedAt) => ({ pid: process.pid, host: Os.hostname(), startedAt: Option.getOrUndefined(startedAt) })
)

/** Asked by the journal only for a claim made on this host. @internal */
export const liveness: JournalClaim.Liveness = (claim) =>
  Effect.gen(function*() {
    if (claim.pid === undefined) return "Unknown"
    if (!isAlive(claim.pid)) return "Dead"
    if (claim.startedAt === undefined) return "Unknown"
    const startedAt = yield* startTime(claim.pid)
    if (Option.isNone(startedAt)) return "Unknown"
    return Math.abs(startedAt.value - claim.startedAt) <= startTolerance ? "Alive" : "Dead"
  })
