/**
 * hermes-host's journal: the pid of every extension it spawns is recorded in `<data dir>/lifeline/journal.db` (a
 * `SqliteJournal`), so that when a host is killed (SIGKILL, OOM) the next start kills the extensions it left behind
 * before it spawns its own (docs/hosting.md, "Recovery").
 */
import * as Journal from "@lifeline/journal/Journal"
import * as ProcessRecord from "@lifeline/journal/ProcessRecord"
import * as NodeReaper from "@lifeline/node/NodeReaper"
import * as SqliteJournal from "@lifeline/sqlite/SqliteJournal"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import { visible } from "../TerminalText.js"
import type { Settings } from "./hermesHostSettings.js"
import { describeError } from "./hermesHostSettings.js"

// Stable across runs: the next start reaps the children this owner recorded and never saw exit.
export const owner = "hermes-host"

export interface Reaped {
  readonly pid: number
  readonly command: ReadonlyArray<string>
  /** `Survived`: still there after SIGKILL (the reaper failed with a `ReapError`); `Failed`: the reaper failed. */
  readonly outcome: ProcessRecord.ReapOutcome | "Survived" | "Failed"
  readonly detail: string | null
  readonly at: number
}

export interface Recording {
  /** Undefined when the children are not recorded: see `warning`. */
  readonly journal: Journal.Journal.Service | undefined
  readonly warning: string | undefined
  readonly reaped: ReadonlyArray<Reaped>
}

/**
 * Opens the journal, claims the owner for the Scope, and kills the extensions a crashed host left behind. One
 * recording host per data dir: a second one started under the same owner would take the first one's children for
 * orphans, so while another live host holds the claim this one records nothing. The host works without the journal:
 * if it cannot be opened or the owner is in use, it warns and records nothing.
 */
export const openRecording = (
  { dataDir, journalFile }: Settings,
  since: (at: number) => number
): Effect.Effect<Recording, never, Scope.Scope> =>
  Effect.gen(function*() {
    const notRecording = (why: string) =>
      Effect.as(Effect.logWarning(visible(`hermes-host: ${why}; the extension's pid is not recorded`)), {
        journal: undefined,
        warning: why,
        reaped: []
      })
    const opened = yield* Effect.result(Effect.sandbox(SqliteJournal.makeFile({ filename: journalFile })))
    if (Result.isFailure(opened)) {
      return yield* notRecording(
        `cannot open the journal ${journalFile}: ${describeError(Cause.squash(opened.failure))}`
      )
    }
    const journal = opened.success
    const reaped: Array<Reaped> = []
    const reap = NodeReaper.reapProcess({ grace: "1 second" })
    const report = yield* ProcessRecord.reapOrphans(
      (info) =>
        reap(info).pipe(
          Effect.tapError((error) =>
            Effect.map(Clock.currentTimeMillis, (now) => {
              reaped.push({
                pid: info.pid,
                command: info.command,
                outcome: error instanceof NodeReaper.ReapError ? "Survived" : "Failed",
                detail: describeError(error),
                at: since(now)
              })
            })
          )
        ),
      { owner }
    ).pipe(Effect.provideService(Journal.Journal, journal), Effect.sandbox, Effect.result)
    if (Result.isFailure(report)) {
      const error = Cause.findErrorOption(report.failure)
      return yield* notRecording(
        Option.isSome(error) && error.value._tag === "OwnerInUse"
          ? `another hermes-host${error.value.pid === undefined ? "" : ` (pid ${error.value.pid})`} runs on ${dataDir}`
          : `cannot look for orphans in ${journalFile}: ${describeError(Cause.squash(report.failure))}`
      )
    }
    const now = since(yield* Clock.currentTimeMillis)
    for (const { entry, outcome } of report.success.reaped) {
      const info = entry.payload as ProcessRecord.ProcessInfo
      reaped.push({ pid: info.pid, command: info.command, outcome, detail: null, at: now })
    }
    return { journal, warning: undefined, reaped }
  })
