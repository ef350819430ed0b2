/** @internal */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as Journal from "../Journal.js"
import type * as JournalBackend from "../JournalBackend.js"
import type * as JournalEntry from "../JournalEntry.js"
import { maxKeyLength, unfinishedStatuses } from "../JournalEntry.js"
import { JournalError } from "../JournalError.js"
import { makeClaims } from "./journalClaim.js"
import { encodeJson, errorToJson, messageOf, toEntries, toEntry } from "./journalJson.js"
import { makeMemoryBackend } from "./journalMemory.js"

const finished: ReadonlyArray<JournalEntry.Status> = ["Completed", "Failed"]

const checkKey = (key: string): Effect.Effect<void, JournalError> =>
  key.length === 0 || key.length > maxKeyLength
    ? Effect.fail(new JournalError({ reason: "Invalid", key, detail: `a key has 1 to ${maxKeyLength} characters` }))
    : Effect.void

const notFound = (key: string) => new JournalError({ reason: "NotFound", key, detail: "no entry has this key" })

const conflict = (key: string, detail: string) => new JournalError({ reason: "Conflict", key, detail })

/** @internal */
export const make = (
  backend: JournalBackend.Backend,
  options?: Journal.MakeOptions
): Effect.Effect<Journal.Journal.Service> =>
  Effect.sync(() => {
    // Keys a fiber of this process runs: begun or resumed here, and not yet ended. The journal cannot tell a live
    // in-flight operation from one a crash left behind; this map can, and it dies with the process, exactly when its
    // operations stop being live. A step that may take ownership claims the key *before* it writes (checking and
    // claiming is synchronous, so atomic), and gives the claim back if it did not take it: a recovery that looks
    // between the write and the claim would otherwise resume a live operation. Values count overlapping claims.
    const claims = new Map<string, number>()
    const claim = (key: string) => claims.set(key, (claims.get(key) ?? 0) + 1)
    const unclaim = (key: string) => {
      const count = claims.get(key) ?? 0
      if (count <= 1) claims.delete(key)
      else claims.set(key, count - 1)
    }
    const claimed = (key: string) => conflict(key, "a fiber of this process runs this operation")

    const get = (key: string) =>
      Effect.flatMap(
        backend.get(key),
        Option.match({ onNone: () => Effect.succeedNone, onSome: (row) => Effect.asSome(toEntry(row)) })
      )

    const insertOrRetry = (row: JournalBackend.Row): Effect.Effect<JournalEntry.Began, JournalError> =>
      Effect.gen(function*() {
        // A retry of a Failed key races other retries on `attempts`; the loser sees the winner's InFlight row.
        for (let tries = 0;; tries++) {
          const { inserted, row: stored } = yield* backend.insert(row)
          if (inserted) return { entry: yield* toEntry(stored), started: true }
          if (stored.status !== "Failed" || tries > 3) return { entry: yield* toEntry(stored), started: false }
          const { key: _, ...fields } = row
          const retried = yield* backend.update(row.key, { statuses: ["Failed"], attempts: stored.attempts }, {
            ...fields,
            attempts: stored.attempts + 1
          })
          if (Option.isSome(retried)) return { entry: yield* toEntry(retried.value), started: true }
        }
      })

    const begin = (operation: JournalEntry.Operation): Effect.Effect<JournalEntry.Began, JournalError> =>
      Effect.gen(function*() {
        yield* checkKey(operation.key)
        const payload = yield* Effect.fromResult(encodeJson(operation.payload, "payload", operation.key))
        const now = yield* Clock.currentTimeMillis
        claim(operation.key)
        return yield* insertOrRetry({
          key: operation.key,
          kind: operation.kind,
          owner: operation.owner,
          status: "InFlight",
          attempts: 1,
          payload,
          result: null,
          error: null,
          reason: null,
          startedAt: now,
          updatedAt: now,
          finishedAt: null
        }).pipe(
          Effect.onExit((exit) =>
            Exit.isSuccess(exit) && exit.value.started ? Effect.void : Effect.sync(() => unclaim(operation.key))
          )
        )
      })

    // Ends an unfinished entry. Ending it again the same way returns it unchanged; ending it the other way is a
    // conflict, since the journal would otherwise say both.
    const end = (
      key: string,
      status: "Completed" | "Failed",
      patch: JournalBackend.Patch,
      guard: JournalEntry.Guard | undefined
    ) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const updated = yield* backend.update(key, { statuses: unfinishedStatuses, attempts: guard?.attempts }, {
          ...patch,
          status,
          updatedAt: now,
          finishedAt: now
        })
        if (Option.isSome(updated)) return yield* toEntry(updated.value)
        const current = yield* backend.get(key)
        if (Option.isNone(current)) return yield* notFound(key)
        if (guard === undefined && current.value.status === status) return yield* toEntry(current.value)
        return yield* conflict(
          key,
          guard === undefined || finished.includes(current.value.status)
            ? `the operation is already ${current.value.status}`
            : `the operation moved on (attempt ${current.value.attempts}, expected ${guard.attempts})`
        )
      })

    const complete = (key: string, result?: unknown) =>
      Effect.flatMap(Effect.fromResult(encodeJson(result, "result", key)), (json) =>
        end(key, "Completed", { result: result === undefined ? null : json, error: null, reason: null }, undefined)
          .pipe(Effect.tap(() =>
            Effect.sync(() => claims.delete(key))
          )))

    const fail = (key: string, error: unknown, guard?: JournalEntry.Guard) =>
      Effect.suspend(() => {
        const json = errorToJson(error)
        const patch = { error: JSON.stringify(json) ?? null, reason: messageOf(json) }
        if (guard === undefined) {
          return end(key, "Failed", patch, undefined).pipe(Effect.tap(() => Effect.sync(() => claims.delete(key))))
        }
        // A recovery decision: refused while a fiber here runs the operation.
        if (claims.has(key)) return claimed(key)
        claim(key)
        return end(key, "Failed", patch, guard).pipe(Effect.ensuring(Effect.sync(() => unclaim(key))))
      })

    const resume = (key: string, guard?: JournalEntry.Guard) =>
      Effect.suspend(() => {
        if (claims.has(key)) return claimed(key)
        claim(key)
        return Effect.gen(function*() {
          const current = yield* backend.get(key)
          if (Option.isNone(current)) return yield* notFound(key)
          const attempts = guard?.attempts ?? current.value.attempts
          const now = yield* Clock.currentTimeMillis
          const updated = yield* backend.update(key, { statuses: unfinishedStatuses, attempts }, {
            status: "InFlight",
            attempts: attempts + 1,
            updatedAt: now
          })
          if (Option.isNone(updated)) return yield* conflict(key, "the operation ended or another recovery took it")
          return yield* toEntry(updated.value)
        }).pipe(Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : Effect.sync(() => unclaim(key))))
      })

    const markNeedsRecovery = (keys: Iterable<string>, reason: string) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const changed = yield* backend.batch(
          Effect.forEach(
            Array.from(new Set(keys)),
            (key) =>
              backend.update(key, { statuses: ["InFlight"] }, { status: "NeedsRecovery", reason, updatedAt: now })
          )
        )
        return yield* toEntries(changed.flatMap(Option.toArray))
      })

    return {
      begin,
      complete,
      fail,
      resume,
      markNeedsRecovery,
      release: (key) => Effect.sync(() => void claims.delete(key)),
      running: Effect.sync(() => Array.from(claims.keys())),
      unfinished: (owner) => Effect.flatMap(backend.list(unfinishedStatuses, owner), toEntries),
      get,
      prune: (finishedBefore) => backend.remove(finished, finishedBefore),
      batch: backend.batch,
      ...makeClaims(backend, options)
    }
  })

/** @internal */
export const makeMemory: Effect.Effect<Journal.Journal.Service> = Effect.flatMap(
  makeMemoryBackend,
  (backend) => make(backend)
)
