/** @internal */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as JournalEntry from "../JournalEntry.js"
import { JournalError } from "../JournalError.js"
import type * as JournalContract from "../testing/JournalContract.js"
import { check, refused, same } from "./journalContractChecks.js"
import type { Test, WithJournal } from "./journalContractClaims.js"

const op = (key: string, fields?: Partial<JournalEntry.Operation>): JournalEntry.Operation => ({
  kind: "llm",
  key,
  payload: { key },
  owner: "host",
  ...fields
})

// The JSON of `{ text }` is `text` plus 11 bytes.
const payloadOf = (bytes: number) => ({ text: "x".repeat(bytes - 11) })

const mebibyte = 1024 * 1024

// What every backend must refuse the same way, before anything is written: keys, kinds and owners that a storage
// would change (a lone surrogate becomes U+FFFD, so two keys collide) or refuse (PostgreSQL refuses a NUL), values
// that would not read back as given, and values too large to read back.
/** @internal */
export const limitCases = (withJournal: WithJournal, test: Test): ReadonlyArray<JournalContract.Case> => [
  test(
    "keys, kinds and owners that are not well-formed Unicode or hold a control character are Invalid",
    withJournal((journal) =>
      Effect.gen(function*() {
        for (const key of ["x/\ud83d", "x/\ude00", "x/\u0000", "x/\n", "x/\u001b[2J", "x/\u0085"]) {
          yield* refused(journal.begin(op(key)), "Invalid", `the key ${JSON.stringify(key)}`)
        }
        // A lone surrogate cannot name a stored entry either (the storage would match another key); a control
        // character can (an entry stored before the check), so those steps answer as for any unknown key.
        yield* journal.begin(op("x/\ufffd"))
        for (const key of ["x/\ud83d", "x/\ude00"]) {
          yield* refused(journal.get(key), "Invalid", `get of the key ${JSON.stringify(key)}`)
          yield* refused(journal.complete(key), "Invalid", `complete of the key ${JSON.stringify(key)}`)
          yield* refused(journal.fail(key, "no"), "Invalid", `fail of the key ${JSON.stringify(key)}`)
          yield* refused(journal.resume(key), "Invalid", `resume of the key ${JSON.stringify(key)}`)
        }
        yield* same(
          yield* journal.markNeedsRecovery(["x/\ud83d"], "cut off"),
          [],
          "markNeedsRecovery of a lone surrogate"
        )
        yield* refused(journal.complete("x/\n"), "NotFound", "complete of an unknown key with a line break")
        for (const text of ["\ud83d", "a\u0000b", "a\nb", "k".repeat(256), ""]) {
          yield* refused(journal.begin(op(`kind-${text.length}`, { kind: text })), "Invalid", "a bad kind")
          yield* refused(journal.begin(op(`owner-${text.length}`, { owner: text })), "Invalid", "a bad owner")
          yield* refused(journal.claim(text), "Invalid", "claiming a bad owner")
        }
        yield* refused(journal.unfinished("\ud83d"), "Invalid", "unfinished of a lone surrogate owner")
        yield* same((yield* journal.unfinished()).map((entry) => entry.key), ["x/\ufffd"], "nothing else was stored")
        // A surrogate pair is well-formed: stored and read back as it is, distinct from its neighbours.
        yield* journal.begin(op("x/\ud83d\ude00", { kind: "k\u00e9", owner: "h\u00f4te-\ud83d\ude00" }))
        yield* journal.begin(op("x/\ud83d\ude01"))
        const stored = yield* journal.get("x/\ud83d\ude00")
        yield* same(
          Option.map(stored, (entry) => [entry.key, entry.kind, entry.owner]),
          Option.some(["x/\ud83d\ude00", "k\u00e9", "h\u00f4te-\ud83d\ude00"]),
          "a key with a surrogate pair"
        )
        yield* same((yield* journal.unfinished()).length, 3, "distinct entries")
      })
    )
  ),
  test(
    "a payload, result or error over maxPayloadBytes (1 MiB by default) is Invalid and nothing is written",
    withJournal((journal) =>
      Effect.gen(function*() {
        yield* refused(journal.begin(op("big", { payload: payloadOf(mebibyte + 1) })), "Invalid", "a payload too big")
        yield* same(Option.isNone(yield* journal.get("big")), true, "nothing stored for a payload too big")
        // Multi-byte characters count as their UTF-8 bytes.
        yield* refused(
          journal.begin(op("wide", { payload: { text: "\u00e9".repeat(mebibyte / 2) } })),
          "Invalid",
          "a payload of 2-byte characters over 1 MiB"
        )
        const fits = yield* journal.begin(op("fits", { payload: payloadOf(mebibyte) }))
        yield* check(fits.started, "a payload of exactly 1 MiB is stored")
        yield* refused(journal.complete("fits", payloadOf(mebibyte + 1)), "Invalid", "a result too big")
        yield* refused(journal.fail("fits", { message: "x".repeat(mebibyte + 1) }), "Invalid", "an error too big")
        const entry = yield* journal.get("fits")
        yield* same(
          Option.map(entry, (stored) => [stored.status, (stored.payload as { text: string }).text.length]),
          Option.some(["InFlight", mebibyte - 11]),
          "the entry is unchanged, and every listing still reads"
        )
        yield* same((yield* journal.unfinished("host")).length, 1, "unfinished lists it")
      })
    )
  ),
  test(
    "values that would not read back as given are Invalid: functions, symbols, NaN, Infinity",
    withJournal((journal) =>
      Effect.gen(function*() {
        const bad: ReadonlyArray<readonly [string, unknown]> = [
          ["a function", () => 1],
          ["a nested function", { run: () => 1 }],
          ["a symbol in a list", [Symbol("s")]],
          ["NaN", { n: Number.NaN }],
          ["Infinity", [Number.POSITIVE_INFINITY]],
          ["-Infinity", Number.NEGATIVE_INFINITY]
        ]
        for (const [what, payload] of bad) {
          yield* refused(journal.begin(op("bad", { payload })), "Invalid", `a payload with ${what}`)
        }
        yield* same(Option.isNone(yield* journal.get("bad")), true, "nothing stored")
        yield* journal.begin(op("ok"))
        yield* refused(journal.complete("ok", { n: Number.NaN }), "Invalid", "a result with NaN")
        yield* journal.complete("ok", { n: 0, s: null })
      })
    )
  ),
  test(
    "an error's message shows a bounded, escaped key: a 5 MB key does not make a 5 MB message",
    withJournal((journal) =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(journal.begin(op(`\u001b[2J${"k".repeat(5_000_000)}`)))
        const error = Exit.isFailure(exit) ? Option.getOrUndefined(Exit.findErrorOption(exit)) : undefined
        yield* check(error instanceof JournalError && error.reason === "Invalid", "a 5 MB key is Invalid", error)
        const message = (error as JournalError).message
        yield* check(message.length < 2_000, "the message is bounded", message.length)
        yield* check(!message.includes("\u001b"), "the message has no escape character", message.slice(0, 200))
        yield* check(message.includes("5000004 characters"), "the message says how long the key was", message)
      })
    )
  )
]
