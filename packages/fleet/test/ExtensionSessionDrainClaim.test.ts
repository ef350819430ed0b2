/**
 * A session's claim outlives the operations it drains. When a runner stops a session (its shards move, it shuts down,
 * or Postgres is down and Effect's preemptive shutdown stops its entities), Effect's RPC server answers the
 * interrupted request at once and the entity's scope closes, while the operation still runs within its drain and its
 * end is still being recorded. The claim on the session's owner must stay until then: a runner that took the session
 * and claimed it sooner would find the operation unfinished and run it a second time (seen in
 * test/FleetOutage.test.ts: `Completed` at attempt 2 after a 10 s outage).
 */
import { assert, describe, it } from "@effect/vitest"
import { ExtensionSession } from "@lifeline/fleet"
import { Journal, JournalBackend, JournalError } from "@lifeline/journal"
import { Protocol } from "@lifeline/kernel"
import { Deferred, Effect, Exit, Fiber, Layer, Option, Scope } from "effect"
import {
  MessageStorage,
  RunnerHealth,
  Runners,
  RunnerStorage,
  Sharding,
  ShardingConfig,
  TestRunner
} from "effect/cluster"
import * as Extension from "./support/extension.js"

const effectsFile = Extension.newEffectsFile("drain")

/** The memory journal, with what happens to the claims and the ends of operations written down in order. */
const recordingJournal = (events: Array<string>) =>
  Layer.effect(
    Journal.Journal,
    Effect.map(Journal.Journal, (journal) =>
      Journal.Journal.of({
        ...journal,
        complete: (key, result) =>
          Effect.tap(journal.complete(key, result), () => Effect.sync(() => events.push(`complete ${key}`))),
        claim: (owner, options) =>
          Effect.tap(
            journal.claim(owner, options),
            () => Effect.addFinalizer(() => Effect.sync(() => events.push(`release ${owner}`)))
          )
      }))
  ).pipe(Layer.provide(Journal.layerMemory))

const sessions = ExtensionSession.layer({
  command: (sessionId) => Extension.command(sessionId, effectsFile),
  protocol: Protocol.make({ calls: [Extension.Work] }),
  run: Extension.run
})

/**
 * Effect's in-memory cluster (as `TestRunner.layer`) whose shard lock storage fails once `down.value` is set, as it
 * does when Postgres is down: the runner finds its locks unhealthy and force-releases its shards at once (its entities'
 * scopes close without waiting for their handlers).
 */
const clusterWithLocks = (down: { value: boolean }) =>
  Sharding.layer.pipe(
    Layer.provideMerge(Runners.layerNoop),
    Layer.provideMerge(MessageStorage.layerMemory),
    Layer.provide([
      Layer.effect(
        RunnerStorage.RunnerStorage,
        Effect.map(RunnerStorage.RunnerStorage, (storage) =>
          RunnerStorage.RunnerStorage.of({
            ...storage,
            refresh: (address, shardIds) =>
              down.value ? Effect.die("the lock storage is down") : storage.refresh(address, shardIds)
          }))
      ).pipe(Layer.provide(RunnerStorage.layerMemory)),
      RunnerHealth.layerNoop
    ]),
    Layer.provide(ShardingConfig.layer({ shardLockRefreshInterval: "200 millis", shardLockExpiration: "2 seconds" }))
  )

const started = (key: string) => Extension.starts(effectsFile, key) > 0

describe("ExtensionSession: the claim and the drain", () => {
  it.live(
    "a runner that stops with an operation in flight lets go of the session's claim only after recording its end",
    () =>
      Effect.gen(function*() {
        const events: Array<string> = []
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(
          sessions.pipe(Layer.provideMerge(TestRunner.layer), Layer.provideMerge(recordingJournal(events))),
          scope
        )
        const key = "d-1/op-1"
        const call = yield* ExtensionSession.run("d-1", { key, kind: "work", payload: { ms: 1_500 } }).pipe(
          Effect.provideContext(context),
          Effect.forkDetach
        )
        while (!started(key)) yield* Effect.sleep("20 millis")
        // The runner stops (its whole scope: Effect's sharding shuts its entities down) with the operation in flight.
        yield* Scope.close(scope, Exit.void)
        yield* Fiber.interrupt(call)
        const owner = ExtensionSession.owner("d-1")
        assert.include(events, `complete ${key}`, "the operation finished within the drain and was recorded")
        assert.include(events, `release ${owner}`)
        assert.isBelow(
          events.indexOf(`complete ${key}`),
          events.indexOf(`release ${owner}`),
          `the claim was let go before the end was recorded: ${events.join(", ")}`
        )
      }),
    60_000
  )

  it.live(
    "a runner whose shard locks fail (Postgres down) keeps the claim until the operation it drains is recorded",
    () => {
      const events: Array<string> = []
      const down = { value: false }
      return Effect.gen(function*() {
        const key = "d-2/op-1"
        const call = yield* ExtensionSession.run("d-2", { key, kind: "work", payload: { ms: 1_500 } }).pipe(
          Effect.forkScoped
        )
        while (!started(key)) yield* Effect.sleep("20 millis")
        down.value = true
        // The claim is deleted when the last Scope holding it closes: poll the journal for that moment.
        const journal = yield* Journal.Journal
        const owner = ExtensionSession.owner("d-2")
        const deadline = Date.now() + 20_000
        while ((yield* journal.holds(owner)) && Date.now() < deadline) yield* Effect.sleep("10 millis")
        const whenLetGo = [...events]
        yield* Fiber.interrupt(call)
        assert.isFalse(yield* journal.holds(owner), "the claim was let go once the operation ended")
        assert.include(whenLetGo, `complete ${key}`, "the claim was let go before the operation's end was recorded")
      }).pipe(
        Effect.provide(
          sessions.pipe(Layer.provideMerge(clusterWithLocks(down)), Layer.provideMerge(recordingJournal(events)))
        ),
        Effect.scoped
      )
    },
    60_000
  )

  it.live(
    "a session stopped while its recovery takes its claim, with the journal down, deletes that claim once it is back",
    () =>
      Effect.gen(function*() {
        const memory = yield* JournalBackend.makeMemory
        const inClaim = yield* Deferred.make<void>()
        const letClaimEnd = yield* Deferred.make<void>()
        const down = { value: false }
        // The claim's insert waits until the test lets it end; the claim's deletion fails while `down`.
        const backend: JournalBackend.Backend = {
          ...memory,
          insertClaim: (claim) =>
            Effect.andThen(
              Effect.andThen(Deferred.succeed(inClaim, undefined), Deferred.await(letClaimEnd)),
              memory.insertClaim(claim)
            ),
          deleteClaim: (owner, holder) =>
            down.value
              ? Effect.fail(new JournalError.JournalError({ reason: "Storage", detail: "connection refused" }))
              : memory.deleteClaim(owner, holder)
        }
        const owner = ExtensionSession.owner("g-1")
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(
          sessions.pipe(
            Layer.provideMerge(TestRunner.layer),
            Layer.provideMerge(Layer.effect(Journal.Journal, Journal.make(backend)))
          ),
          scope
        )
        yield* ExtensionSession.run("g-1", { key: "g-1/op-1", kind: "work", payload: { ms: 10 } }).pipe(
          Effect.provideContext(context),
          Effect.forkDetach
        )
        // The session's recovery is inside the claim (uninterruptible) when the runner stops, and the journal is down.
        yield* Deferred.await(inClaim)
        down.value = true
        const closing = yield* Effect.forkDetach(Scope.close(scope, Exit.void))
        // Time for the stop to reach the session (nothing outside it shows when it has): had it not yet, the claim
        // would end before the stop and the test pass without checking anything; it failed before the fix.
        yield* Effect.sleep("200 millis")
        yield* Deferred.succeed(letClaimEnd, undefined)
        yield* Fiber.join(closing)
        assert.isTrue(Option.isSome(yield* memory.getClaim(owner)), "the claim could not be released while down")
        down.value = false
        const deadline = Date.now() + 10_000
        while (Option.isSome(yield* memory.getClaim(owner)) && Date.now() < deadline) {
          yield* Effect.sleep("50 millis")
        }
        assert.isTrue(
          Option.isNone(yield* memory.getClaim(owner)),
          "the claim left stored was deleted once the journal was back"
        )
      }),
    60_000
  )
})
