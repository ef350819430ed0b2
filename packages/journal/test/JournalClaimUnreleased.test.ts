import { assert, describe, it } from "@effect/vitest"
import { Journal, JournalBackend, JournalClaim, JournalError } from "@lifeline/journal"
import { Effect, Exit, Ref, Scope } from "effect"

const owner = "host-a"
const options: JournalClaim.ClaimOptions = { ttl: "4 seconds" }

// Two journals on one host and one storage, each alive as far as the other can tell; the claims' storage can go down.
const twoJournals = Effect.gen(function*() {
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
  // The first one claims the owner, then lets go while the storage is down: the claim is left stored.
  const scope = yield* Scope.make()
  const held = yield* Scope.provide(first.claim(owner, options), scope)
  yield* Ref.set(down, true)
  yield* Scope.close(scope, Exit.void)
  return { first, second, down, token: held.holder }
})

describe("JournalClaim.deleteUnreleased", () => {
  it.effect("a claim left stored is a Storage error while the storage is down, deleted once it is back", () =>
    Effect.gen(function*() {
      const { down, first, second, token } = yield* twoJournals
      const whileDown = yield* Effect.flip(JournalClaim.deleteUnreleased(first, owner, token, options))
      assert.strictEqual(whileDown.reason, "Storage")
      yield* Ref.set(down, false)
      assert.strictEqual(yield* JournalClaim.deleteUnreleased(first, owner, token, options), "deleted")
      // The next claimant takes it at once.
      const taken = yield* Effect.scoped(second.claim(owner, options))
      assert.notStrictEqual(taken.holder, token)
    }))

  it.effect("one held again, or someone else's, is left alone", () =>
    Effect.gen(function*() {
      const { down, first, token } = yield* twoJournals
      yield* Ref.set(down, false)
      const scope = yield* Scope.make()
      yield* Scope.provide(first.claim(owner, options), scope)
      assert.strictEqual(yield* JournalClaim.deleteUnreleased(first, owner, token, options), "held again")
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(yield* JournalClaim.deleteUnreleased(first, owner, "another-journal", options), "not ours")
    }))
})
