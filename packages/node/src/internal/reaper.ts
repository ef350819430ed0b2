/**
 * The orphan reaper behind `NodeReaper.reapProcess`: kills a recorded child process and its process group, after
 * checking that they are still the ones the host spawned. `docs/recovery.md` ("What the reaper kills") states what is
 * and is not reaped.
 *
 * @internal
 */
import type * as ProcessRecord from "@lifeline/journal/ProcessRecord"
import * as Bounds from "@lifeline/kernel/Bounds"
import type * as Process from "@lifeline/process/Process"
import * as StopSequence from "@lifeline/process/StopSequence"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import type { ProcessEntry, ProcStat } from "./processes.js"
import { groupEntries, probeGroup, procStat, psStartTime } from "./processes.js"

// A process is the recorded one when it started within this much of the recorded spawn time. The boot time Linux
// reports has a resolution of one second and `ps` prints seconds; a pid is not reused within seconds of its spawn.
// A member of its group is ours only if it started no earlier than this much before the recorded spawn.
const startTolerance = 3_000

// How often the reaper looks again while it waits for exits: one scan of /proc per look.
const pollInterval = "25 millis"

/**
 * The recorded process itself: running and ours; a zombie that started when the record says (ours, exited, still
 * holding its pid); gone (its pid is free unless its group still has a member); or not ours.
 */
type Leader = "Running" | "Zombie" | "Gone" | "Reused" | "Unverified"

const errorCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string"
    ? (error as { code: string }).code
    : undefined

/**
 * An orphan that was still there after SIGKILL and `grace` (a process stuck in the kernel, in uninterruptible sleep).
 * `ProcessRecord.ReapOutcome` has no variant for it, so the reaper fails with this error: the recovery records the entry
 * as `Failed` with it and lists it in its report's `errors`. `pid` is the recorded process; `detail` names the
 * processes (or the group) still running.
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
  /** What `kill(pid, 0)` says: `Foreign` is EPERM, a process of another user, so not one a host of ours ran. */
  readonly probe: (pid: number) => "Alive" | "Gone" | "Foreign"
  readonly readProcStat: (pid: number) => Effect.Effect<Option.Option<ProcStat>>
  readonly psStart: (pid: number) => Effect.Effect<Option.Option<number>>
  /** The members of process group `pgid` that have not exited (zombies left out); none where this cannot be listed. */
  readonly groupMembers: (pgid: number) => Effect.Effect<Option.Option<ReadonlyArray<ProcessEntry>>>
  /** What `kill(-pgid, 0)` says, for systems where the members cannot be listed. */
  readonly probeGroup: (pgid: number) => "Alive" | "Gone" | "Foreign"
  readonly signalGroup: (pgid: number, name: NodeJS.Signals) => Effect.Effect<void>
  readonly signalProcess: (pid: number, name: NodeJS.Signals) => Effect.Effect<void>
}

const probe = (pid: number): "Alive" | "Gone" | "Foreign" => {
  try {
    process.kill(pid, 0)
    return "Alive"
  } catch (error) {
    return errorCode(error) === "EPERM" ? "Foreign" : "Gone"
  }
}

const send = (target: number, name: NodeJS.Signals): Effect.Effect<void> =>
  Effect.sync(() => {
    try {
      process.kill(target, name)
    } catch {
      // gone in the meantime
    }
  })

/** @internal */
const nodeSystem: System = {
  probe,
  readProcStat: procStat,
  psStart: psStartTime,
  groupMembers: (pgid) => Effect.sync(() => groupEntries(pgid)),
  probeGroup,
  signalGroup: (pgid, name) => send(-pgid, name),
  signalProcess: send
}

const isExited = (state: string): boolean => state === "Z" || state === "X"

const identify = (system: System, info: ProcessRecord.ProcessInfo): Effect.Effect<Leader> =>
  Effect.gen(function*() {
    const alive = system.probe(info.pid)
    if (alive === "Gone") return "Gone"
    if (alive === "Foreign") return "Reused"
    // A zombie still has its start time: one that is ours holds its pid, and so its group's id, until it is reaped.
    const stat = yield* system.readProcStat(info.pid)
    const startedAt = Option.isSome(stat) ? Option.some(stat.value.startedAt) : yield* system.psStart(info.pid)
    if (Option.isNone(startedAt)) return "Unverified"
    if (Math.abs(startedAt.value - info.startedAt) > startTolerance) return "Reused"
    return Option.isSome(stat) && isExited(stat.value.state) ? "Zombie" : "Running"
  })

const isGone = (system: System, pid: number): Effect.Effect<boolean> =>
  system.probe(pid) !== "Alive"
    ? Effect.succeed(true)
    : Effect.map(system.readProcStat(pid), Option.exists((stat) => isExited(stat.state)))

// A negative number names a process group whose members could not be listed, as kill(2) does.
const describe = (survivors: ReadonlyArray<number>): string =>
  survivors.map((pid) => pid < 0 ? `process group ${-pid}` : String(pid)).join(", ")

/** What is left of an orphan, polled on the Clock so that TestClock drives the bounds. */
type Survivors = Effect.Effect<ReadonlyArray<number>>

/** @internal */
export const makeReaper = (
  system: System,
  options?: { readonly grace?: Duration.Input | undefined }
): ProcessRecord.Reaper => {
  const grace = Duration.fromInputUnsafe(options?.grace ?? Bounds.reapGrace)

  /**
   * The kernel's one stop ladder (`StopSequence`, without an input to end): SIGTERM, then, if anything is left after
   * `grace`, SIGKILL to the same targets whatever the leader did, then `grace` for everything to be gone. An orphan is
   * not our child: its "exit" is the moment `survivors` is empty, polled on the Clock. The sequence's own log lines
   * speak of a child ("stop: …"); the reaper says instead which orphan ignored what, so the sequence runs with its
   * logs muted and the reaper logs at the level the caller set.
   */
  const terminate = (
    info: ProcessRecord.ProcessInfo,
    signal: (name: NodeJS.Signals) => Effect.Effect<void>,
    survivors: Survivors
  ): Effect.Effect<ProcessRecord.ReapOutcome, ReapError> =>
    Effect.gen(function*() {
      const level = yield* References.MinimumLogLevel
      const gone: Process.ExitStatus = { exitCode: null, signal: null }
      const untilNone: Effect.Effect<Process.ExitStatus> = Effect.flatMap(
        survivors,
        (left) =>
          left.length === 0
            ? Effect.succeed(gone)
            : Effect.andThen(Effect.sleep(pollInterval), Effect.suspend(() => untilNone))
      )
      const target: StopSequence.Target = {
        exit: untilNone,
        exitStatus: Effect.map(survivors, (left) => left.length === 0 ? Option.some(gone) : Option.none()),
        signal: (name) =>
          name === "SIGKILL"
            ? Effect.flatMap(survivors, (stubborn) =>
              Effect.andThen(
                Effect.logWarning(
                  stubborn.length === 1 && stubborn[0] === info.pid
                    ? `orphan process ${info.pid} ignored SIGTERM for ${Duration.format(grace)}: SIGKILL`
                    : `orphan process ${info.pid}: ${describe(stubborn)} still running ${
                      Duration.format(grace)
                    } after SIGTERM: SIGKILL`
                ).pipe(Effect.provideService(References.MinimumLogLevel, level)),
                signal(name)
              ))
            : signal(name),
        endInput: Effect.void
      }
      // Gone between the look that found it and this step ("Exited": nothing was sent): what the reaper came for.
      const report = yield* StopSequence.run(target, {}, { endOfInput: false, killGrace: grace, verifyTimeout: grace })
        .pipe(Effect.provideService(References.MinimumLogLevel, "None"))
      if (report.endedBy !== "Unkillable") return "Killed" as const
      const survived = yield* survivors
      return yield* new ReapError({
        reason: "Survived",
        pid: info.pid,
        command: info.command,
        detail: `${describe(survived)} still running ${Duration.format(grace)} after SIGKILL`
      })
    })

  const withoutProc = (
    info: ProcessRecord.ProcessInfo,
    leader: "Running" | "Zombie" | "Gone"
  ): Effect.Effect<ProcessRecord.ReapOutcome, ReapError> => {
    const pgid = info.pid
    const group = system.probeGroup(pgid)
    // The members cannot be listed, so neither can their start times be checked: a group whose leader is gone may
    // have been created by a later process that got the same pid.
    if (leader === "Gone") {
      return Effect.succeed(group === "Alive" ? "Unverified" : group === "Foreign" ? "Reused" : "Gone")
    }
    const signalGroup = group === "Alive"
    // kill(pid, 0) answers for a zombie too: only a running leader is signalled and waited for by pid.
    const signalLeader = leader === "Running"
    if (!signalGroup && !signalLeader) return Effect.succeed("Gone")
    return terminate(
      info,
      (name) =>
        Effect.andThen(
          signalGroup ? system.signalGroup(pgid, name) : Effect.void,
          signalLeader ? system.signalProcess(info.pid, name) : Effect.void
        ),
      Effect.gen(function*() {
        const left: Array<number> = []
        if (signalLeader && !(yield* isGone(system, info.pid))) left.push(info.pid)
        if (signalGroup && system.probeGroup(pgid) === "Alive") left.push(-pgid)
        return left
      })
    )
  }

  return (info) =>
    Effect.gen(function*() {
      const leader = yield* identify(system, info)
      if (leader === "Reused" || leader === "Unverified") return leader
      // The host spawns a child detached, so the child leads a group and a session whose id is its pid. The pid, and
      // so the group id, is not reused while the group has a member, even after the leader has exited.
      const pgid = info.pid
      const listed = yield* system.groupMembers(pgid)
      if (Option.isNone(listed)) return yield* withoutProc(info, leader)
      const running = leader === "Running"
      const members = listed.value
      // While the leader is there (running, or a zombie), its pid and so the group are the ones recorded. Once it is
      // gone, the group may have been created by a later process that got the pid after the whole group had ended:
      // its members started after the record too, but are not in the session the child created (unless that process
      // also called setsid). A member that started before the record cannot be ours in any case.
      const strangers = members.filter((member) =>
        member.pid !== info.pid &&
        (member.startedAt < info.startedAt - startTolerance || (leader === "Gone" && member.session !== pgid))
      )
      if (strangers.length > 0) {
        yield* Effect.logInfo(
          `orphan process ${info.pid}: process group ${pgid} has members that are not its descendants ` +
            `(${describe(strangers.map((member) => member.pid))}): the group is left alone`
        )
        if (!running) return "Reused"
      }
      const signalGroup = strangers.length === 0 && members.length > 0
      // A child spawned without `detached` shares the host's group, which is not pgid and must not be hit.
      const signalLeader = running && !(signalGroup && members.some((member) => member.pid === info.pid))
      if (!signalGroup && !signalLeader) return "Gone"
      if (!running) {
        yield* Effect.logInfo(
          `orphan process ${info.pid} has exited; its process group still has ${members.length} members ` +
            `(${describe(members.map((member) => member.pid))}): SIGTERM`
        )
      }
      return yield* terminate(
        info,
        (name) =>
          Effect.andThen(
            signalGroup ? system.signalGroup(pgid, name) : Effect.void,
            signalLeader ? system.signalProcess(info.pid, name) : Effect.void
          ),
        Effect.gen(function*() {
          const left = signalGroup ?
            Option.getOrElse(yield* system.groupMembers(pgid), () => []).map((member) => member.pid) :
            []
          if (signalLeader && !left.includes(info.pid) && !(yield* isGone(system, info.pid))) left.push(info.pid)
          return left
        })
      )
    })
}

/** @internal */
export const reapProcess = (options?: { readonly grace?: Duration.Input | undefined }): ProcessRecord.Reaper =>
  makeReaper(nodeSystem, options)
