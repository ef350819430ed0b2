/**
 * The child in the journal: recorded once it runs, its end recorded once, when its whole process group is gone or
 * when the Scope closes.
 *
 * @internal
 */
import * as Journal from "@lifeline/journal/Journal"
import type * as JournalError from "@lifeline/journal/JournalError"
import * as ProcessRecord from "@lifeline/journal/ProcessRecord"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type { Handle } from "./childHandle.js"

/**
 * Records the child in `journal` now, and its end once: when its whole process group is gone while the Scope is open
 * (a watcher: the leader's exit is not enough, since descendants it left in the group are what a reaper must still
 * find after a crash of the host), or when the Scope closes. Called before `make`, so its finalizer runs after the
 * stop sequence and sees how it ended: a child still running then (`Unkillable`), or descendants that survived the
 * sweep of the group, stay `InFlight` for the next start's reaper. A failed spawn record kills the child at once:
 * nothing talks to it yet, and an unrecorded child is what a crash must not leave.
 *
 * @internal
 */
export const record = (
  handle: Handle,
  journal: Journal.Journal.Service,
  command: ReadonlyArray<string>
): Effect.Effect<void, JournalError.JournalError, Scope.Scope> =>
  Effect.gen(function*() {
    const key = yield* ProcessRecord.record({ pid: handle.pid, command }).pipe(
      Effect.provideService(Journal.Journal, journal),
      Effect.tapError(() => Effect.sync(() => handle.unsafeSignal("SIGKILL")))
    )
    const recordExit = yield* Effect.cached(
      Effect.suspend(() => {
        const status = handle.unsafeExitStatus()
        // Not ended, or members of its group are left: leave it InFlight for a reaper, only forget that this process
        // runs it.
        if (status === undefined || handle.unsafeGroupAlive()) return journal.release(key)
        return ProcessRecord.exited(key, status).pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.catch((error) =>
            Effect.logWarning(`could not record the exit of child process ${handle.pid}`, error).pipe(
              Effect.andThen(journal.release(key))
            )
          )
        )
      }).pipe(Effect.uninterruptible)
    )
    yield* Effect.addFinalizer(() => recordExit)
    // Registered after the finalizer, so interrupted before it runs: whichever comes first records, once.
    yield* Effect.forkScoped(Effect.andThen(handle.exit, Effect.andThen(groupGone(handle), recordExit)))
  })

/** How often a recorded child's process group is looked at once its leader has exited. */
const groupPollInterval = Duration.millis(100)

/** Completes once no live process is left in the child's process group. */
const groupGone = (handle: Handle): Effect.Effect<void> =>
  Effect.asVoid(Effect.repeat(Effect.sync(() => !handle.unsafeGroupAlive()), {
    schedule: Schedule.spaced(groupPollInterval),
    until: (gone) => gone
  }))
