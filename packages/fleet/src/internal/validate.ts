/**
 * What a session accepts from its callers: bounded session ids, keys and kinds, JSON payloads, and how a key already
 * in the journal is compared with a request that reuses it.
 *
 * @internal
 */
import * as Journal from "@lifeline/journal/Journal"
import * as UntrustedText from "@lifeline/kernel/UntrustedText"
import type * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"

const shown = (value: string) => JSON.stringify(UntrustedText.shown(value, 60))

/**
 * Why `value` is not a name the journal accepts (`UntrustedText.nameProblem`: 1 to `max` characters of well-formed
 * Unicode without control characters), with the value shown: checked here, before anything is stored, so that a bad
 * value is a typed error for its sender and never a message that a runner cannot run.
 */
export const textProblem = (value: unknown, max: number): string | undefined => {
  const problem = UntrustedText.nameProblem(value, max)
  if (problem === undefined || typeof value !== "string" || value.length === 0 || value.length > max) return problem
  return `${shown(value)} ${problem}`
}

const payloadProblem = (payload: Schema.Json): string | undefined => {
  let text: string | undefined
  try {
    text = JSON.stringify(payload)
  } catch (error) {
    return `is not JSON: ${String(error).slice(0, 200)}`
  }
  if (text === undefined) return "is not JSON"
  const bytes = Buffer.byteLength(text, "utf8")
  return bytes > Journal.defaultMaxPayloadBytes
    ? `has ${bytes} bytes of JSON, more than ${Journal.defaultMaxPayloadBytes}`
    : undefined
}

export type Invalid = {
  readonly field: "sessionId" | "key" | "kind" | "payload"
  readonly problem: string
}

export const sessionIdProblem = (sessionId: unknown, maxSessionIdLength: number): Invalid | undefined => {
  const problem = textProblem(sessionId, maxSessionIdLength)
  return problem === undefined ? undefined : { field: "sessionId", problem: `a session id ${problem}` }
}

export const operationProblem = (
  operation: { readonly key: unknown; readonly kind: unknown; readonly payload: Schema.Json },
  maxKeyLength: number
): Invalid | undefined => {
  const key = textProblem(operation.key, maxKeyLength)
  if (key !== undefined) return { field: "key", problem: `a key ${key}` }
  const kind = textProblem(operation.kind, maxKeyLength)
  if (kind !== undefined) return { field: "kind", problem: `a kind ${kind}` }
  const payload = payloadProblem(operation.payload)
  return payload === undefined ? undefined : { field: "payload", problem: `the payload ${payload}` }
}

/** Whether two JSON values are equal, whatever the order of their objects' keys (a JSONB column reorders them). */
export const jsonEquals = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a)) {
    const bs = b as ReadonlyArray<unknown>
    return a.length === bs.length && a.every((value, index) => jsonEquals(value, bs[index]))
  }
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined)
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined)
  return ka.length === kb.length &&
    ka.every((k) =>
      Object.hasOwn(b, k) && jsonEquals((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])
    )
}

/** JSON with the keys of every object sorted: equal for values that {@link jsonEquals} finds equal. */
const canonical = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`
  if (typeof value === "object" && value !== null) {
    const entries = Object.keys(value).filter((k) => (value as Record<string, unknown>)[k] !== undefined).sort()
    return `{${
      entries.map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(",")
    }}`
  }
  return JSON.stringify(value) ?? "null"
}

/**
 * The cluster's primary key of an operation: its key and a digest of its kind and payload, so that the same key sent
 * with another kind or payload is another message (which the session refuses as `KeyReused`), while a byte-identical
 * resend is the same message, with the same reply.
 */
export const primaryKey = (key: string, kind: string, payload: unknown): string =>
  `${key}#${Crypto.createHash("sha256").update(`${kind}\n${canonical(payload)}`).digest("base64url").slice(0, 22)}`
