/** @internal */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Journal from "../Journal.js"
import type * as Peer from "../Peer.js"
import { ShutdownError } from "../PeerError.js"
import type * as Recovery from "../Recovery.js"
import { InterruptedByCrash, ProcessInfo, processKind } from "../Recovery.js"

const decodeInterrupted = Schema.decodeUnknownOption(Schema.toType(Schema.Struct({
  _tag: Schema.Literal("InterruptedByCrash"),
  key: Schema.String,
  kind: Schema.String,
  attempts: Schema.Int,
  startedAt: Schema.Number,
  detail: Schema.String
})))

/** @internal */
export const interruptedByCrash = (entry: Journal.Entry): Option.Option<InterruptedByCrash> =>
  entry.status === "Failed"
    ? Option.map(decodeInterrupted(entry.error), ({ _tag: _, ...fields }) => new InterruptedByCrash(fields))
    : Option.none()

interface Outcome {
  readonly resumed?: Journal.Entry
  readonly failed?: Journal.Entry
  readonly error?: Recovery.EntryError
  readonly skipped?: Journal.Entry
  readonly reaped?: { readonly entry: Journal.Entry; readonly outcome: Recovery.ReapOutcome }
}

const toReport = (outcomes: ReadonlyArray<Outcome>): Recovery.Report => ({
  resumed: outcomes.flatMap((outcome) => outcome.resumed === undefined ? [] : [outcome.resumed]),
  failed: outcomes.flatMap((outcome) => outcome.failed === undefined ? [] : [outcome.failed]),
  errors: outcomes.flatMap((outcome) => outcome.error === undefined ? [] : [outcome.error]),
  skipped: outcomes.flatMap((outcome) => outcome.skipped === undefined ? [] : [outcome.skipped]),
  reaped: outcomes.flatMap((outcome) => outcome.reaped === undefined ? [] : [outcome.reaped])
})

const entryError = (entry: Journal.Entry, error: unknown): Outcome => ({
  error: { key: entry.key, kind: entry.kind, error }
})

// A Conflict means another fiber or recovery owns the entry now: not an error, just not ours.
const orSkip = (entry: Journal.Entry) => (error: Journal.JournalError): Effect.Effect<Outcome> =>
  error.reason === "Conflict"
    ? Effect.succeed({ skipped: entry })
    : Effect.as(
      Effect.logWarning("recovery: a journal step failed", error).pipe(Effect.annotateLogs("key", entry.key)),
      entryError(entry, error)
    )

const failEntry = (journal: Journal.Journal.Service, entry: Journal.Entry, detail: string): Effect.Effect<Outcome> =>
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
      Effect.logInfo(`recovery: failed ${entry.kind} ${entry.key}: ${detail}`).pipe(
        Effect.annotateLogs("key", entry.key)
      )
    ),
    Effect.map((failed): Outcome => ({ failed })),
    Effect.catch(orSkip(entry))
  )

// Runs `effect` for an entry this fiber owns and records how it ended. Interruption leaves the entry InFlight, as a
// crash would, and only forgets that this process runs it.
const settle = <R>(
  journal: Journal.Journal.Service,
  entry: Journal.Entry,
  effect: Effect.Effect<unknown, unknown, R>,
  done: (entry: Journal.Entry) => Outcome
): Effect.Effect<Outcome, never, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(restore(effect))
      if (Exit.isSuccess(exit)) {
        const completed = yield* journal.complete(entry.key, exit.value).pipe(
          // A value that is not JSON: the operation did complete, so record that, without its value.
          Effect.catchIf((error) => error.reason === "Invalid", () => journal.complete(entry.key)),
          Effect.result
        )
        if (Result.isFailure(completed)) {
          yield* journal.release(entry.key)
          return entryError(entry, completed.failure)
        }
        return done(completed.success)
      }
      if (Cause.hasInterruptsOnly(exit.cause)) {
        yield* journal.release(entry.key)
        return yield* Effect.interrupt
      }
      const error = Option.getOrElse(Cause.findErrorOption(exit.cause), () => Cause.squash(exit.cause))
      yield* journal.fail(entry.key, error).pipe(
        Effect.catch((journalError) =>
          Effect.andThen(
            journal.release(entry.key),
            Effect.logWarning("recovery: could not record a failed resume", journalError)
          )
        )
      )
      yield* Effect.logWarning(`recovery: resuming ${entry.kind} ${entry.key} failed`, exit.cause).pipe(
        Effect.annotateLogs("key", entry.key)
      )
      return entryError(entry, error)
    })
  )

const recoverOne = <R>(
  journal: Journal.Journal.Service,
  entry: Journal.Entry,
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
          Effect.logInfo(`recovery: resuming ${entry.kind} ${entry.key} (attempt ${resumed.attempts})`).pipe(
            Effect.annotateLogs("key", entry.key)
          ),
          settle(journal, resumed, Effect.suspend(() => decision.run(resumed)), (completed) => ({ resumed: completed }))
        )
    })
  )
}

const reapOne = <R>(
  journal: Journal.Journal.Service,
  entry: Journal.Entry,
  reap: Recovery.Reaper<R>
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
            let outcome: Recovery.ReapOutcome = "Gone"
            return settle(
              journal,
              resumed,
              Effect.map(Effect.suspend(() => reap(info)), (reaped) => {
                outcome = reaped
                return { outcome: reaped }
              }).pipe(
                Effect.tap((result) =>
                  Effect.logInfo(`recovery: orphan process ${info.pid}: ${result.outcome}`).pipe(
                    Effect.annotateLogs("key", entry.key)
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
export const run = <R = never>(
  options: Recovery.Options<R> = {}
): Effect.Effect<Recovery.Report, Journal.JournalError | Journal.OwnerInUse, Journal.Journal | Scope.Scope | R> =>
  Effect.gen(function*() {
    const journal = yield* Journal.Journal
    const owner = options.owner ?? (yield* Journal.Owner)
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
      ).pipe(Effect.annotateLogs("owner", owner))
    }
    return report
  })

/** @internal */
export const recordProcess = (process: {
  readonly pid: number
  readonly command: ReadonlyArray<string>
}): Effect.Effect<string, Journal.JournalError, Journal.Journal> =>
  Effect.gen(function*() {
    const journal = yield* Journal.Journal
    const owner = yield* Journal.Owner
    const startedAt = yield* Clock.currentTimeMillis
    const payload: ProcessInfo = { pid: process.pid, startedAt, command: process.command }
    // The start time is in the key: a pid is reused, a (pid, start) pair is not.
    const key = `${processKind}/${owner}/${process.pid}/${startedAt}`
    yield* journal.begin({ kind: processKind, key, payload, owner })
    return key
  })

/** @internal */
export const processExited = (
  key: string,
  exit?: { readonly exitCode: number | null; readonly signal: string | null }
): Effect.Effect<void, Journal.JournalError, Journal.Journal> =>
  Effect.flatMap(Journal.Journal, (journal) => Effect.asVoid(journal.complete(key, exit ?? null)))

/** @internal */
export const reapOrphans = <R = never>(
  reap: Recovery.Reaper<R>,
  options?: { readonly owner?: string | undefined; readonly claim?: Journal.ClaimOptions | undefined }
): Effect.Effect<Recovery.Report, Journal.JournalError | Journal.OwnerInUse, Journal.Journal | Scope.Scope | R> =>
  Effect.gen(function*() {
    const journal = yield* Journal.Journal
    const owner = options?.owner ?? (yield* Journal.Owner)
    yield* journal.claim(owner, options?.claim)
    const entries = (yield* journal.unfinished(owner)).filter((entry) => entry.kind === processKind)
    return toReport(yield* Effect.forEach(entries, (entry) => reapOne(journal, entry, reap), { concurrency: 8 }))
  })

const shutdownReason = (reason: string): ShutdownError["reason"] =>
  reason === "Interrupted" || reason === "Failed" || reason === "DrainTimeout" ? reason : "Stop"

/** @internal */
export const recordShutdown = (
  journal: Journal.Journal.Service,
  options?: {
    readonly keysOf?: ((cutOff: Peer.CutOff) => string | undefined) | undefined
    readonly owner?: string | undefined
  }
) =>
(report: Recovery.ShutdownReport): Effect.Effect<void> =>
  Effect.gen(function*() {
    const keysOf = options?.keysOf
    const owner = options?.owner ?? (yield* Journal.Owner)
    // Without a mapping, whatever of the owner is still InFlight and not run by a fiber here was cut off, which
    // holds only while this journal is the owner's sole live holder: otherwise it may be another process's work.
    if (keysOf === undefined && !(yield* journal.holds(owner))) {
      return yield* Effect.logWarning(
        `journal: the shutdown recorded nothing: without keysOf it needs this journal's claim on owner ${owner}`
      )
    }
    const running = new Set(keysOf === undefined ? yield* journal.running : [])
    const targets: ReadonlyArray<{ readonly key: string; readonly guard?: Journal.Guard }> = keysOf === undefined
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
