/** @internal */
import * as UntrustedText from "@lifeline/kernel/UntrustedText"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type * as JournalBackend from "../JournalBackend.js"
import type * as JournalEntry from "../JournalEntry.js"
import { JournalError } from "../JournalError.js"

// JSON.stringify drops a function or a symbol and writes NaN and Infinity as null: a value that would not read back
// as it was given is refused instead.
const strict = (_field: string, item: unknown): unknown => {
  if (typeof item === "function" || typeof item === "symbol") throw new TypeError(`a ${typeof item} is not JSON`)
  if (typeof item === "number" && !Number.isFinite(item)) throw new TypeError(`${item} is not JSON`)
  return item
}

/**
 * The JSON text of a payload or a result, refused (`Invalid`) when it is not JSON (a function, a symbol, a `bigint`,
 * `NaN`, `Infinity`, a cycle) or when it is over `maxBytes` in UTF-8.
 * @internal
 */
export const encodeJson = (
  value: unknown,
  what: string,
  key: string,
  maxBytes: number
): Result.Result<string, JournalError> => {
  let text: string
  try {
    // `undefined` (no result) is stored as JSON null, and read back as no result.
    text = JSON.stringify(value, strict) ?? "null"
  } catch (cause) {
    return Result.fail(
      new JournalError({
        reason: "Invalid",
        key,
        detail: `the ${what} is not JSON${cause instanceof Error ? ` (${cause.message})` : ""}`,
        cause
      })
    )
  }
  return checkSize(text, what, key, maxBytes)
}

/** @internal */
export const checkSize = (
  text: string,
  what: string,
  key: string,
  maxBytes: number
): Result.Result<string, JournalError> =>
  UntrustedText.fitsUtf8(text, maxBytes)
    ? Result.succeed(text)
    : Result.fail(
      new JournalError({
        reason: "Invalid",
        key,
        detail: `the ${what} is larger than ${maxBytes} bytes as JSON (maxPayloadBytes)`
      })
    )

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

/** @internal */
export const messageOf = (json: unknown): string | null => {
  if (typeof json === "string") return json
  if (typeof json === "object" && json !== null) {
    const { _tag, message, name } = json as { _tag?: unknown; message?: unknown; name?: unknown }
    if (typeof message === "string") return message
    if (typeof _tag === "string") return _tag
    if (typeof name === "string") return name
  }
  return json === null || json === undefined ? null : String(json)
}

/** @internal */
export const toEntry = (row: JournalBackend.Row): Effect.Effect<JournalEntry.Entry, JournalError> =>
  Effect.try({
    try: () => {
      const entry: {
        -readonly [K in keyof JournalEntry.Entry]: JournalEntry.Entry[K]
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

/** @internal */
export const toEntries = (rows: ReadonlyArray<JournalBackend.Row>) => Effect.forEach(rows, toEntry)
