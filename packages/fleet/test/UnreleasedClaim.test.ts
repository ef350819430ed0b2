/**
 * A session's claim that its runner's journal could not delete when the session stopped (Postgres down): on the same
 * host it never expires while that runner lives (a live holder keeps its claim past expiry), so the session's next
 * runner waited for it as long as the first one ran. `deleteUnreleasedClaim` deletes it once the journal is back. This
 * was the hang of test/FleetOutage.test.ts in a run of the whole integration project: a runner that held all the shards
 * when Postgres stopped could not release its sessions' claims, and the runners that took those sessions afterwards
 * waited for 60 s, until the test ended.
 */
import { assert, describe, it } from "@effect/vitest"
import type { JournalClaim } from "@lifeline/journal"
import { Journal, JournalBackend, JournalError } from "@lifeline/journal"
import { Effect, Exit, Fiber, Option, Ref, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as internal from "../src/internal/unreleasedClaim.js"

const owner = "fleet/session/s-1"
const claim: JournalClaim.ClaimOptions = { ttl: "4 seconds" }

// Two runners on one host and one storage, each alive as far as the other can tell; the storage can go down.
const fleetOfTwo = Effect.gen(function*() {
  const memory = yield* JournalBackend.makeMemory
  const down = yield* Ref.make(false)
  const failing = <A>(effect: Effect.Effect<A, JournalError.JournalError>) =>
    Effect.flatMap(Ref.get(down), (isDown) =>
      isDown
        ? Effect.fail(new JournalError.JournalError({ reason: "Storage", detail: "connection refused" }))
        : effect)
  const backend: JournalBackend.Backend = {
    ...memory,
    insertClaim: (c) => failing(memory.insertClaim(c)),
    replaceClaim: (c, where) => failing(memory.replaceClaim(c, where)),
    getClaim: (o) => failing(memory.getClaim(o)),
    deleteClaim: (o, holder) => failing(memory.deleteClaim(o, holder))
  }
  const alive = () => Effect.succeed("Alive" as const)
  const first = yield* Journal.make(backend, { identity: { pid: 101, host: "vm" }, liveness: alive })
  const second = yield* Journal.make(backend, { identity: { pid: 102, host: "vm" }, liveness: alive })
  return { first, second, down }
})

/** The first runner claims the session, then lets go while the storage is down: the claim is left stored. */
const leaveClaim = (first: Journal.Journal.Service, down: Ref.Ref<boolean>) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const held = yield* Scope.provide(first.claim(owner, claim), scope)
    yield* Ref.set(down, true)
    yield* Scope.close(scope, Exit.void)
    return held.holder
  })

describe("ExtensionSession: a claim left stored when the session stopped", () => {
  it.effect("without the deletion, the session's next runner on the host waits as long as the first one lives", () =>
    Effect.gen(function*() {
      const { down, first, second } = yield* fleetOfTwo
      yield* leaveClaim(first, down)
      yield* Ref.set(down, false)
      yield* TestClock.adjust("1 minute")
      const refused = yield* Effect.flip(Effect.scoped(second.claim(owner, claim)))
      assert.strictEqual(refused._tag, "OwnerInUse")
    }))

  it.effect("is deleted once the journal is back, and the next runner takes the session", () =>
    Effect.gen(function*() {
      const { down, first, second } = yield* fleetOfTwo
      const token = yield* leaveClaim(first, down)
      const deleting = yield* Effect.forkChild(internal.deleteUnreleasedClaim(first, owner, token, claim))
      yield* TestClock.adjust("10 seconds")
      assert.isUndefined(deleting.pollUnsafe(), "retried while the storage is down")
      yield* Ref.set(down, false)
      yield* TestClock.adjust(internal.unreleasedClaimRetryInterval)
      yield* Fiber.join(deleting)
      assert.isTrue(Option.isNone(yield* first.holder(owner)))
      const taken = yield* Effect.scoped(second.claim(owner, claim))
      assert.notStrictEqual(taken.holder, token)
    }))

  it.effect("a claim another runner holds now is left alone", () =>
    Effect.gen(function*() {
      const { down, first, second } = yield* fleetOfTwo
      const token = yield* leaveClaim(first, down)
      yield* Ref.set(down, false)
      // The unreleased claim expires; say the first runner's process is gone for a moment: the second takes it over.
      const scope = yield* Scope.make()
      const memoryHolder = yield* first.holder(owner)
      assert.isTrue(Option.isSome(memoryHolder))
      yield* Effect.flip(Scope.provide(second.claim(owner, claim), scope))
      // (Alive: refused.) Delete it through the first runner, then let the second take it and hold it.
      yield* internal.deleteUnreleasedClaim(first, owner, token, claim)
      const held = yield* Scope.provide(second.claim(owner, claim), scope)
      yield* internal.deleteUnreleasedClaim(first, owner, token, claim)
      assert.deepStrictEqual(Option.map(yield* first.holder(owner), (c) => c.holder), Option.some(held.holder))
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("a claim the same runner holds again (the session came back) is left alone", () =>
    Effect.gen(function*() {
      const { down, first } = yield* fleetOfTwo
      const token = yield* leaveClaim(first, down)
      yield* Ref.set(down, false)
      const scope = yield* Scope.make()
      const again = yield* Scope.provide(first.claim(owner, claim), scope)
      assert.strictEqual(again.holder, token)
      yield* internal.deleteUnreleasedClaim(first, owner, token, claim)
      assert.isTrue(yield* first.holds(owner))
      assert.isTrue(Option.isSome(yield* first.holder(owner)))
      yield* Scope.close(scope, Exit.void)
      assert.isTrue(Option.isNone(yield* first.holder(owner)))
    }))

  it.effect("retries stop after the window (10 minutes)", () =>
    Effect.gen(function*() {
      const { down, first } = yield* fleetOfTwo
      const token = yield* leaveClaim(first, down)
      const deleting = yield* Effect.forkChild(internal.deleteUnreleasedClaim(first, owner, token, claim))
      yield* TestClock.adjust(internal.unreleasedClaimRetryWindow)
      yield* TestClock.adjust("1 minute")
      assert.isDefined(deleting.pollUnsafe())
      yield* Ref.set(down, false)
      assert.isTrue(Option.isSome(yield* first.holder(owner)), "still stored: nobody deleted it")
    }))
})
