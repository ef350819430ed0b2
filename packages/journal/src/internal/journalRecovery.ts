/** @internal */
import type * as Peer from "@lifeline/kernel/Peer"
import { ShutdownError } from "@lifeline/kernel/PeerError"
import * as UntrustedText from "@lifeline/kernel/UntrustedText"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type { Journal } from "../Journal.js"
import type * as JournalEntry from "../JournalEntry.js"
import type * as JournalError from "../JournalError.js"
import type * as Recovery from "../Recovery.js"
import { InterruptedByCrash } from "./interruptedByCrash.js"
import { Owner } from "./journalClaim.js"
import { JournalService } from "./journalService.js"
import { processKind, reapOne } from "./processRecord.js"
import type { Outcome } from "./recoverySteps.js"
import { orSkip, settle, toReport } from "./recoverySteps.js"

const decodeInterrupted = Schema.decodeUnknownOption(Schema.toType(Schema.Struct({
  _tag: Schema.Literal("InterruptedByCrash"),
  key: Schema.String,
  kind: Schema.String,
  attempts: Schema.Int,
  startedAt: Schema.Number,
  detail: Schema.String
})))

/** @internal */
export const interruptedByCrash = (entry: JournalEntry.Entry): Option.Option<InterruptedByCrash> =>
  entry.status === "Failed"
    ? Option.map(decodeInterrupted(entry.error), ({ _tag: _, ...fields }) => new InterruptedByCrash(fields))
    : Option.none()

const failEntry = (journal: Journal.Service, entry: JournalEntry.Entry, detail: string): Effect.Effect<Outcome> =>
  journal.fail(
    entry.key,
    new InterruptedByCrash({
      key: entry.key,
      kind: entry.kind,
      attempts: entry.attempts,
      startedAt: entry.startedAt,
      detail
    }),
    { attempts: entry.attempts }
  ).pipe(
    Effect.tap(() =>
      Effect.logInfo(
        `recovery: failed ${UntrustedText.shown(entry.kind)} ${UntrustedText.shown(entry.key)}: ${
          UntrustedText.shown(detail, 1000)
        }`
      ).pipe(
        Effect.annotateLogs("key", UntrustedText.shown(entry.key))
      )
    ),
    Effect.map((failed): Outcome => ({ failed })),
    Effect.catch(orSkip(entry))
  )

const recoverOne = <R>(
  journal: Journal.Service,
  entry: JournalEntry.Entry,
  options: Recovery.Options<R>,
  maxAttempts: number
): Effect.Effect<Outcome, never, R> => {
  const decide = Object.hasOwn(options.decisions ?? {}, entry.kind) ? options.decisions![entry.kind] : undefined
  const decision: Recovery.Decision<R> = decide === undefined ? { _tag: "Fail" } : decide(entry)
  const interrupted = entry.status === "NeedsRecovery"
    ? `cut off by a shutdown${entry.reason === undefined ? "" : ` (${entry.reason})`}`
    : "interrupted by a crash or a restart"
  if (decision._tag === "Fail") return failEntry(journal, entry, decision.detail ?? interrupted)
  if (entry.attempts >= maxAttempts) {
    return failEntry(journal, entry, `${interrupted}; not resumed after ${entry.attempts} attempts`)
  }
  return journal.resume(entry.key, { attempts: entry.attempts }).pipe(
    Effect.matchEffect({
      onFailure: orSkip(entry),
      onSuccess: (resumed) =>
        Effect.andThen(
          Effect.logInfo(
            `recovery: resuming ${UntrustedText.shown(entry.kind)} ${
              UntrustedText.shown(entry.key)
            } (attempt ${resumed.attempts})`
          ).pipe(
            Effect.annotateLogs("key", UntrustedText.shown(entry.key))
          ),
          settle(journal, resumed, Effect.suspend(() => decision.run(resumed)), (completed) => ({ resumed: completed }))
        )
    })
  )
}

/** @internal */
export const run = <R = never>(
  options: Recovery.Options<R> = {}
): Effect.Effect<Recovery.Report, JournalError.JournalError | JournalError.OwnerInUse, Journal | Scope.Scope | R> =>
  Effect.gen(function*() {
    const journal = yield* JournalService
    const owner = options.owner ?? (yield* Owner)
    const maxAttempts = options.maxAttempts ?? 3
    // Only a sole live holder may take the owner's unfinished work for a crash's leftovers: another live process's
    // running operations look exactly the same in the journal.
    yield* journal.claim(owner, options.claim)
    const entries = yield* journal.unfinished(owner)
    const reap = options.reap
    const outcomes = yield* Effect.forEach(
      entries,
      (entry): Effect.Effect<Outcome, never, R> =>
        entry.kind === processKind
          ? reap === undefined ? Effect.succeed({ skipped: entry }) : reapOne(journal, entry, reap)
          : recoverOne(journal, entry, options, maxAttempts),
      { concurrency: options.concurrency ?? 4 }
    )
    const report = toReport(outcomes)
    if (entries.length > 0) {
      yield* Effect.logInfo(
        `recovery: ${report.resumed.length} resumed, ${report.failed.length} failed, ${report.errors.length} errors, ` +
          `${report.skipped.length} skipped, ${report.reaped.length} orphan processes`
      ).pipe(Effect.annotateLogs("owner", UntrustedText.shown(owner)))
    }
    return report
  })

const shutdownReason = (reason: string): ShutdownError["reason"] =>
  reason === "Interrupted" || reason === "Failed" || reason === "DrainTimeout" ? reason : "Stop"

/** @internal */
export const recordShutdown = (
  journal: Journal.Service,
  options?: {
    readonly keysOf?: ((cutOff: Peer.CutOff) => string | undefined) | undefined
    readonly owner?: string | undefined
  }
) =>
(report: Recovery.ShutdownReport): Effect.Effect<void> =>
  Effect.gen(function*() {
    const keysOf = options?.keysOf
    const owner = options?.owner ?? (yield* Owner)
    // Without a mapping, whatever of the owner is still InFlight and not run by a fiber here was cut off, which
    // holds only while this journal is the owner's sole live holder: otherwise it may be another process's work.
    if (keysOf === undefined && !(yield* journal.holds(owner))) {
      return yield* Effect.logWarning(
        `journal: the shutdown recorded nothing: without keysOf it needs this journal's claim on owner ${
          UntrustedText.shown(owner)
        }`
      )
    }
    const running = new Set(keysOf === undefined ? yield* journal.running : [])
    const targets: ReadonlyArray<{ readonly key: string; readonly guard?: JournalEntry.Guard }> = keysOf === undefined
      ? (yield* journal.unfinished(owner))
        .filter((entry) => entry.status === "InFlight" && entry.kind !== processKind && !running.has(entry.key))
        .map((entry) => ({ key: entry.key, guard: { attempts: entry.attempts } }))
      : report.cutOff.flatMap((cutOff) => {
        const key = keysOf(cutOff)
        return key === undefined ? [] : [{ key }]
      })
    if (targets.length === 0) return
    if (report.policy._tag === "Drain") {
      const marked = yield* journal.markNeedsRecovery(
        targets.map((target) => target.key),
        `cut off by a drain timeout (${report.reason})`
      )
      yield* Effect.logInfo(`journal: ${marked.length} operation(s) cut off by the drain timeout need recovery`)
      return
    }
    const error = new ShutdownError({ reason: shutdownReason(report.reason), phase: "Closing", detail: report.reason })
    const failed = yield* Effect.forEach(targets, (target) =>
      journal.fail(target.key, error, target.guard).pipe(
        Effect.as(1),
        // Already ended, run by a fiber here, or unknown: nothing to record.
        Effect.catchIf(
          (journalError) => journalError.reason === "Conflict" || journalError.reason === "NotFound",
          () => Effect.succeed(0)
        )
      ))
    yield* Effect.logInfo(`journal: ${failed.reduce((a, b) => a + b, 0)} operation(s) failed by the shutdown`)
  }).pipe(
    Effect.catch((error) => Effect.logWarning("journal: could not record what the shutdown cut off", error))
  )
