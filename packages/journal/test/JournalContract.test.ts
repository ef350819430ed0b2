import { assert, describe, it } from "@effect/vitest"
import { Journal, JournalBackend } from "@lifeline/journal"
import { JournalContract } from "@lifeline/journal/testing"
import { Cause, Effect, Exit, Option } from "effect"

// The in-memory backend: two journals made on one backend share its rows and claims, as two processes share a file.
const memoryStore: JournalContract.MakeStore = Effect.map(JournalBackend.makeMemory, (backend) => ({
  backend,
  open: Journal.make(backend)
}))

describe("JournalContract: memory", () => {
  for (const { name, run } of JournalContract.cases(memoryStore)) {
    it.effect(name, () => Effect.scoped(run))
  }
})

// A store over a broken backend, to show that the contract catches what recovery cannot live with.
const brokenStore = (
  breakIt: (backend: JournalBackend.Backend) => JournalBackend.Backend
): JournalContract.MakeStore =>
  Effect.map(JournalBackend.makeMemory, (backend) => {
    const broken = breakIt(backend)
    return { backend: broken, open: Journal.make(broken) }
  })

const violation = (store: JournalContract.MakeStore, name: string) =>
  Effect.gen(function*() {
    const rule = JournalContract.cases(store).find((candidate) => candidate.name.startsWith(name))
    assert.isDefined(rule)
    const exit = yield* Effect.exit(Effect.scoped(rule!.run))
    assert.isTrue(Exit.isFailure(exit))
    if (Exit.isFailure(exit)) {
      const defect = Cause.squash(exit.cause)
      assert.instanceOf(defect, JournalContract.ContractViolation)
      return (defect as Error).message
    }
    return ""
  })

describe("JournalContract catches broken backends", () => {
  it.effect("an update that ignores the attempts guard: two recoveries both resume", () =>
    Effect.gen(function*() {
      const message = yield* violation(
        brokenStore((backend) => ({
          ...backend,
          update: (key, where, patch) => backend.update(key, { statuses: where.statuses }, patch)
        })),
        "two recoveries resume the same leftover at once"
      )
      assert.include(message, "recoveries that resumed the entry: expected 1, got 2")
    }))

  it.effect("a claim insert that overwrites the stored claim: two holders at once", () =>
    Effect.gen(function*() {
      const message = yield* violation(
        brokenStore((backend) => ({
          ...backend,
          insertClaim: (claim) =>
            Effect.flatMap(backend.getClaim(claim.owner), (stored) =>
              Option.isSome(stored)
                ? Effect.as(backend.replaceClaim(claim, { holder: stored.value.holder }), { claim, inserted: true })
                : backend.insertClaim(claim))
        })),
        "claim holds the owner for the Scope"
      )
      assert.include(message, "a second journal's claim")
    }))
})
