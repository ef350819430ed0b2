/** @internal */
import * as UntrustedText from "@lifeline/kernel/UntrustedText"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Journal from "../Journal.js"
import type * as JournalBackend from "../JournalBackend.js"
import type * as JournalEntry from "../JournalEntry.js"
import { maxKeyLength, unfinishedStatuses } from "../JournalEntry.js"
import { JournalError } from "../JournalError.js"
import { makeClaims } from "./journalClaim.js"
import { checkSize, encodeJson, errorToJson, messageOf, toEntries, toEntry } from "./journalJson.js"
import { makeMemoryBackend } from "./journalMemory.js"

const finished: ReadonlyArray<JournalEntry.Status> = ["Completed", "Failed"]

/** @internal */
export const defaultOperationTimeout: Duration.Input = "5 seconds"

/** @internal */
export const defaultMaxPayloadBytes = 1024 * 1024

// A key, a kind or an owner: 1 to 255 characters of well-formed Unicode without control characters. Checked before
// anything is written, so that every backend refuses the same values the same way (a lone surrogate would be stored
// as U+FFFD and collide with another key; PostgreSQL refuses a NUL as a storage error).
// `begin` and `claim` refuse control characters in what they create; the steps on an existing entry accept them, so
// that an entry stored before this check (or by another program) can still be ended, resumed and read. A lone
// surrogate is refused everywhere: the storage would match it with another key.
const invalidText = (
  what: "key" | "kind" | "owner",
  value: string,
  existing = false
): JournalError | undefined => {
  const problem = UntrustedText.textProblem(value, maxKeyLength, existing)
  return problem === undefined ? undefined : new JournalError({
    reason: "Invalid",
    ...(what === "key" && typeof value === "string" ? { key: UntrustedText.shown(value) } : {}),
    detail: `a ${what} is 1 to ${maxKeyLength} characters of well-formed Unicode without control characters; ${
      what === "key" ? "this one" : `${what} "${typeof value === "string" ? UntrustedText.shown(value) : "?"}"`
    } ${problem}`
  })
}

const checkText = (what: "key" | "kind" | "owner", value: string): Effect.Effect<void, JournalError> => {
  const error = invalidText(what, value)
  return error === undefined ? Effect.void : Effect.fail(error)
}

// A key that names an existing entry.
const checkKey = (key: string): Effect.Effect<void, JournalError> => {
  const error = invalidText("key", key, true)
  return error === undefined ? Effect.void : Effect.fail(error)
}

// Every step of the backend, bounded: it runs in a fiber of its own, and the caller waits for it at most `timeout`
// (on the Clock). A driver whose query cannot be interrupted (it waits for a frozen server's answer, and its
// interruption waits too) then holds neither the caller nor a shutdown: the step fails with a Storage error that
// says it timed out, and the fiber is interrupted in the background. The wait is as interruptible as the caller.
const bounded =
  (timeout: Duration.Duration) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | JournalError, R> =>
    Effect.uninterruptibleMask((restore) =>
      // Started at once: a step that needs no I/O (the memory backend) ends before the timeout is even set.
      Effect.flatMap(Effect.forkDetach(effect, { startImmediately: true }), (fiber) => {
        // Already ended (no I/O): its outcome as it is, without setting up a timeout nobody needs.
        const done = fiber.pollUnsafe()
        if (done !== undefined) return done
        return restore(
          Fiber.await(fiber).pipe(
            Effect.timeoutOrElse({
              duration: timeout,
              orElse: () =>
                Effect.fail(
                  new JournalError({
                    reason: "Storage",
                    detail: `the storage did not answer within ${
                      Duration.toMillis(timeout)
                    } ms (operationTimeout): the step timed out, and whether it took effect is unknown`
                  })
                )
            })
          )
        ).pipe(
          Effect.onExit((exit) =>
            Exit.isSuccess(exit) ? Effect.void : Effect.asVoid(Effect.forkDetach(Fiber.interrupt(fiber)))
          ),
          Effect.flatMap((exit): Effect.Effect<A, E | JournalError> => exit)
        )
      })
    )

const boundedBackend = (backend: JournalBackend.Backend, timeout: Duration.Duration): JournalBackend.Backend => {
  const bound = bounded(timeout)
  return {
    insert: (row) => bound(backend.insert(row)),
    update: (key, where, patch) => bound(backend.update(key, where, patch)),
    get: (key) => bound(backend.get(key)),
    list: (statuses, owner) => bound(backend.list(statuses, owner)),
    remove: (statuses, finishedBefore) => bound(backend.remove(statuses, finishedBefore)),
    batch: (effect) => bound(backend.batch(effect)),
    insertClaim: (claim) => bound(backend.insertClaim(claim)),
    replaceClaim: (claim, where) => bound(backend.replaceClaim(claim, where)),
    getClaim: (owner) => bound(backend.getClaim(owner)),
    deleteClaim: (owner, holder) => bound(backend.deleteClaim(owner, holder))
  }
}

const notFound = (key: string) => new JournalError({ reason: "NotFound", key, detail: "no entry has this key" })

const conflict = (key: string, detail: string) => new JournalError({ reason: "Conflict", key, detail })

/** @internal */
export const make = (
  storage: JournalBackend.Backend,
  options?: Journal.MakeOptions
): Effect.Effect<Journal.Journal.Service> =>
  Effect.sync(() => {
    const timeout = Duration.fromInputUnsafe(options?.operationTimeout ?? defaultOperationTimeout)
    const backend = boundedBackend(storage, timeout)
    const maxBytes = options?.maxPayloadBytes ?? defaultMaxPayloadBytes
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
        yield* checkText("key", operation.key)
        yield* checkText("kind", operation.kind)
        yield* checkText("owner", operation.owner)
        const payload = yield* Effect.fromResult(encodeJson(operation.payload, "payload", operation.key, maxBytes))
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
      Effect.andThen(
        checkKey(key),
        Effect.flatMap(Effect.fromResult(encodeJson(result, "result", key, maxBytes)), (json) =>
          end(key, "Completed", { result: result === undefined ? null : json, error: null, reason: null }, undefined)
            .pipe(Effect.tap(() => Effect.sync(() => claims.delete(key)))))
      )

    const fail = (key: string, error: unknown, guard?: JournalEntry.Guard) =>
      Effect.suspend(() => {
        const invalid = invalidText("key", key, true)
        if (invalid !== undefined) {
          return Effect.fail(invalid)
        }
        const json = errorToJson(error)
        const text = checkSize(JSON.stringify(json) ?? "null", "error", key, maxBytes)
        if (Result.isFailure(text)) {
          return Effect.fail(text.failure)
        }
        const reason = messageOf(json)
        // The reason is a short text: the error's message, cut to 1000 characters.
        const patch = {
          error: text.success,
          reason: reason !== null && reason.length > 1000 ? `${reason.slice(0, 1000)}…` : reason
        }
        if (guard === undefined) {
          return end(key, "Failed", patch, undefined).pipe(Effect.tap(() =>
            Effect.sync(() => claims.delete(key))
          ))
        }
        // A recovery decision: refused while a fiber here runs the operation.
        if (claims.has(key)) return claimed(key)
        claim(key)
        return end(key, "Failed", patch, guard).pipe(Effect.ensuring(Effect.sync(() => unclaim(key))))
      })

    const resume = (key: string, guard?: JournalEntry.Guard) =>
      Effect.suspend(() => {
        const invalid = invalidText("key", key, true)
        if (invalid !== undefined) return Effect.fail(invalid)
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
            // A key that is not valid cannot have an entry: skipped, as an unknown one.
            Array.from(new Set(keys)).filter((key) => UntrustedText.textProblem(key, maxKeyLength, true) === undefined),
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
      unfinished: (owner) =>
        Effect.andThen(
          Effect.suspend(() => {
            const error = owner === undefined ? undefined : invalidText("owner", owner, true)
            return error === undefined ? Effect.void : Effect.fail(error)
          }),
          Effect.flatMap(backend.list(unfinishedStatuses, owner), toEntries)
        ),
      get: (key) => Effect.andThen(checkKey(key), get(key)),
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
