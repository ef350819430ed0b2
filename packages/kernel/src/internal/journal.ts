/** @internal */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Ref from "effect/Ref"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import type * as Journal from "../Journal.js"
import {
  defaultClaimTtl,
  Journal as JournalTag,
  JournalError,
  maxKeyLength,
  Owner,
  OwnerInUse,
  unfinishedStatuses
} from "../Journal.js"

const finished: ReadonlyArray<Journal.Status> = ["Completed", "Failed"]

// ---------------------------------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------------------------------

const encodeJson = (value: unknown, what: string, key: string): Result.Result<string, JournalError> => {
  try {
    // `undefined` (no result) is stored as JSON null, and read back as no result.
    return Result.succeed(JSON.stringify(value) ?? "null")
  } catch (cause) {
    return Result.fail(new JournalError({ reason: "Invalid", key, detail: `the ${what} is not JSON`, cause }))
  }
}

const decodeJson = (text: string, what: string, key: string): unknown => {
  try {
    return JSON.parse(text)
  } catch (cause) {
    throw new JournalError({ reason: "Corrupt", key, detail: `the stored ${what} is not JSON`, cause })
  }
}

// Errors become plain objects: own fields, plus `_tag`, `name` and `message`, which tagged errors and `Error`s keep
// on their prototype or as getters. `stack` is left out: it is long, and says where, not what.
const plain = (error: object): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const [field, value] of Object.entries(error)) {
    if (field !== "stack") out[field] = value
  }
  const tagged = error as { readonly _tag?: unknown; readonly name?: unknown; readonly message?: unknown }
  if (typeof tagged._tag === "string") out._tag = tagged._tag
  else if (error instanceof Error) out.name = error.name
  if (typeof tagged.message === "string" && tagged.message !== "") out.message = tagged.message
  return out
}

/** @internal */
export const errorToJson = (error: unknown): unknown => {
  const value = typeof error === "object" && error !== null && !Array.isArray(error) ? plain(error) : error
  const seen = new WeakSet<object>()
  if (typeof error === "object" && error !== null) seen.add(error)
  try {
    const text = JSON.stringify(value, (_field, item: unknown) => {
      if (typeof item === "bigint") return item.toString()
      if (item instanceof Error) return plain(item)
      if (typeof item === "object" && item !== null) {
        if (seen.has(item)) return undefined
        seen.add(item)
      }
      return item
    })
    return text === undefined ? null : JSON.parse(text)
  } catch {
    return { message: String(error) }
  }
}

const messageOf = (json: unknown): string | null => {
  if (typeof json === "string") return json
  if (typeof json === "object" && json !== null) {
    const { _tag, message, name } = json as { _tag?: unknown; message?: unknown; name?: unknown }
    if (typeof message === "string") return message
    if (typeof _tag === "string") return _tag
    if (typeof name === "string") return name
  }
  return json === null || json === undefined ? null : String(json)
}

const toEntry = (row: Journal.Row): Effect.Effect<Journal.Entry, JournalError> =>
  Effect.try({
    try: () => {
      const entry: {
        -readonly [K in keyof Journal.Entry]: Journal.Entry[K]
      } = {
        key: row.key,
        kind: row.kind,
        owner: row.owner,
        status: row.status,
        attempts: row.attempts,
        payload: decodeJson(row.payload, "payload", row.key),
        startedAt: row.startedAt,
        updatedAt: row.updatedAt
      }
      if (row.result !== null) entry.result = decodeJson(row.result, "result", row.key)
      if (row.error !== null) entry.error = decodeJson(row.error, "error", row.key)
      if (row.reason !== null) entry.reason = row.reason
      if (row.finishedAt !== null) entry.finishedAt = row.finishedAt
      return entry
    },
    catch: (error) =>
      error instanceof JournalError
        ? error
        : new JournalError({ reason: "Corrupt", key: row.key, detail: "the stored entry cannot be read", cause: error })
  })

const toEntries = (rows: ReadonlyArray<Journal.Row>) => Effect.forEach(rows, toEntry)

// ---------------------------------------------------------------------------------------------------------------------
// The rules, once for every backend
// ---------------------------------------------------------------------------------------------------------------------

const checkKey = (key: string): Effect.Effect<void, JournalError> =>
  key.length === 0 || key.length > maxKeyLength
    ? Effect.fail(new JournalError({ reason: "Invalid", key, detail: `a key has 1 to ${maxKeyLength} characters` }))
    : Effect.void

const notFound = (key: string) => new JournalError({ reason: "NotFound", key, detail: "no entry has this key" })

const conflict = (key: string, detail: string) => new JournalError({ reason: "Conflict", key, detail })

const describeClaim = (claim: Journal.Claim): string =>
  `${claim.pid === undefined ? "journal" : `process ${claim.pid}`}${
    claim.host === undefined ? "" : ` on ${claim.host}`
  }`

const inUse = (claim: Journal.Claim) => {
  const { holder: _, ...fields } = claim
  return new OwnerInUse(fields)
}

interface Held {
  claim: Journal.Claim
  count: number
  lost: boolean
  renewal: Fiber.Fiber<void> | undefined
}

// Owner claims: one row per owner in the storage, held by one journal instance (its random token) and renewed by a
// fiber on the Clock. The rows decide between processes; `held` shares this journal's claims between its fibers.
const makeClaims = (backend: Journal.Backend, options: Journal.MakeOptions | undefined) => {
  const token = globalThis.crypto.randomUUID().replaceAll("-", "")
  const identity = options?.identity
  const held = new Map<string, Held>()
  const lock = Semaphore.makeUnsafe(1)

  const stamp = (owner: string, now: number, ttl: number): Journal.Claim => {
    const claim: { -readonly [K in keyof Journal.Claim]: Journal.Claim[K] } = {
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
  const livenessOf = (claim: Journal.Claim): Effect.Effect<"Alive" | "Dead" | "Unknown"> =>
    options?.liveness !== undefined && identity?.host !== undefined && claim.host === identity.host &&
      claim.pid !== undefined
      ? options.liveness(claim)
      : Effect.succeed("Unknown")

  const acquire = (owner: string, ttl: number): Effect.Effect<Journal.Claim, OwnerInUse | JournalError> =>
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
          continue
        }
        const liveness = yield* livenessOf(stored)
        const expired = stored.expiresAt <= now
        // A holder proven alive keeps its claim even past expiry: it is paused (stopped, swapped out), not gone.
        if (liveness === "Alive" || (liveness === "Unknown" && !expired) || tries >= 3) return yield* inUse(stored)
        if (yield* backend.replaceClaim(mine, { holder: stored.holder, expiresAt: stored.expiresAt })) {
          yield* Effect.logWarning(
            `journal: took over owner ${owner} from ${describeClaim(stored)}: ${
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
      for (;;) {
        yield* Effect.sleep(every)
        const renewed = yield* Effect.result(extend(entry, ttl))
        if (Result.isFailure(renewed)) {
          yield* Effect.logWarning(`journal: could not renew the claim on owner ${owner}`, renewed.failure)
          continue
        }
        if (renewed.success) continue
        entry.lost = true
        const taker = yield* Effect.option(backend.getClaim(owner))
        yield* Effect.logError(
          `journal: lost the claim on owner ${owner} after it expired${
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
          Effect.logWarning(`journal: could not release the claim on owner ${owner}; it expires by itself`, error)
        )
      )
    }))

  const claim = (
    owner: string,
    claimOptions?: Journal.ClaimOptions
  ): Effect.Effect<Journal.Claim, OwnerInUse | JournalError, Scope.Scope> =>
    Effect.gen(function*() {
      const ttl = Duration.toMillis(Duration.fromInputUnsafe(claimOptions?.ttl ?? defaultClaimTtl))
      if (!(ttl > 0) || !Number.isFinite(ttl)) {
        return yield* new JournalError({ reason: "Invalid", detail: "a claim's ttl is a finite, positive duration" })
      }
      if (owner.length === 0 || owner.length > maxKeyLength) {
        return yield* new JournalError({ reason: "Invalid", detail: `an owner has 1 to ${maxKeyLength} characters` })
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
export const make = (
  backend: Journal.Backend,
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

    const insertOrRetry = (row: Journal.Row): Effect.Effect<Journal.Began, JournalError> =>
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

    const begin = (operation: Journal.Operation): Effect.Effect<Journal.Began, JournalError> =>
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
    const end = (key: string, status: "Completed" | "Failed", patch: Journal.Patch, guard: Journal.Guard | undefined) =>
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

    const fail = (key: string, error: unknown, guard?: Journal.Guard) =>
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

    const resume = (key: string, guard?: Journal.Guard) =>
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

// ---------------------------------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------------------------------

const byStart = (a: Journal.Row, b: Journal.Row) =>
  a.startedAt - b.startedAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)

const matches = (row: Journal.Row, where: Journal.Where) =>
  where.statuses.includes(row.status) && (where.attempts === undefined || row.attempts === where.attempts)

/** Stores `value` under `key` unless something is there: what is stored afterwards, and whether it was `value`. */
const insertIfAbsent = <A>(
  ref: Ref.Ref<HashMap.HashMap<string, A>>,
  key: string,
  value: A
): Effect.Effect<readonly [A, boolean]> =>
  Ref.modify(ref, (map): readonly [readonly [A, boolean], HashMap.HashMap<string, A>] => {
    const existing = HashMap.get(map, key)
    return Option.isSome(existing) ? [[existing.value, false], map] : [[value, true], HashMap.set(map, key, value)]
  })

/** @internal */
export const makeMemoryBackend: Effect.Effect<Journal.Backend> = Effect.map(
  Effect.zip(Ref.make(HashMap.empty<string, Journal.Row>()), Ref.make(HashMap.empty<string, Journal.Claim>())),
  ([rows, claims]): Journal.Backend => ({
    insert: (row) =>
      Effect.map(insertIfAbsent(rows, row.key, row), ([stored, inserted]) => ({ row: stored, inserted })),
    update: (key, where, patch) =>
      Ref.modify(rows, (map) => {
        const current = HashMap.get(map, key)
        if (Option.isNone(current) || !matches(current.value, where)) return [Option.none(), map]
        const next: Journal.Row = { ...current.value, ...patch, key }
        return [Option.some(next), HashMap.set(map, key, next)]
      }),
    get: (key) => Effect.map(Ref.get(rows), HashMap.get(key)),
    list: (statuses, owner) =>
      Effect.map(Ref.get(rows), (map) =>
        Array.from(HashMap.values(map))
          .filter((row) => statuses.includes(row.status) && (owner === undefined || row.owner === owner))
          .sort(byStart)),
    remove: (statuses, finishedBefore) =>
      Ref.modify(rows, (map) => {
        const doomed = HashMap.filter(
          map,
          (row) => statuses.includes(row.status) && row.finishedAt !== null && row.finishedAt < finishedBefore
        )
        return [HashMap.size(doomed), HashMap.removeMany(map, HashMap.keys(doomed))]
      }),
    // Every step is already atomic on the Ref, and there is nothing to make durable.
    batch: (effect) => effect,
    insertClaim: (claim) =>
      Effect.map(insertIfAbsent(claims, claim.owner, claim), ([stored, inserted]) => ({ claim: stored, inserted })),
    replaceClaim: (claim, where) =>
      Ref.modify(claims, (map) => {
        const current = HashMap.get(map, claim.owner)
        const matches = Option.isSome(current) && current.value.holder === where.holder &&
          (where.expiresAt === undefined || current.value.expiresAt === where.expiresAt)
        return matches ? [true, HashMap.set(map, claim.owner, claim)] : [false, map]
      }),
    getClaim: (owner) => Effect.map(Ref.get(claims), HashMap.get(owner)),
    deleteClaim: (owner, holder) =>
      Ref.modify(claims, (map) =>
        Option.exists(HashMap.get(map, owner), (claim) => claim.holder === holder)
          ? [true, HashMap.remove(map, owner)]
          : [false, map])
  })
)

/** @internal */
export const makeMemory: Effect.Effect<Journal.Journal.Service> = Effect.flatMap(
  makeMemoryBackend,
  (backend) => make(backend)
)

/** @internal */
export const claim = (
  options?: Journal.ClaimOptions & { readonly owner?: string | undefined }
): Effect.Effect<Journal.Claim, OwnerInUse | JournalError, Journal.Journal | Scope.Scope> =>
  Effect.gen(function*() {
    const journal = yield* JournalTag
    return yield* journal.claim(options?.owner ?? (yield* Owner), options)
  })

// ---------------------------------------------------------------------------------------------------------------------
// track
// ---------------------------------------------------------------------------------------------------------------------

const failureOf = <E>(cause: Cause.Cause<E>): unknown =>
  Option.match(Cause.findErrorOption(cause), {
    onSome: errorToJson,
    onNone: () => {
      const defect = errorToJson(Cause.squash(cause))
      return { _tag: "Defect", message: messageOf(defect) ?? "a defect", defect }
    }
  })

// A shutdown error means the connection cut the operation off, not that the operation failed: like an interruption,
// its outcome is unknown. The entry stays InFlight for the shutdown recorder (NeedsRecovery under a drain timeout,
// Failed under fail-fast) or, without one, for Recovery at the next start.
const isCutOff = <E>(cause: Cause.Cause<E>): boolean =>
  Cause.hasInterruptsOnly(cause) ||
  Option.exists(Cause.findErrorOption(cause), (error) => Predicate.isTagged(error, "ShutdownError"))

/** @internal */
export const track = (
  kind: string,
  key: string,
  payload: unknown,
  options?: Journal.TrackOptions<any, any>
) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | JournalError, R | Journal.Journal> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const journal = yield* JournalTag
      const owner = yield* Owner
      const { entry, started } = yield* journal.begin({ kind, key, payload, owner })
      if (!started) {
        if (entry.status === "Completed" && options?.result !== undefined) {
          return yield* Schema.decodeUnknownEffect(options.result)(entry.result ?? null).pipe(
            Effect.mapError((cause) =>
              new JournalError({ reason: "Corrupt", key, detail: "the stored result does not match its schema", cause })
            )
          ) as Effect.Effect<A, JournalError>
        }
        return yield* conflict(
          key,
          entry.status === "Completed"
            ? "the operation is already completed"
            : `the operation is already ${entry.status} (running here, or awaiting recovery)`
        )
      }
      const exit = yield* Effect.exit(restore(effect))
      if (Exit.isSuccess(exit)) {
        const result = options?.result === undefined
          ? Effect.succeed(undefined)
          : Schema.encodeEffect(options.result)(exit.value).pipe(
            Effect.mapError((cause) =>
              new JournalError({ reason: "Invalid", key, detail: "the result does not match its schema", cause })
            )
          )
        yield* Effect.flatMap(result, (json) => journal.complete(key, json)).pipe(
          Effect.tapError(() => journal.release(key))
        )
        return exit.value
      }
      if (isCutOff(exit.cause)) {
        yield* journal.release(key)
      } else {
        yield* journal.fail(key, failureOf(exit.cause)).pipe(
          Effect.catch((error) =>
            Effect.andThen(
              journal.release(key),
              Effect.logWarning("journal: could not record the failure of an operation", error)
            )
          )
        )
      }
      return yield* exit
    })
  )
