/**
 * One operation of a session: validated, recorded in the journal before it runs, run on the session's child, its end
 * recorded (with retries while the journal is unreachable), and drained when its runner stops (`drainTimeout`, read
 * as `resolveDrainTimeout` says). A key seen before is answered from the journal, not run again.
 *
 * @internal
 */
import * as Journal from "@lifeline/journal/Journal"
import * as JournalEntry from "@lifeline/journal/JournalEntry"
import type * as JournalError from "@lifeline/journal/JournalError"
import * as Recovery from "@lifeline/journal/Recovery"
import * as Bounds from "@lifeline/kernel/Bounds"
import * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import * as UntrustedText from "@lifeline/kernel/UntrustedText"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ExtensionUnavailable, KeyReused, OperationFailed } from "../FleetError.js"
import type { Operation } from "../SessionEntity.js"
import { jsonEquals } from "./validate.js"

/** The reply a finished entry gives: its stored result, or the failure it recorded. */
export const answer = (entry: JournalEntry.Entry): Effect.Effect<Schema.Json, OperationFailed | ExtensionUnavailable> =>
  entry.status === "Completed"
    ? Effect.succeed((entry.result ?? null) as Schema.Json)
    : Effect.fail(unavailableOf(entry.error) ?? failedOf(entry))

/** An operation recorded Failed because the session's extension was unavailable is answered as such. */
const unavailableOf = (error: unknown): ExtensionUnavailable | undefined => {
  const decoded = Schema.decodeUnknownOption(ExtensionUnavailable)(error)
  return Option.isSome(decoded) ? decoded.value : undefined
}

export const failedOf = (entry: JournalEntry.Entry): OperationFailed =>
  new OperationFailed({
    key: entry.key,
    kind: entry.kind,
    reason: entry.reason ?? "failed",
    interrupted: Option.isSome(Recovery.interruptedByCrash(entry)),
    ...(entry.error === undefined ? {} : { error: entry.error as Schema.Json })
  })

/** Runs one operation under the journal: answered from the journal when it already ended. */
export const handle = <R>(
  journal: Journal.Journal.Service,
  owner: string,
  operation: Operation,
  execute: (entry: JournalEntry.Entry) => Effect.Effect<Schema.Json, unknown, R>,
  drainTimeout: Duration.Input = defaultDrainTimeout
): Effect.Effect<Schema.Json, OperationFailed | ExtensionUnavailable | KeyReused | JournalError.JournalError, R> =>
  Effect.gen(function*() {
    let existing = yield* journal.get(operation.key)
    const began = Option.isSome(existing) ? undefined : yield* journal.begin({
      kind: operation.kind,
      key: operation.key,
      payload: operation.payload,
      owner
    }).pipe(
      // Another operation under the same key began first (operations of a session run concurrently): read it.
      Effect.catchIf((error) => error.reason === "Conflict", () => Effect.succeed(undefined))
    )
    if (began === undefined && Option.isNone(existing)) existing = yield* journal.get(operation.key)
    if (began === undefined && Option.isNone(existing)) {
      return yield* new OperationFailed({
        key: operation.key,
        kind: operation.kind,
        reason: "the key was taken and is gone",
        interrupted: false
      })
    }
    const entry = began !== undefined ? began.entry : (existing as Option.Some<JournalEntry.Entry>).value
    if (entry.owner !== owner) {
      return yield* new OperationFailed({
        key: operation.key,
        kind: operation.kind,
        reason: `the key belongs to ${entry.owner}`,
        interrupted: false
      })
    }
    if (entry.kind !== operation.kind || !jsonEquals(entry.payload, operation.payload)) {
      return yield* new KeyReused({ key: operation.key, kind: operation.kind, storedKind: entry.kind })
    }
    if (entry.status === "Completed" || entry.status === "Failed") return yield* answer(entry)
    if (Option.isSome(existing)) {
      // Unfinished and left to this runner (recovery skipped it, or a begin raced us): take it under the guard.
      const running = yield* journal.running
      if (running.includes(entry.key)) {
        return yield* new OperationFailed({
          key: entry.key,
          kind: entry.kind,
          reason: "already running on this runner",
          interrupted: false
        })
      }
      return yield* runEntry(
        journal,
        yield* journal.resume(entry.key, { attempts: entry.attempts }),
        execute,
        drainTimeout
      )
    }
    return yield* runEntry(journal, entry, execute, drainTimeout)
  })

/** How long an operation in flight may still finish once its handler is interrupted (the runner stops). */
export const defaultDrainTimeout: Duration.Input = Bounds.fleetDrainTimeout

/**
 * The drain of a session's operations: the `drainTimeout` option, else the operator's `LIFELINE_DRAIN_TIMEOUT` (read
 * as the shutdown policy reads it), else {@link defaultDrainTimeout}. An invalid variable is logged and the default
 * used: the session's entity is built here, and an entity that dies is rebuilt in a loop, holding up the runner's other
 * sessions.
 */
export const resolveDrainTimeout = (option: Duration.Input | undefined): Effect.Effect<Duration.Input> =>
  option !== undefined ? Effect.succeed(option) : Effect.gen(function*() {
    const configured = yield* ShutdownPolicy.drainTimeoutVariable
    return Option.getOrElse(configured, () => defaultDrainTimeout)
  }).pipe(
    Effect.catch((error) =>
      Effect.as(
        Effect.logError(
          `the session drain uses its default (${Duration.format(Duration.fromInputUnsafe(defaultDrainTimeout))}): ` +
            `${ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE} is invalid: ${error.message.replace(/\s*\n\s*/g, " ")}`
        ),
        defaultDrainTimeout
      )
    )
  )

const runEntry = <R>(
  journal: Journal.Journal.Service,
  entry: JournalEntry.Entry,
  execute: (entry: JournalEntry.Entry) => Effect.Effect<Schema.Json, unknown, R>,
  drainTimeout: Duration.Input
): Effect.Effect<Schema.Json, OperationFailed | ExtensionUnavailable | JournalError.JournalError, R> =>
  // The journal step after the operation runs whatever happens to the fiber. When the handler is interrupted (the
  // runner stops, or the shard moves), the operation gets `drainTimeout` to finish, then is interrupted and recorded
  // as what it is: the entry stays InFlight, no longer running here, for the next runner's recovery.
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(
      drain(restore, execute(entry), { drainTimeout, label: `operation ${UntrustedText.shown(entry.key)}` }),
      (exit) => {
        if (Exit.isSuccess(exit)) {
          return Effect.as(withRecordRetries(journal).complete(entry.key, exit.value), exit.value)
        }
        if (Cause.hasInterruptsOnly(exit.cause)) {
          return Effect.andThen(journal.release(entry.key), Effect.failCause(exit.cause as Cause.Cause<never>))
        }
        const error = Cause.squash(exit.cause)
        return Effect.flatMap(
          withRecordRetries(journal).fail(
            entry.key,
            error instanceof ExtensionUnavailable
              ? { _tag: error._tag, sessionId: error.sessionId, reason: error.reason, detail: error.detail }
              : JournalEntry.errorToJson(error)
          ),
          (failed) => Effect.fail(unavailableOf(failed.error) ?? failedOf(failed))
        )
      }
    )
  )

/**
 * How long the step that records an operation's end is retried while the journal is unreachable (a `Storage` error:
 * each attempt is bounded by the journal's `operationTimeout`), so that a short Postgres outage does not leave an
 * operation that finished unrecorded, to be run again or failed by the next runner's recovery.
 */
export const recordRetryWindow: Duration.Input = Bounds.recordRetryWindow

/**
 * The journal as a session records with it: the end of an operation, run on request or resumed by its recovery, is
 * retried for `recordRetryWindow` while the journal is unreachable (`Journal.withRecordRetries`), so that a short
 * outage does not leave it unrecorded, to be run or resumed once more by the next runner.
 */
export const withRecordRetries = (journal: Journal.Journal.Service): Journal.Journal.Service =>
  Journal.withRecordRetries(journal, recordRetryWindow)

/** How `drained` names what it waits for in its log line, and what it does when the interruption comes. */
interface DrainOptions {
  readonly drainTimeout: Duration.Input
  /** Names what is drained in the log line of a drain that ran out ("operation k-1", "the recovery of session s"). */
  readonly label: string
  /** Run once, when the interruption comes, before the drain starts. */
  readonly onInterrupt?: (() => void) | undefined
}

/**
 * `effect`, given `drainTimeout` to finish when its fiber is interrupted: what a session's recovery gets, as an
 * operation run by `handle` does, so that a runner that stops records what it resumed rather than leave it to be
 * resumed once more.
 */
export const drained = <A, E, R>(effect: Effect.Effect<A, E, R>, options: DrainOptions): Effect.Effect<A, E, R> =>
  Effect.uninterruptibleMask((restore) => Effect.flatMap(drain(restore, effect, options), (exit) => exit))

const drain = <A, E, R>(
  restore: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>,
  effect: Effect.Effect<A, E, R>,
  options: DrainOptions
): Effect.Effect<Exit.Exit<A, E>, never, R> =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(Effect.interruptible(effect), { startImmediately: true })
    const joined = yield* Effect.exit(restore(Fiber.join(fiber)))
    if (Exit.isSuccess(joined) || !Cause.hasInterrupts(joined.cause) || fiber.pollUnsafe() !== undefined) {
      return fiber.pollUnsafe() ?? joined
    }
    // Interrupted from outside while it runs: let it finish within the drain, else interrupt it.
    options.onInterrupt?.()
    const finished = yield* Effect.timeoutOption(Fiber.await(fiber), options.drainTimeout)
    if (Option.isSome(finished)) return finished.value
    yield* Effect.logInfo(
      `${options.label} still running after the drain (${
        Duration.format(Duration.fromInputUnsafe(options.drainTimeout))
      }): left unfinished for the next runner`
    )
    return yield* Fiber.interrupt(fiber).pipe(Effect.andThen(Fiber.await(fiber)))
  })
