/**
 * The conformance kit's record of the processes it starts, so that a kit killed with SIGKILL leaves nothing running
 * for good: an extension that ignores the end of its stdin would otherwise outlive it. It is the mechanism hermes-host
 * uses (a SQLite `Journal` with process records, `ProcessRecord.reapOrphans` and `NodeReaper.reapProcess`), under an
 * owner unique to each kit run, `conformance-kit/<pid>/<random>`, claimed for the run: at its start a kit run sweeps
 * the records of every other kit run whose claim it can take over (its process is dead), and leaves the others
 * alone, so several kit runs at once (as test workers do) never touch each other's extensions.
 */
import * as Journal from "@lifeline/journal/Journal"
import * as JournalClaim from "@lifeline/journal/JournalClaim"
import * as ProcessRecord from "@lifeline/journal/ProcessRecord"
import * as NodeReaper from "@lifeline/node/NodeReaper"
import * as SqliteJournal from "@lifeline/sqlite/SqliteJournal"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Crypto from "node:crypto"
import * as Os from "node:os"
import * as Path from "node:path"
import type { Recorder } from "./conformanceDriver.js"

/** Every kit run's owner starts with this; the sweep looks at these owners only. */
export const ownerPrefix = "conformance-kit/"

/**
 * The journal the kit runs share unless `--journal` names another: one per user (a directory another user created in
 * a shared /tmp could not be written).
 */
export const defaultJournalFile = (): string =>
  Path.join(Os.tmpdir(), `hermes-conformance-${process.getuid?.() ?? Os.userInfo().username}`, "journal.db")

/**
 * How long the reaper waits after SIGTERM before SIGKILL. Short: the processes are extensions under test that their
 * kit no longer judges, and one that ignores SIGTERM is exactly what is being swept.
 */
export const reapGrace = "100 millis"

/** How long the records of processes that ended stay in the journal. */
const keepEndedMs = 24 * 60 * 60 * 1000

/** What the kit says about its journal at the start: the orphans it swept, or why it records nothing. */
export interface Recording {
  readonly recorder: Recorder | undefined
  readonly warning: string | undefined
  readonly swept: ReadonlyArray<{ readonly owner: string; readonly pid: number; readonly outcome: string }>
}

const describe = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  return error instanceof Error ? error.message : String(error)
}

/**
 * Opens the journal, claims this run's owner for the Scope, sweeps the records of the kit runs whose process is
 * dead, and answers the recorder for `Driver.spawn`. The kit works without it: a journal that cannot be opened is a
 * warning, and nothing is recorded.
 */
export const open = (filename: string): Effect.Effect<Recording, never, Scope.Scope> =>
  Effect.gen(function*() {
    // Retried: kit runs that start at once on a new file race to set it up, and one of them may find it busy.
    const opened = yield* Effect.result(
      Effect.sandbox(SqliteJournal.makeFile({ filename })).pipe(
        Effect.retry({ times: 3, schedule: Schedule.spaced("200 millis") })
      )
    )
    if (Result.isFailure(opened)) {
      return { recorder: undefined, warning: `cannot open ${filename}: ${describe(opened.failure)}`, swept: [] }
    }
    const journal = opened.success
    const owner = `${ownerPrefix}${process.pid}/${Crypto.randomBytes(6).toString("hex")}`
    const claimed = yield* Effect.result(Effect.sandbox(journal.claim(owner)))
    if (Result.isFailure(claimed)) {
      return { recorder: undefined, warning: `cannot claim ${owner}: ${describe(claimed.failure)}`, swept: [] }
    }

    // Every other kit run that left processes recorded: its claim is taken over (and its processes reaped) only
    // when its holder is dead; a live kit run keeps its claim, and `reapOrphans` fails with OwnerInUse.
    const swept: Array<{ readonly owner: string; readonly pid: number; readonly outcome: string }> = []
    const entries = yield* Effect.orElseSucceed(journal.unfinished(), () => [])
    const owners = new Set(
      entries.filter((entry) =>
        entry.kind === ProcessRecord.kind && entry.owner.startsWith(ownerPrefix) && entry.owner !== owner
      ).map((entry) => entry.owner)
    )
    const reap = NodeReaper.reapProcess({ grace: reapGrace })
    yield* Effect.forEach(owners, (other) =>
      ProcessRecord.reapOrphans(reap, { owner: other }).pipe(
        Effect.tap((report) =>
          Effect.sync(() => {
            for (const { entry, outcome } of report.reaped) {
              swept.push({ owner: other, pid: (entry.payload as ProcessRecord.ProcessInfo).pid, outcome })
            }
          })
        ),
        Effect.provideService(Journal.Journal, journal),
        Effect.scoped,
        Effect.sandbox,
        Effect.ignore
      ), { concurrency: "unbounded", discard: true })

    // The records of ended processes are kept a day (for whoever looks into the file), then dropped: the file is
    // shared by every kit run and would grow for good.
    const now = yield* Clock.currentTimeMillis
    yield* Effect.ignore(journal.prune(now - keepEndedMs))

    const recorder: Recorder = {
      record: (pid, command) =>
        ProcessRecord.record({ pid, command }).pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.provideService(JournalClaim.Owner, owner),
          Effect.sandbox,
          Effect.orElseSucceed(() => undefined)
        ),
      ended: (key, exit, groupGone) => // A group with members left stays InFlight: the next kit run's sweep finds them.
      (groupGone
        ? Effect.ignore(
          Effect.sandbox(ProcessRecord.exited(key, exit).pipe(Effect.provideService(Journal.Journal, journal)))
        )
        : journal.release(key))
    }
    return { recorder, warning: undefined, swept }
  })
