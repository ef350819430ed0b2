/**
 * A fleet session as an entity of Effect's cluster (`ExtensionSession.layer`): the session's child (`child.ts`), its
 * operations run on request and recorded in the journal (`operation.ts`), those running here counted (`inFlight.ts`),
 * its recovery when a runner takes it (`sessionRecovery.ts`) and the claim that recovery takes, kept until the
 * operations end (`sessionClaim.ts`). The build starts the child and the recovery beside it, never waiting on them,
 * and nothing here dies: the cluster would rebuild the entity in a loop, holding up the runner's other sessions.
 *
 * @internal
 */
import * as Journal from "@lifeline/journal/Journal"
import type * as JournalEntry from "@lifeline/journal/JournalEntry"
import * as GracefulShutdown from "@lifeline/kernel/GracefulShutdown"
import type * as Method from "@lifeline/kernel/Method"
import type * as Peer from "@lifeline/kernel/Peer"
import * as NodeChildProcess from "@lifeline/node/NodeChildProcess"
import * as Cause from "effect/Cause"
import * as Entity from "effect/cluster/Entity"
import * as Sharding from "effect/cluster/Sharding"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type * as ExtensionSession from "../ExtensionSession.js"
import { ExtensionUnavailable, InvalidOperation, OperationFailed } from "../FleetError.js"
import {
  ExtensionSession as SessionEntity,
  maxKeyLength,
  maxSessionIdLength,
  Operation,
  owner as ownerOf
} from "../SessionEntity.js"
import * as InFlight from "./inFlight.js"
import { handle, resolveDrainTimeout } from "./operation.js"
import * as ChildSlot from "./sessionChild.js"
import * as SessionClaim from "./sessionClaim.js"
import { decisionsOf, recover } from "./sessionRecovery.js"
import { deleteUnreleasedClaim } from "./unreleasedClaim.js"
import type { Invalid } from "./validate.js"
import { operationProblem, sessionIdProblem } from "./validate.js"

export { answer, defaultDrainTimeout, failedOf, handle, recordRetryWindow } from "./operation.js"
export { decisionsOf, recover } from "./sessionRecovery.js"

export const layer = <Serves extends Method.Any, Calls extends Method.Any, R>(
  options: ExtensionSession.Options<Serves, Calls, R>
): Layer.Layer<never, never, Sharding.Sharding | Journal.Journal | Exclude<R, Scope.Scope>> =>
  SessionEntity.toLayer(
    Effect.gen(function*() {
      const address = yield* Entity.CurrentAddress
      const sessionId = address.entityId
      const owner = ownerOf(sessionId)
      const journal = yield* Journal.Journal
      const sharding = yield* Sharding.Sharding
      const drainTimeout = yield* resolveDrainTimeout(options.drainTimeout)
      // A session id out of bounds (sent by an older client, or around `run`) cannot have a journal owner: its
      // operations are refused, and the entity starts no child.
      const invalid = sessionIdProblem(sessionId, maxSessionIdLength)
      // The child and the recovery start beside the build, not in it: the cluster starts a runner's entities one
      // after the other, so a build that waited for a spawn, for a dead runner's claim or for resumed operations
      // would hold up every other session taken over with it. Operations wait until both are done. Nothing here dies:
      // a handler that died would restart the entity in a loop, and hold up the runner's other sessions meanwhile.
      const ready = yield* Deferred.make<Execute<R>, OperationFailed>()
      // The children of sessions are not registered with `GracefulShutdown`: a graceful stop of the runner must not
      // stop them under operations in flight. They stop with their session's entity, after its drain.
      const slot = yield* ChildSlot.make({
        spawn: Effect.map(
          Effect.suspend(() =>
            NodeChildProcess.makePeer<Serves, Calls, R>({
              command: options.command(sessionId),
              protocol: options.protocol,
              handlers: (options.handlers ?? {}) as Peer.Handlers<Serves, R>,
              name: `session ${sessionId}`,
              stop: options.stop,
              shutdown: options.shutdown
            })
          ).pipe(Effect.updateContext(Context.omit(GracefulShutdown.GracefulShutdown))),
          ({ child, peer }) => ({ value: peer, alive: Effect.map(child.exitStatus, Option.isNone) })
        ),
        maxRestarts: options.maxRestarts ?? 3,
        backoff: options.restartBackoff ?? "1 second",
        describe: (error) => String(error)
      })
      const execute: Execute<R> = (entry) =>
        slot.acquire.pipe(
          Effect.mapError((unavailable) => new ExtensionUnavailable({ sessionId, ...unavailable })),
          Effect.flatMap((peer) =>
            options.run(peer, {
              sessionId,
              key: entry.key,
              kind: entry.kind,
              payload: entry.payload as Schema.Json,
              attempt: entry.attempts
            })
          ),
          Effect.tap(() => slot.succeeded)
        )
      // The token of the claim this session's recovery took, so that a claim the journal could not delete when the
      // session stopped (its Postgres down) is deleted later, not left to block the session's next runner.
      let claimToken: string | undefined
      const claimOptions = options.claim ?? { ttl: "10 seconds" }
      // The session's operations running here, and its recovery: the claim is let go only once they end (see
      // ./inFlight.ts), for at most the time an operation may still take once interrupted (its drain, then the
      // retries of its last journal step, each bounded by the journal's own timeout).
      const inFlight = InFlight.make()
      let recovery: Fiber.Fiber<unknown, unknown> | undefined
      // Added once, after the first claim (a retried recovery claims again, sharing it).
      let waitsForOperations = false
      const untilOperationsEnd = SessionClaim.untilOperationsEnd({
        sessionId,
        inFlight,
        drainTimeout,
        recovery: () => recovery
      })
      yield* Effect.addFinalizer(() =>
        claimToken === undefined
          ? invalid === undefined
            ? Effect.logDebug(`session ${sessionId}: stopped before its recovery took its claim`)
            : Effect.void
          : Effect.asVoid(Effect.forkDetach(deleteUnreleasedClaim(journal, owner, claimToken, claimOptions)))
      )
      if (invalid === undefined) {
        recovery = yield* Effect.gen(function*() {
          // Started with the session, so that a resumed operation finds it; a failure is the operations' to report.
          yield* slot.acquire.pipe(
            Effect.catch((unavailable) =>
              Effect.logWarning(`session ${sessionId}: its extension did not start: ${unavailable.detail}`)
            )
          )
          const report = yield* recover(
            {
              owner,
              decisions: decisionsOf(options.decisions, execute),
              maxAttempts: options.maxAttempts,
              concurrency: options.concurrency ?? 1,
              claim: claimOptions
            },
            options.claimRetryInterval ?? Duration.millis(250),
            // Uninterruptible as a whole: the claim's own acquisition is, and a stop that came between it and this
            // step would leave the claim without its token, so a claim the journal could not release (Postgres
            // down) would never be deleted (packages/fleet/test/ExtensionSessionDrainClaim.test.ts).
            Effect.uninterruptible(Effect.flatMap(journal.claim(owner, claimOptions), (held) => {
              claimToken = held.holder
              if (waitsForOperations) return Effect.void
              waitsForOperations = true
              // Runs before the claim's own release (finalizers run last in, first out); at once, in this fiber, if
              // the session's scope closed meanwhile.
              return Effect.addFinalizer(() => untilOperationsEnd)
            })),
            drainTimeout
          ).pipe(
            // A journal that cannot be reached is waited for; any other failure ends the session's start.
            Effect.retry({
              while: (error) => error._tag === "JournalError" && error.reason === "Storage",
              schedule: Schedule.min([Schedule.exponential("500 millis"), Schedule.spaced("10 seconds")])
            })
          )
          if (report.resumed.length + report.failed.length + report.errors.length > 0) {
            yield* Effect.logInfo(
              `session ${sessionId} recovered: ${report.resumed.length} resumed, ${report.failed.length} failed, ${report.errors.length} errors`
            )
          }
          return execute
        }).pipe(
          Effect.catchCause((cause): Effect.Effect<never, OperationFailed> =>
            Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause as Cause.Cause<never>) : Effect.fail(
              new OperationFailed({
                key: "",
                kind: "",
                reason: `the session could not start: ${Cause.pretty(cause).slice(0, 2000)}`,
                interrupted: false
              })
            )
          ),
          Effect.exit,
          Effect.flatMap((exit) => Deferred.done(ready, exit)),
          Effect.forkScoped
        )
      }
      // Keeps the entity, and its child, on this runner until `Close`; a new owner of the shard restarts it at once.
      // An entity with an invalid id has nothing to keep: it stops once idle.
      if (invalid === undefined) yield* Entity.keepAlive(true)
      const refuse = (operation: Operation, reason: string) =>
        Effect.fail(new OperationFailed({ key: operation.key, kind: operation.kind, reason, interrupted: false }))
      return SessionEntity.of({
        Run: ({ payload }) =>
          Effect.gen(function*() {
            // A stopping runner starts nothing: the operation is left to the next runner (the entity's termination
            // interrupts this wait, and the cluster does not answer an interrupted persisted request).
            if (yield* sharding.isShutdown) return yield* Effect.never
            if (invalid !== undefined) return yield* refuse(payload, `invalid session id: ${invalid.problem}`)
            const problem = operationProblem(payload, maxKeyLength)
            if (problem !== undefined) return yield* refuse(payload, `invalid ${problem.field}: ${problem.problem}`)
            const run = yield* Deferred.await(ready).pipe(
              Effect.mapError((error) => new OperationFailed({ ...error, key: payload.key, kind: payload.kind }))
            )
            // The operation's own failure is its reply. A journal that cannot be reached is a defect (the entity
            // restarts, the message is delivered again); one that refuses the operation is its reply.
            return yield* inFlight.track(handle(journal, owner, payload, run, drainTimeout)).pipe(
              Effect.catchTag("JournalError", (error) =>
                error.reason === "Storage"
                  ? Effect.die(error)
                  : refuse(payload, `the journal refused it: ${error.message}`))
            )
          }),
        Close: () => Effect.provideService(Entity.keepAlive(false), Entity.CurrentAddress, address)
      })
    }),
    { concurrency: options.concurrency ?? 1, maxIdleTime: options.maxIdleTime }
    // `R` is needed by the build and by the handlers alike; TypeScript cannot merge the two `Exclude`s.
  ) as Layer.Layer<never, never, Sharding.Sharding | Journal.Journal | Exclude<R, Scope.Scope>>

type Execute<R> = (entry: JournalEntry.Entry) => Effect.Effect<Schema.Json, unknown, R>

const check = (invalid: () => Invalid | undefined): Effect.Effect<void, InvalidOperation> =>
  Effect.suspend(() => {
    const problem = invalid()
    return problem === undefined ? Effect.void : Effect.fail(new InvalidOperation(problem))
  })

export const run = (
  sessionId: string,
  operation: { readonly key: string; readonly kind: string; readonly payload: Schema.Json }
) =>
  Effect.andThen(
    check(() => sessionIdProblem(sessionId, maxSessionIdLength) ?? operationProblem(operation, maxKeyLength)),
    Effect.flatMap(SessionEntity.client, (clientFor) => clientFor(sessionId).Run(new Operation(operation)))
  )

export const close = (sessionId: string) =>
  Effect.andThen(
    check(() => sessionIdProblem(sessionId, maxSessionIdLength)),
    Effect.flatMap(SessionEntity.client, (clientFor) => clientFor(sessionId).Close())
  )
