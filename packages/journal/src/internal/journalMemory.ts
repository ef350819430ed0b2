/** @internal */
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import type * as JournalBackend from "../JournalBackend.js"
import type * as JournalClaim from "../JournalClaim.js"

const byStart = (a: JournalBackend.Row, b: JournalBackend.Row) =>
  a.startedAt - b.startedAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)

const matches = (row: JournalBackend.Row, where: JournalBackend.Where) =>
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
export const makeMemoryBackend: Effect.Effect<JournalBackend.Backend> = Effect.map(
  Effect.zip(
    Ref.make(HashMap.empty<string, JournalBackend.Row>()),
    Ref.make(HashMap.empty<string, JournalClaim.Claim>())
  ),
  ([rows, claims]): JournalBackend.Backend => ({
    insert: (row) =>
      Effect.map(insertIfAbsent(rows, row.key, row), ([stored, inserted]) => ({ row: stored, inserted })),
    update: (key, where, patch) =>
      Ref.modify(rows, (map) => {
        const current = HashMap.get(map, key)
        if (Option.isNone(current) || !matches(current.value, where)) return [Option.none(), map]
        const next: JournalBackend.Row = { ...current.value, ...patch, key }
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
