/** @internal */
import * as UntrustedText from "@lifeline/kernel/UntrustedText"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type { Journal } from "../Journal.js"
import type * as JournalClaim from "../JournalClaim.js"
import type * as JournalEntry from "../JournalEntry.js"
import type * as JournalError from "../JournalError.js"
import type * as ProcessRecord from "../ProcessRecord.js"
import type * as Recovery from "../Recovery.js"
import { Owner } from "./journalClaim.js"
import { JournalService } from "./journalService.js"
import type { Outcome } from "./recoverySteps.js"
import { orSkip, settle, toReport } from "./recoverySteps.js"

/** @internal */
export const processKind = "process" as const

/** @internal */
export const ProcessInfo = Schema.Struct({
  pid: Schema.Int,
  startedAt: Schema.Number,
  command: Schema.Array(Schema.String)
})

/** @internal */
export const reapOne = <R>(
  journal: Journal.Service,
  entry: JournalEntry.Entry,
  reap: ProcessRecord.Reaper<R>
): Effect.Effect<Outcome, never, R> =>
  Option.match(Schema.decodeUnknownOption(ProcessInfo)(entry.payload), {
    onNone: () =>
      journal.fail(entry.key, { message: "the process entry has no valid pid, start time and command" }, {
        attempts: entry.attempts
      }).pipe(
        Effect.map((failed): Outcome => ({ failed })),
        Effect.catch(orSkip(entry))
      ),
    onSome: (info) =>
      journal.resume(entry.key, { attempts: entry.attempts }).pipe(
        Effect.matchEffect({
          onFailure: orSkip(entry),
          onSuccess: (resumed) => {
            let outcome: ProcessRecord.ReapOutcome = "Gone"
            return settle(
              journal,
              resumed,
              Effect.map(Effect.suspend(() => reap(info)), (reaped) => {
                outcome = reaped
                return { outcome: reaped }
              }).pipe(
                Effect.tap((result) =>
                  Effect.logInfo(`recovery: orphan process ${info.pid}: ${result.outcome}`).pipe(
                    Effect.annotateLogs("key", UntrustedText.shown(entry.key))
                  )
                )
              ),
              (completed) => ({ reaped: { entry: completed, outcome } })
            )
          }
        })
      )
  })

/** @internal */
export const record = (process: {
  readonly pid: number
  readonly command: ReadonlyArray<string>
}): Effect.Effect<string, JournalError.JournalError, Journal> =>
  Effect.gen(function*() {
    const journal = yield* JournalService
    const owner = yield* Owner
    const startedAt = yield* Clock.currentTimeMillis
    const payload: ProcessRecord.ProcessInfo = { pid: process.pid, startedAt, command: process.command }
    // The start time is in the key: a pid is reused, a (pid, start) pair is not.
    const key = `${processKind}/${owner}/${process.pid}/${startedAt}`
    yield* journal.begin({ kind: processKind, key, payload, owner })
    return key
  })

/** @internal */
export const exited = (
  key: string,
  exit?: { readonly exitCode: number | null; readonly signal: string | null }
): Effect.Effect<void, JournalError.JournalError, Journal> =>
  Effect.flatMap(JournalService, (journal) => Effect.asVoid(journal.complete(key, exit ?? null)))

/** @internal */
export const reapOrphans = <R = never>(
  reap: ProcessRecord.Reaper<R>,
  options?: { readonly owner?: string | undefined; readonly claim?: JournalClaim.ClaimOptions | undefined }
): Effect.Effect<Recovery.Report, JournalError.JournalError | JournalError.OwnerInUse, Journal | Scope.Scope | R> =>
  Effect.gen(function*() {
    const journal = yield* JournalService
    const owner = options?.owner ?? (yield* Owner)
    yield* journal.claim(owner, options?.claim)
    const entries = (yield* journal.unfinished(owner)).filter((entry) => entry.kind === processKind)
    return toReport(yield* Effect.forEach(entries, (entry) => reapOne(journal, entry, reap), { concurrency: 8 }))
  })
