/**
 * The supervision every face of a started process shares (Effect's `ChildProcessSpawner` now, a transport for the MCP
 * SDK next): a process known by its pid, its own process group signalled as a whole, zombies counted as exited,
 * `@lifeline/process`'s one stop sequence as its only bounded stop, and how it ended as data (a log line with
 * annotations and a metric). The face brings the process (however it spawned it) and when it exits; this module never
 * spawns.
 *
 * Its waits run on the system clock, not the fiber's `Clock`: they wait for a real process, which a `TestClock`
 * would never let go (Effect's own Node spawner bounds the same waits by native time, for the same reason).
 *
 * @internal
 */
import type * as Process from "@lifeline/process/Process"
import * as StopSequence from "@lifeline/process/StopSequence"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Processes from "./processes.js"

/**
 * A started process, as a face hands it over.
 *
 * @internal
 */
export interface Child {
  readonly pid: number
  /** It leads a process group of its own (POSIX, spawned detached): signals go to `-pid`. */
  readonly ownsGroup: boolean
  /** Waits for the exit. */
  readonly exit: Effect.Effect<Process.ExitStatus>
  /** How it exited, once the face has seen it; never waits. */
  readonly unsafeExitStatus: () => Process.ExitStatus | undefined
  /**
   * Calls `listener` once the exit is seen (after `unsafeExitStatus` has it), and returns what removes it: a face that
   * sees the exit from an event gives it, so that a stop waits for the exit on one callback.
   */
  readonly unsafeOnExit?: ((listener: () => void) => () => void) | undefined
}

/**
 * How supervised processes ended, by `code N` or `signal NAME`: the signal as data, for a dashboard.
 *
 * @internal
 */
export const exits: Metric.Frequency = Metric.frequency("lifeline.child.exits", {
  description: "How supervised child processes ended: `code N` or `signal NAME`"
})

const systemClock: Clock.Clock = Clock.Clock.defaultValue()

/**
 * Runs `effect` on the system clock, whatever Clock the fiber has (a `TestClock` in a user's test): for waits on a
 * real process and for the times recorded about it (the journal's start time is compared with the kernel's).
 *
 * @internal
 */
export const onSystemClock = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  // `updateContext`, not `provideService`, which builds its dual function anew on each call (on the path of every
  // spawn and stop).
  Effect.updateContext(effect, (context: Context.Context<R>) => Context.add(context, Clock.Clock, systemClock))

/**
 * `Effect.annotateLogs`, and the system clock with `onSystem`, as one change of the fiber's context: each change costs
 * about as much as the whole stop of a child that has exited, and `annotateLogs` and `provideService` build their
 * dual function anew on each call.
 */
const annotated = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  annotations: Record<string, unknown>,
  onSystem: boolean
): Effect.Effect<A, E, R> =>
  Effect.updateContext(effect, (context: Context.Context<R>) => {
    const withAnnotations = Context.add(context, References.CurrentLogAnnotations, {
      ...Context.get(context, References.CurrentLogAnnotations),
      ...annotations
    })
    return onSystem ? Context.add(withAnnotations, Clock.Clock, systemClock) : withAnnotations
  })

/**
 * Sends `signal` to the process group when the child leads one, else to the child while it runs (after its exit its
 * pid may name another process). Never throws, never waits.
 *
 * @internal
 */
export const unsafeSignal = (child: Child, signal: NodeJS.Signals): void => {
  // ESRCH: the group is empty, so only the leader can be left, and only if its exit has not been seen.
  if (child.ownsGroup && Processes.kill(-child.pid, signal) === undefined) return
  if (child.unsafeExitStatus() !== undefined) return
  // A failure means it is gone in the meantime.
  Processes.kill(child.pid, signal)
}

/**
 * Children whose process group was seen with no member at all (zombies included), once the leader had exited. Such a
 * group stays empty: no process can join a group that does not exist, and a later group of that number (the pid
 * reused) is not this child's. So it is probed once, not by each of the watcher and the stop (a failed probe costs
 * more than the rest of the stop of a child that has exited).
 */
const emptied = new WeakSet<Child>()

/**
 * Whether a live process is left: in the group (zombies do not count: this machine's init may reap them late, and a
 * zombie holds nothing), or the child itself when it has no group.
 *
 * @internal
 */
export const unsafeGroupAlive = (child: Child): boolean => {
  if (child.unsafeExitStatus() === undefined) return true
  if (!child.ownsGroup || emptied.has(child)) return false
  if (Processes.probeGroup(child.pid) === "Gone") {
    emptied.add(child)
    return false
  }
  return Processes.isGroupAlive(child.pid)
}

/** The longest delay a Node timer takes (2^31 - 1 ms); beyond it, Node would fire at once. */
const maxTimer = 2_147_483_647

/**
 * The exit within `timeout`, on one callback and a timer of the platform: the stop runs on the system clock, whose
 * sleeps are such timers, and a race of two fibers per wait costs more than the rest of a stop. A timeout beyond a
 * timer's range waits for the exit only.
 */
const exitWithin = (child: Child, onExit: (listener: () => void) => () => void) => (timeout: Duration.Duration) =>
  Effect.callback<boolean>((resume) => {
    if (child.unsafeExitStatus() !== undefined) return resume(Effect.succeed(true))
    const millis = Duration.toMillis(timeout)
    let timer: ReturnType<typeof setTimeout> | undefined
    const off = onExit(() => {
      clearTimeout(timer)
      resume(Effect.succeed(true))
    })
    if (millis <= maxTimer) {
      timer = setTimeout(() => {
        off()
        resume(Effect.succeed(false))
      }, Math.max(0, millis))
    }
    return Effect.sync(() => {
      clearTimeout(timer)
      off()
    })
  })

/**
 * The bounds of {@link stop}: SIGKILL `killGrace` after the signal that asks, then `verifyTimeout` for the group to be
 * gone. Decoded once per supervisor: decoding them on each stop would cost more than the rest of a stop whose child has
 * exited.
 *
 * @internal
 */
export const boundsOf = (killGrace: Duration.Input, verifyTimeout: Duration.Input): StopSequence.Bounds =>
  StopSequence.bounds({ endOfInput: false, killGrace, verifyTimeout })

/**
 * The kernel's stop sequence over the child, without the end of input (the face's caller owns the input): `signal`
 * to the group, SIGKILL after `killGrace`, the exit verified within `verifyTimeout`, then the same for descendants
 * left in the group ({@link boundsOf}). A child that has exited and left nobody in its group gets no signal. In the
 * report, `SIGTERM` stands for `signal`, the signal that asks. Uninterruptible; on the system clock.
 *
 * @internal
 */
export const stop = (
  child: Child,
  signal: NodeJS.Signals,
  bounds: StopSequence.Bounds
): Effect.Effect<StopSequence.StopReport> =>
  Effect.suspend(() => {
    // Exited, and its group seen empty (zombies included): the sequence would send nothing and wait for nothing, and
    // running it (its steps, a change of the fiber's context) costs as much as the rest of the close of such a child.
    const status = child.unsafeExitStatus()
    if (status !== undefined && !unsafeGroupAlive(child)) return Effect.succeed(exitedReport(status))
    // A running child is asked to stop at once, before the sequence is set up: the sequence's first step would send
    // the same signal (it has no input to end and no protocol shutdown), and the child's exit then runs alongside the
    // set-up instead of after it. The sequence's own first SIGTERM is that one, not sent twice.
    let asked = status === undefined
    if (asked) unsafeSignal(child, signal)
    const target: StopSequence.Target = {
      exit: child.exit,
      exitStatus: Effect.sync(() => Option.fromUndefinedOr(child.unsafeExitStatus())),
      // The sequence asks with SIGTERM; the command may have chosen another signal to ask with (`killSignal`).
      signal: (sent) =>
        Effect.sync(() => {
          if (asked && sent === "SIGTERM") {
            asked = false
            return
          }
          unsafeSignal(child, sent === "SIGTERM" ? signal : sent)
        }),
      groupAlive: Effect.sync(() => unsafeGroupAlive(child)),
      endInput: Effect.void,
      exitWithin: child.unsafeOnExit === undefined ? undefined : exitWithin(child, child.unsafeOnExit)
    }
    return annotated(
      Effect.map(StopSequence.runWithBounds(target, {}, bounds), (report) =>
        // Exited before the sequence looked: of the signal sent first, which the report names as the sequence would.
        asked && report.endedBy === "Exited"
          ? { ...report, endedBy: "Terminate", signals: ["SIGTERM", ...report.signals] }
          : report),
      { pid: child.pid },
      true
    )
  })

/** The report of the stop sequence for a child that had exited with nobody left in its group: nothing done. */
const exitedReport = (exit: Process.ExitStatus): StopSequence.StopReport => ({
  endedBy: "Exited",
  shutdown: "Skipped",
  close: "Skipped",
  descendants: "None",
  exit,
  signals: [],
  forced: false,
  elapsedMillis: 0
})

/**
 * Logs how the child ended, with its pid, exit code and signal as annotations, and counts it in {@link exits}.
 *
 * @internal
 */
export const reportExit = (child: Child, status: Process.ExitStatus): Effect.Effect<void> =>
  Effect.andThen(
    Metric.update(exits, status.signal === null ? `code ${status.exitCode}` : `signal ${status.signal}`),
    annotated(
      Effect.logDebug(
        status.signal === null ? `child exited with code ${status.exitCode}` : `child killed by ${status.signal}`
      ),
      { pid: child.pid, exitCode: status.exitCode, signal: status.signal },
      false
    )
  )
