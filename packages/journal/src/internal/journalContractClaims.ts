/** @internal */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/testing/TestClock"
import type * as Journal from "../Journal.js"
import type * as JournalContract from "../testing/JournalContract.js"
import { check, eventually, refused, same } from "./journalContractChecks.js"

type Service = Journal.Journal.Service

// A claim left by a process on another host that stopped renewing it: expiry, not liveness, decides.
const strangersClaim = (owner: string, expiresAt: number) => ({
  owner,
  holder: "a-holder-that-crashed",
  pid: 1,
  host: "another-host.invalid",
  startedAt: 0,
  claimedAt: expiresAt - 30_000,
  expiresAt
})

/** @internal */
type WithStore = (
  f: (store: JournalContract.Store) => Effect.Effect<void, unknown, Scope.Scope>
) => Effect.Effect<void, unknown, Scope.Scope>
/** @internal */
export type WithJournal = (
  f: (journal: Service, store: JournalContract.Store) => Effect.Effect<void, unknown, Scope.Scope>
) => Effect.Effect<void, unknown, Scope.Scope>
/** @internal */
export type Test = (name: string, run: Effect.Effect<void, unknown, Scope.Scope>) => JournalContract.Case

/** @internal */
export const claimCases = (
  withStore: WithStore,
  withJournal: WithJournal,
  test: Test
): ReadonlyArray<JournalContract.Case> => [
  test(
    "claim holds the owner for the Scope: another journal gets OwnerInUse, then claims it once released",
    withStore((store) =>
      Effect.gen(function*() {
        const [one, two] = yield* Effect.all([store.open, store.open])
        const scope = yield* Scope.make()
        const claim = yield* Scope.provide(one.claim("host", { ttl: "30 seconds" }), scope)
        yield* same([claim.owner, claim.claimedAt, claim.expiresAt], ["host", 0, 30_000], "the claim")
        yield* check(yield* one.holds("host"), "the claimant holds the owner")
        yield* same(
          Option.map(yield* two.holder("host"), (stored) => stored.holder),
          Option.some(claim.holder),
          "the stored holder"
        )
        yield* refused(two.claim("host"), "OwnerInUse", "a second journal's claim")
        yield* check(!(yield* two.holds("host")), "the refused journal does not hold the owner")
        yield* Scope.close(scope, Exit.void)
        yield* check(!(yield* one.holds("host")), "released with the Scope")
        yield* same(Option.isNone(yield* two.holder("host")), true, "the released claim is deleted")
        yield* two.claim("host")
        yield* check(yield* two.holds("host"), "the second journal holds the owner once released")
      })
    )
  ),
  test(
    "the holder renews its claim on the Clock: it never expires while the holder runs",
    withStore((store) =>
      Effect.gen(function*() {
        const [one, two] = yield* Effect.all([store.open, store.open])
        yield* one.claim("host", { ttl: "30 seconds" })
        for (let step = 1; step <= 6; step++) {
          yield* TestClock.adjust("10 seconds")
          const due = step * 10_000 + 30_000
          yield* eventually(
            Effect.map(two.holder("host"), Option.exists((claim) => claim.expiresAt === due)),
            `renewed at ${step * 10} s until ${due} ms`
          )
        }
        yield* check(yield* one.holds("host"), "still held after twice the ttl")
        yield* refused(two.claim("host"), "OwnerInUse", "claiming a renewed owner")
      })
    )
  ),
  test(
    "a claim whose holder stopped renewing is refused until it expires, then taken over",
    withJournal((journal, store) =>
      Effect.gen(function*() {
        yield* store.backend.insertClaim(strangersClaim("host", 30_000))
        yield* refused(journal.claim("host"), "OwnerInUse", "claiming before the claim expires")
        yield* TestClock.adjust("30 seconds")
        const taken = yield* journal.claim("host", { ttl: "10 seconds" })
        yield* same([taken.claimedAt, taken.expiresAt], [30_000, 40_000], "the claim taken over")
        yield* same(
          Option.map(yield* journal.holder("host"), (claim) => claim.holder),
          Option.some(taken.holder),
          "the new holder"
        )
      })
    )
  ),
  test(
    "a stale holder whose claim was taken over loses it: holds says false and it cannot claim again",
    withJournal((journal, store) =>
      Effect.gen(function*() {
        const mine = yield* journal.claim("host", { ttl: "30 seconds" })
        // Another journal took the owner over while this one was paused.
        const replaced = yield* store.backend.replaceClaim(
          { ...strangersClaim("host", 1_000_000), holder: "the-new-holder" },
          { holder: mine.holder }
        )
        yield* check(replaced, "the backend replaced the claim held by the stale holder")
        // Its renewal, a third of the ttl later, finds the claim gone: it is lost before it would expire.
        yield* TestClock.adjust("10 seconds")
        yield* eventually(
          Effect.map(journal.holds("host"), (holds) => !holds),
          "the stale holder no longer holds the owner"
        )
        yield* refused(journal.claim("host"), "OwnerInUse", "the stale holder claiming again")
      })
    )
  ),
  test(
    "two journals claim the same owner at once: exactly one holds it",
    withStore((store) =>
      Effect.gen(function*() {
        for (let round = 0; round < 5; round++) {
          const journals = yield* Effect.all([store.open, store.open])
          const exits = yield* Effect.all(journals.map((journal) => Effect.exit(journal.claim(`owner-${round}`))), {
            concurrency: 2
          })
          yield* same(exits.filter(Exit.isSuccess).length, 1, `round ${round}: journals that claimed the owner`)
        }
      })
    )
  )
]
