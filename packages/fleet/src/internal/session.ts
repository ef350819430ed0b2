import * as Journal from "@lifeline/kernel/Journal"
import * as JournalEntry from "@lifeline/kernel/JournalEntry"
import type * as JournalError from "@lifeline/kernel/JournalError"
import type * as Method from "@lifeline/kernel/Method"
import type * as Peer from "@lifeline/kernel/Peer"
import * as Recovery from "@lifeline/kernel/Recovery"
import * as NodeChildProcess from "@lifeline/node/NodeChildProcess"
import * as Cause from "effect/Cause"
import * as Entity from "effect/cluster/Entity"
import type * as Sharding from "effect/cluster/Sharding"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type * as ExtensionSession from "../ExtensionSession.js"
import { ExtensionSession as SessionEntity, Operation, OperationFailed, owner as ownerOf } from "../ExtensionSession.js"

/** The reply a finished entry gives: its stored result, or the failure it recorded. */
export const answer = (entry: JournalEntry.Entry): Effect.Effect<Schema.Json, OperationFailed> =>
  entry.status === "Completed"
    ? Effect.succeed((entry.result ?? null) as Schema.Json)
    : Effect.fail(failedOf(entry))

export const failedOf = (entry: JournalEntry.Entry): OperationFailed =>
  new OperationFailed({
    key: entry.key,
    kind: entry.kind,
    reason: entry.reason ?? "failed",
    interrupted: Option.isSome(Recovery.interruptedByCrash(entry)),
    ...(entry.error === undefined ? {} : { error: entry.error as Schema.Json })
  })

/** The kernel's decisions for the session, each resuming on the session's new child. */
export const decisionsOf = <R>(
  decisions: { readonly [kind: string]: (entry: JournalEntry.Entry) => ExtensionSession.Decision } | undefined,
  resume: (entry: JournalEntry.Entry) => Effect.Effect<unknown, unknown, R>
): { readonly [kind: string]: Recovery.Decide<R> } =>
  Object.fromEntries(
    Object.entries(decisions ?? {}).map(([kind, decide]) => [
      kind,
      (entry: JournalEntry.Entry) =>
        decide(entry) === "Resume"
          ? Recovery.resume(resume)
          : Recovery.fail("the runner running it stopped, and its kind is not resumed")
    ])
  )

/**
 * Runs `Recovery.run` for the session, waiting out a claim that a dead runner still holds (it expires after its ttl
 * without renewal): the cluster gave this runner the session, so whoever holds the claim is gone or about to stop it.
 */
export const recover = <R>(
  options: Recovery.Options<R>,
  retryInterval: Duration.Input
) =>
  Recovery.run(options).pipe(
    Effect.tapError((error) =>
      error._tag === "OwnerInUse"
        ? Effect.logDebug(`session ${options.owner}: waiting for the claim of its previous runner`)
        : Effect.void
    ),
    Effect.retry({
      while: (error) => error._tag === "OwnerInUse",
      schedule: Schedule.spaced(retryInterval)
    })
  )

/** Runs one operation under the journal: answered from the journal when it already ended. */
export const handle = <R>(
  journal: Journal.Journal.Service,
  owner: string,
  operation: Operation,
  execute: (entry: JournalEntry.Entry) => Effect.Effect<Schema.Json, unknown, R>
): Effect.Effect<Schema.Json, OperationFailed | JournalError.JournalError, R> =>
  Effect.gen(function*() {
    const existing = yield* journal.get(operation.key)
    const entry = Option.isSome(existing)
      ? existing.value
      : (yield* journal.begin({ kind: operation.kind, key: operation.key, payload: operation.payload, owner }))
        .entry
    if (entry.owner !== owner) {
      return yield* new OperationFailed({
        key: operation.key,
        kind: operation.kind,
        reason: `the key belongs to ${entry.owner}`,
        interrupted: false
      })
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
      return yield* runEntry(journal, yield* journal.resume(entry.key, { attempts: entry.attempts }), execute)
    }
    return yield* runEntry(journal, entry, execute)
  })

const runEntry = <R>(
  journal: Journal.Journal.Service,
  entry: JournalEntry.Entry,
  execute: (entry: JournalEntry.Entry) => Effect.Effect<Schema.Json, unknown, R>
): Effect.Effect<Schema.Json, OperationFailed | JournalError.JournalError, R> =>
  // The journal step after the operation runs whatever happens to the fiber: an interruption lands only inside
  // `restore`, and is recorded as what it is (the entry stays InFlight, no longer running here).
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(Effect.exit(restore(execute(entry))), (exit) => {
      if (Exit.isSuccess(exit)) return Effect.as(journal.complete(entry.key, exit.value), exit.value)
      if (Cause.hasInterruptsOnly(exit.cause)) {
        return Effect.andThen(journal.release(entry.key), Effect.failCause(exit.cause as Cause.Cause<never>))
      }
      return Effect.flatMap(
        journal.fail(entry.key, JournalEntry.errorToJson(Cause.squash(exit.cause))),
        (failed) => Effect.fail(failedOf(failed))
      )
    })
  )

export const layer = <Serves extends Method.Any, Calls extends Method.Any, R>(
  options: ExtensionSession.Options<Serves, Calls, R>
): Layer.Layer<never, never, Sharding.Sharding | Journal.Journal | Exclude<R, Scope.Scope>> =>
  SessionEntity.toLayer(
    Effect.gen(function*() {
      const address = yield* Entity.CurrentAddress
      const sessionId = address.entityId
      const owner = ownerOf(sessionId)
      const journal = yield* Journal.Journal
      // The child and the recovery start beside the build, not in it: the cluster starts a runner's entities one
      // after the other, so a build that waited for a spawn, for a dead runner's claim or for resumed operations
      // would hold up every other session taken over with it. Operations wait until both are done. The child and
      // the claim belong to the entity's scope, and end with it.
      const ready = yield* Deferred.make<(entry: JournalEntry.Entry) => Effect.Effect<Schema.Json, unknown, R>>()
      yield* Effect.gen(function*() {
        const { peer } = yield* NodeChildProcess.makePeer<Serves, Calls, R>({
          command: options.command(sessionId),
          protocol: options.protocol,
          handlers: (options.handlers ?? {}) as Peer.Handlers<Serves, R>,
          name: `session ${sessionId}`,
          stop: options.stop,
          shutdown: options.shutdown
        }).pipe(Effect.orDie)
        const execute = (entry: JournalEntry.Entry) =>
          options.run(peer, {
            sessionId,
            key: entry.key,
            kind: entry.kind,
            payload: entry.payload as Schema.Json,
            attempt: entry.attempts
          })
        const report = yield* recover({
          owner,
          decisions: decisionsOf(options.decisions, execute),
          maxAttempts: options.maxAttempts,
          concurrency: options.concurrency ?? 1,
          claim: options.claim ?? { ttl: "10 seconds" }
        }, options.claimRetryInterval ?? Duration.millis(250)).pipe(Effect.orDie)
        if (report.resumed.length + report.failed.length + report.errors.length > 0) {
          yield* Effect.logInfo(
            `session ${sessionId} recovered: ${report.resumed.length} resumed, ${report.failed.length} failed, ${report.errors.length} errors`
          )
        }
        return execute
      }).pipe(
        Effect.exit,
        Effect.flatMap((exit) => Deferred.done(ready, exit)),
        Effect.forkScoped
      )
      // Keeps the entity, and its child, on this runner until `Close`; a new owner of the shard restarts it at once.
      yield* Entity.keepAlive(true)
      return SessionEntity.of({
        Run: ({ payload }) =>
          Effect.flatMap(Deferred.await(ready), (execute) =>
            // The operation's own failure is its reply; a journal that cannot be read or written is a defect (the
            // entity restarts, the message is delivered again).
            handle(journal, owner, payload, execute).pipe(
              Effect.catchTag("JournalError", (error) => Effect.die(error))
            )),
        Close: () => Effect.provideService(Entity.keepAlive(false), Entity.CurrentAddress, address)
      })
    }),
    { concurrency: options.concurrency ?? 1, maxIdleTime: options.maxIdleTime }
    // `R` is needed by the build and by the handlers alike; TypeScript cannot merge the two `Exclude`s.
  ) as Layer.Layer<never, never, Sharding.Sharding | Journal.Journal | Exclude<R, Scope.Scope>>

export const run = (
  sessionId: string,
  operation: { readonly key: string; readonly kind: string; readonly payload: Schema.Json }
) =>
  Effect.flatMap(
    SessionEntity.client,
    (clientFor) => clientFor(sessionId).Run(new Operation(operation))
  )

export const close = (sessionId: string) =>
  Effect.flatMap(SessionEntity.client, (clientFor) => clientFor(sessionId).Close())
