/** @internal */
import type * as Recovery from "@lifeline/kernel/Recovery"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { ProcStat } from "./processes.js"
import { procStat, psStartTime } from "./processes.js"

// A process is the recorded one when it started within this much of the recorded spawn time. The boot time Linux
// reports has a resolution of one second and `ps` prints seconds; a pid is not reused within seconds of its spawn.
const startTolerance = 3_000

type Identity = "Ours" | Exclude<Recovery.ReapOutcome, "Killed">

const errorCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string"
    ? (error as { code: string }).code
    : undefined

/**
 * An orphan that was still there after SIGKILL and `grace` (a process stuck in the kernel, in uninterruptible sleep).
 * `Recovery.ReapOutcome` has no variant for it, so the reaper fails with this error: the recovery records the entry
 * as `Failed` with it and lists it in its report's `errors`.
 *
 * @internal
 */
export class ReapError extends Schema.TaggedError<ReapError>("@lifeline/node/ReapError")("ReapError", {
  reason: Schema.Literal("Survived"),
  pid: Schema.Int,
  command: Schema.Array(Schema.String),
  detail: Schema.String
}) {
  override get message(): string {
    return `orphan process ${this.pid} (${this.command.join(" ")}): ${this.detail}`
  }
}

/**
 * What the reaper asks the operating system; replaced in tests, where no process outlives a SIGKILL.
 *
 * @internal
 */
export interface System {
  readonly probe: (pid: number) => "Alive" | "Gone" | "Foreign"
  readonly readProcStat: (pid: number) => Effect.Effect<Option.Option<ProcStat>>
  readonly psStart: (pid: number) => Effect.Effect<Option.Option<number>>
  readonly signal: (pid: number, name: NodeJS.Signals) => Effect.Effect<void>
}

/** `true` alive, `false` gone; EPERM means it belongs to another user, so not to a host we ran. */
const probe = (pid: number): "Alive" | "Gone" | "Foreign" => {
  try {
    process.kill(pid, 0)
    return "Alive"
  } catch (error) {
    return errorCode(error) === "EPERM" ? "Foreign" : "Gone"
  }
}

// A child spawned in its own process group (as the host spawns them) is signalled with its group, so that whatever
// it started goes too; otherwise only the process.
const signal = (pid: number, name: NodeJS.Signals): Effect.Effect<void> =>
  Effect.sync(() => {
    try {
      process.kill(-pid, name)
    } catch {
      try {
        process.kill(pid, name)
      } catch {
        // gone in the meantime
      }
    }
  })

/** @internal */
export const nodeSystem: System = { probe, readProcStat: procStat, psStart: psStartTime, signal }

const identify = (system: System, info: Recovery.ProcessInfo): Effect.Effect<Identity> =>
  Effect.gen(function*() {
    const alive = system.probe(info.pid)
    if (alive === "Gone") return "Gone"
    if (alive === "Foreign") return "Reused"
    const stat = yield* system.readProcStat(info.pid)
    if (Option.isSome(stat) && stat.value.state === "Z") return "Gone"
    const startedAt = Option.isSome(stat) ? Option.some(stat.value.startedAt) : yield* system.psStart(info.pid)
    if (Option.isNone(startedAt)) return "Unverified"
    return Math.abs(startedAt.value - info.startedAt) <= startTolerance ? "Ours" : "Reused"
  })

const isGone = (system: System, pid: number): Effect.Effect<boolean> =>
  system.probe(pid) !== "Alive"
    ? Effect.succeed(true)
    : Effect.map(system.readProcStat(pid), Option.exists((stat) => stat.state === "Z"))

// Polled on the Clock, so that TestClock drives the bounds.
const awaitGone = (system: System, pid: number): Effect.Effect<void> =>
  Effect.flatMap(
    isGone(system, pid),
    (gone) => gone ? Effect.void : Effect.andThen(Effect.sleep("20 millis"), awaitGone(system, pid))
  )

const exitsWithin = (system: System, pid: number, grace: Duration.Duration): Effect.Effect<boolean> =>
  awaitGone(system, pid).pipe(
    Effect.as(true),
    Effect.timeoutOrElse({ duration: grace, orElse: () => Effect.succeed(false) })
  )

/** @internal */
export const makeReaper = (
  system: System,
  options?: { readonly grace?: Duration.Input | undefined }
): Recovery.Reaper => {
  const grace = Duration.fromInputUnsafe(options?.grace ?? "2 seconds")
  return (info) =>
    Effect.gen(function*() {
      const identity = yield* identify(system, info)
      if (identity !== "Ours") return identity
      yield* system.signal(info.pid, "SIGTERM")
      if (yield* exitsWithin(system, info.pid, grace)) return "Killed"
      yield* Effect.logWarning(`orphan process ${info.pid} ignored SIGTERM for ${Duration.format(grace)}: SIGKILL`)
      yield* system.signal(info.pid, "SIGKILL")
      if (yield* exitsWithin(system, info.pid, grace)) return "Killed"
      return yield* new ReapError({
        reason: "Survived",
        pid: info.pid,
        command: info.command,
        detail: `still running ${Duration.format(grace)} after SIGKILL`
      })
    })
}

/** @internal */
export const reapProcess = (options?: { readonly grace?: Duration.Input | undefined }): Recovery.Reaper =>
  makeReaper(nodeSystem, options)
