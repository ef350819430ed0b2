/** @internal */
import * as UntrustedText from "@lifeline/kernel/UntrustedText"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import type * as Journal from "../Journal.js"
import type * as JournalBackend from "../JournalBackend.js"
import type * as JournalClaim from "../JournalClaim.js"
import { maxKeyLength } from "../JournalEntry.js"
import { JournalError, OwnerInUse } from "../JournalError.js"
import { JournalService } from "./journalService.js"

/** @internal */
export const defaultTtl: Duration.Input = "30 seconds"

/** @internal */
export const Owner: Context.Reference<string> = Context.Reference<string>("@lifeline/journal/Journal/Owner", {
  defaultValue: () => "local"
})

const storageDisagrees = (owner: string) =>
  new JournalError({
    reason: "Storage",
    detail: `the claim on owner ${
      UntrustedText.shown(owner)
    } is stored as this journal's, yet the storage did not replace it`
  })

const describeClaim = (claim: JournalClaim.Claim): string =>
  `${claim.pid === undefined ? "journal" : `process ${claim.pid}`}${
    claim.host === undefined ? "" : ` on ${UntrustedText.shown(claim.host)}`
  }`

const inUse = (claim: JournalClaim.Claim) => {
  const { holder: _, ...fields } = claim
  return new OwnerInUse(fields)
}

interface Held {
  claim: JournalClaim.Claim
  count: number
  lost: boolean
  renewal: Fiber.Fiber<void> | undefined
}

// Owner claims: one row per owner in the storage, held by one journal instance (its random token) and renewed by a
// fiber on the Clock. The rows decide between processes; `held` shares this journal's claims between its fibers.
/** @internal */
export const makeClaims = (backend: JournalBackend.Backend, options: Journal.MakeOptions | undefined) => {
  const token = globalThis.crypto.randomUUID().replaceAll("-", "")
  const identity = options?.identity
  const held = new Map<string, Held>()
  const lock = Semaphore.makeUnsafe(1)

  const stamp = (owner: string, now: number, ttl: number): JournalClaim.Claim => {
    const claim: { -readonly [K in keyof JournalClaim.Claim]: JournalClaim.Claim[K] } = {
      owner,
      holder: token,
      claimedAt: now,
      expiresAt: now + ttl
    }
    if (identity?.pid !== undefined) claim.pid = identity.pid
    if (identity?.host !== undefined) claim.host = identity.host
    if (identity?.startedAt !== undefined) claim.startedAt = identity.startedAt
    return claim
  }

  // Only a process on this host can be checked; elsewhere the claim's expiry decides.
  const livenessOf = (claim: JournalClaim.Claim): Effect.Effect<"Alive" | "Dead" | "Unknown"> =>
    options?.liveness !== undefined && identity?.host !== undefined && claim.host === identity.host &&
      claim.pid !== undefined
      ? options.liveness(claim)
      : Effect.succeed("Unknown")

  const acquire = (owner: string, ttl: number): Effect.Effect<JournalClaim.Claim, OwnerInUse | JournalError> =>
    Effect.gen(function*() {
      // Each round reads what is stored and replaces it only if it is still what was read: a claimant that races
      // this one makes it read again, a few times at most.
      for (let tries = 0;; tries++) {
        const now = yield* Clock.currentTimeMillis
        const mine = stamp(owner, now, ttl)
        const { claim: stored, inserted } = yield* backend.insertClaim(mine)
        if (inserted) return mine
        // Left by this very journal (a release that could not delete it): take it again.
        if (stored.holder === token) {
          if (yield* backend.replaceClaim(mine, { holder: token })) return mine
          // Stored as ours, yet not replaced: the storage contradicts itself (a backend that misreads how many rows
          // its writes changed). Fail rather than loop.
          if (tries >= 3) return yield* storageDisagrees(owner)
          continue
        }
        const liveness = yield* livenessOf(stored)
        const expired = stored.expiresAt <= now
        // A holder proven alive keeps its claim even past expiry: it is paused (stopped, swapped out), not gone.
        if (liveness === "Alive" || (liveness === "Unknown" && !expired) || tries >= 3) return yield* inUse(stored)
        if (yield* backend.replaceClaim(mine, { holder: stored.holder, expiresAt: stored.expiresAt })) {
          yield* Effect.logWarning(
            `journal: took over owner ${UntrustedText.shown(owner)} from ${describeClaim(stored)}: ${
              liveness === "Dead" ? "its process is gone" : "its claim expired"
            }`
          )
          return mine
        }
      }
    })

  // Conditional on the token only: a claim that expired while the storage failed is extended if nobody took it.
  const extend = (entry: Held, ttl: number): Effect.Effect<boolean, JournalError> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const next = { ...entry.claim, expiresAt: now + ttl }
      return Effect.map(backend.replaceClaim(next, { holder: token }), (extended) => {
        if (extended) entry.claim = next
        return extended
      })
    })

  const renew = (owner: string, entry: Held, ttl: number): Effect.Effect<void> =>
    Effect.gen(function*() {
      const every = Duration.millis(Math.max(1, Math.floor(ttl / 3)))
      // Failures in a row: one short line each (an outage would otherwise log a whole error object every ttl/3), and
      // one line when the claim is renewed again.
      let failures = 0
      for (;;) {
        yield* Effect.sleep(every)
        const renewed = yield* Effect.result(extend(entry, ttl))
        if (Result.isFailure(renewed)) {
          failures += 1
          yield* Effect.logWarning(
            `journal: could not renew the claim on owner ${
              UntrustedText.shown(owner)
            } (failure ${failures} in a row): ${renewed.failure.message}`
          )
          continue
        }
        if (failures > 0 && renewed.success) {
          yield* Effect.logInfo(
            `journal: renewed the claim on owner ${UntrustedText.shown(owner)} again after ${failures} failure(s)`
          )
        }
        failures = 0
        if (renewed.success) continue
        entry.lost = true
        const taker = yield* Effect.option(backend.getClaim(owner))
        yield* Effect.logError(
          `journal: lost the claim on owner ${UntrustedText.shown(owner)} after it expired${
            Option.isSome(taker) && Option.isSome(taker.value) ? `: ${describeClaim(taker.value.value)} holds it` : ""
          }; its unfinished operations may be recovered by the new holder`
        )
        return
      }
    })

  // A claim this journal holds but could not renew in time may have been taken over: renew it now, or give it up.
  const stillHeld = (entry: Held, ttl: number): Effect.Effect<boolean, JournalError> =>
    Effect.gen(function*() {
      if ((yield* Clock.currentTimeMillis) < entry.claim.expiresAt) return true
      if (yield* extend(entry, ttl)) return true
      entry.lost = true
      return false
    })

  const release = (owner: string, entry: Held): Effect.Effect<void> =>
    lock.withPermits(1)(Effect.gen(function*() {
      entry.count -= 1
      if (entry.count > 0) return
      if (held.get(owner) === entry) held.delete(owner)
      if (entry.renewal !== undefined) yield* Fiber.interrupt(entry.renewal)
      if (entry.lost) return
      yield* backend.deleteClaim(owner, token).pipe(
        Effect.catch((error) =>
          Effect.logWarning(
            `journal: could not release the claim on owner ${
              UntrustedText.shown(owner)
            }; it stays until this journal claims it again or it expires (never while this process lives, for a claimant on this host): ${error.message}`
          )
        )
      )
    }))

  const claim = (
    owner: string,
    claimOptions?: JournalClaim.ClaimOptions
  ): Effect.Effect<JournalClaim.Claim, OwnerInUse | JournalError, Scope.Scope> =>
    Effect.gen(function*() {
      const ttl = Duration.toMillis(Duration.fromInputUnsafe(claimOptions?.ttl ?? defaultTtl))
      if (!(ttl > 0) || !Number.isFinite(ttl)) {
        return yield* new JournalError({ reason: "Invalid", detail: "a claim's ttl is a finite, positive duration" })
      }
      const problem = UntrustedText.textProblem(owner, maxKeyLength)
      if (problem !== undefined) {
        return yield* new JournalError({
          reason: "Invalid",
          detail: `an owner is 1 to ${maxKeyLength} characters of well-formed Unicode without control characters; ${
            typeof owner === "string" ? `"${UntrustedText.shown(owner)}"` : "this one"
          } ${problem}`
        })
      }
      const entry = yield* Effect.acquireRelease(
        lock.withPermits(1)(Effect.gen(function*() {
          const current = held.get(owner)
          if (current !== undefined && !current.lost && (yield* stillHeld(current, ttl))) {
            current.count += 1
            return current
          }
          const entry: Held = { claim: yield* acquire(owner, ttl), count: 1, lost: false, renewal: undefined }
          // Detached: the claim is shared by every Scope that claims it here, and ends with the last one. Forked
          // from an uninterruptible acquire, it must be interruptible, or the release would wait for it forever:
          // Effect 4 forks it interruptible by default, and `interruptible` keeps that explicit.
          entry.renewal = yield* Effect.forkDetach(Effect.interruptible(renew(owner, entry, ttl)))
          held.set(owner, entry)
          return entry
        })),
        (entry) => release(owner, entry)
      )
      return entry.claim
    })

  const holds = (owner: string): Effect.Effect<boolean> =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      const entry = held.get(owner)
      return entry !== undefined && !entry.lost && now < entry.claim.expiresAt
    })

  return { claim, holds, holder: backend.getClaim }
}

/** @internal */
export const claim = (
  options?: JournalClaim.ClaimOptions & { readonly owner?: string | undefined }
): Effect.Effect<JournalClaim.Claim, OwnerInUse | JournalError, Journal.Journal | Scope.Scope> =>
  Effect.gen(function*() {
    const journal = yield* JournalService
    return yield* journal.claim(options?.owner ?? (yield* Owner), options)
  })
