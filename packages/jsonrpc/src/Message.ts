/**
 * JSON-RPC 2.0 messages as they appear on the wire: their Schemas, a fast classifier that sorts any parsed JSON value
 * into request / notification / response / invalid, and the body encoder. Pure data: no IO.
 *
 * @since 0.1.0
 */
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type { ParseOptions } from "effect/SchemaAST"
import * as SchemaTransformation from "effect/SchemaTransformation"
import * as bodyLimits from "./internal/bodyLimits.js"
import * as RpcError from "./RpcError.js"

/**
 * A request id: a string or an integer. Floats are refused (JSON-RPC 2.0: numbers SHOULD NOT have fractional parts,
 * and a float id cannot be matched reliably). `null` is refused for requests; it appears only in error responses.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RequestId = Schema.Union([Schema.String, Schema.Int])

/**
 * @since 0.1.0
 * @category models
 */
export type RequestId = string | number

/**
 * Parameters are a structured value: an array (by position) or an object (by name).
 *
 * @since 0.1.0
 * @category schemas
 */
export const Params = Schema.Union([Schema.Array(Schema.Unknown), Schema.Record(Schema.String, Schema.Unknown)])

/**
 * @since 0.1.0
 * @category models
 */
export type Params = ReadonlyArray<unknown> | { readonly [key: string]: unknown }

const envelope = { jsonrpc: Schema.Literal("2.0") }

/**
 * The `params` member of a request or a notification. Liberal in what it accepts: other implementations send
 * `"params": null` for "no params", so `null` (and `undefined`) decode as a missing key. Strict in what it sends: a
 * missing key encodes as a missing key, never as `null`.
 */
const optionalParams = Schema.optional(Schema.NullOr(Params)).pipe(
  Schema.decodeTo(
    Schema.optionalKey(Params),
    SchemaTransformation.transformOptional({
      decode: (params) => Option.filter(params, Predicate.isNotNullish),
      encode: (params) => params
    })
  )
)

/**
 * @since 0.1.0
 * @category schemas
 */
export const ErrorObject = Schema.Struct({
  code: Schema.Int,
  message: Schema.String,
  data: Schema.optional(Schema.Unknown)
})

/**
 * @since 0.1.0
 * @category schemas
 */
export const Request = Schema.Struct({
  ...envelope,
  id: RequestId,
  method: Schema.String,
  params: optionalParams
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Request {
  readonly jsonrpc: "2.0"
  readonly id: RequestId
  readonly method: string
  /** Never `null`: `"params": null` on the wire is read as a missing key. */
  readonly params?: Params
}

/**
 * @since 0.1.0
 * @category schemas
 */
export const Notification = Schema.Struct({ ...envelope, method: Schema.String, params: optionalParams })

/**
 * @since 0.1.0
 * @category models
 */
export interface Notification {
  readonly jsonrpc: "2.0"
  readonly method: string
  /** Never `null`: `"params": null` on the wire is read as a missing key. */
  readonly params?: Params
}

/**
 * @since 0.1.0
 * @category schemas
 */
export const Success = Schema.Struct({ ...envelope, id: RequestId, result: Schema.Unknown })

/**
 * @since 0.1.0
 * @category models
 */
export interface Success {
  readonly jsonrpc: "2.0"
  readonly id: RequestId
  readonly result: unknown
}

/**
 * @since 0.1.0
 * @category schemas
 */
export const Failure = Schema.Struct({ ...envelope, id: Schema.NullOr(RequestId), error: ErrorObject })

/**
 * @since 0.1.0
 * @category models
 */
export interface Failure {
  readonly jsonrpc: "2.0"
  readonly id: RequestId | null
  readonly error: RpcError.ErrorObject
}

/**
 * @since 0.1.0
 * @category models
 */
export type Response = Success | Failure

/**
 * @since 0.1.0
 * @category models
 */
export type Message = Request | Notification | Response

/**
 * Any JSON-RPC 2.0 message. A request also satisfies the notification shape, so `Request` comes first; decode with
 * `onExcessProperty: "error"` (as `decodeMessage` does), or excess members are dropped silently: a request with a
 * float `id` would read as a notification.
 * A missing `result` never passes: in Effect 4 a required key must be present even when its schema is
 * `Schema.Unknown` (a `MissingKey` issue), which is what `exact: true` had to ask for in Effect 3.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Message = Schema.Union([Request, Notification, Success, Failure])

const decodeUnion = Schema.decodeUnknownResult(Message, { onExcessProperty: "error" })

/**
 * Decodes one message with the Schemas, exactly: no excess properties, no missing `result`. `"params": null` in a
 * request or a notification decodes as a missing key. The classifier below is the fast path the peer uses; the two
 * agree (property-tested).
 *
 * Valid JSON such as `{"jsonrpc":{"toString":null}}` is refused, not thrown on: the Union picks its candidates by
 * looking the `jsonrpc` literal up in a `Map` (`getCandidateIndex` in effect's `SchemaAST.ts`), with no string
 * conversion.
 *
 * @since 0.1.0
 * @category schemas
 */
export const decodeMessage = (
  u: unknown,
  overrideOptions?: ParseOptions
): Result.Result<typeof Message.Type, Schema.SchemaError> => decodeUnion(u, overrideOptions)

/**
 * What a single parsed JSON value turned out to be.
 *
 * - `Request`, `Notification`, `Response`: well-formed messages.
 * - `Invalid`: not a valid message. `error` is the error response to send, with `id` recovered when it could be.
 *   When `respond` is false the value looked like a response (no `method`, has `result` or `error`): it is logged and
 *   counted but never answered, since answering a broken response could start an endless exchange of errors.
 *
 * @since 0.1.0
 * @category models
 */
export type Classified =
  | { readonly _tag: "Request"; readonly message: Request }
  | { readonly _tag: "Notification"; readonly message: Notification }
  | { readonly _tag: "Response"; readonly message: Response }
  | {
    readonly _tag: "Invalid"
    readonly id: RequestId | null
    readonly error: RpcError.RpcError
    readonly respond: boolean
  }

/**
 * What one frame's body turned out to be: one classified value, or a batch (a JSON array, JSON-RPC 2.0 section 6)
 * classified element by element. An empty array is a single `Invalid` (-32600).
 *
 * @since 0.1.0
 * @category models
 */
export type Incoming =
  | { readonly _tag: "Single"; readonly item: Classified }
  | { readonly _tag: "Batch"; readonly items: ReadonlyArray<Classified> }

const isRequestId = (u: unknown): u is RequestId =>
  typeof u === "string" || (typeof u === "number" && Number.isSafeInteger(u))

const isPlainObject = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const invalid = (id: RequestId | null, detail: string, respond = true): Classified => ({
  _tag: "Invalid",
  id,
  error: RpcError.RpcError.invalidRequest(detail),
  respond
})

const allowedRequestKeys = new Set(["jsonrpc", "id", "method", "params"])
const allowedResponseKeys = new Set(["jsonrpc", "id", "result", "error"])

const firstExcessKey = (value: Record<string, unknown>, allowed: ReadonlySet<string>): string | undefined => {
  for (const key in value) {
    if (!allowed.has(key)) return key
  }
  return undefined
}

const classifyError = (u: unknown): RpcError.ErrorObject | undefined => {
  if (!isPlainObject(u)) return undefined
  if (typeof u.code !== "number" || !Number.isSafeInteger(u.code) || typeof u.message !== "string") return undefined
  for (const key in u) {
    if (key !== "code" && key !== "message" && key !== "data") return undefined
  }
  return u as unknown as RpcError.ErrorObject
}

/**
 * Sorts one parsed JSON value (not a batch) into request / notification / response / invalid. Hand-written rather
 * than a Schema decode because it runs once per message on the hot path; it accepts exactly what `decodeMessage`
 * accepts (property-tested), and unlike a Schema it recovers the id of an invalid request so the error can be
 * correlated.
 *
 * A well-formed message is returned as it is, without a copy, except a request or notification with
 * `"params": null`: that is read as one without params (JSON-RPC 2.0 allows params to be omitted, and other
 * implementations send `null` for that), so its message is a copy without the member.
 *
 * @example
 * ```ts
 * import { Message } from "@lifeline/jsonrpc"
 * Message.classify({ jsonrpc: "2.0", id: 1, method: "ping" })._tag // "Request"
 * Message.classify({ jsonrpc: "2.0", id: 1, result: null })._tag // "Response"
 * Message.classify(42)._tag // "Invalid"
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const classify = (value: unknown): Classified => {
  if (!isPlainObject(value)) {
    return invalid(null, Array.isArray(value) ? "A batch may not be nested" : "A message must be a JSON object")
  }
  const hasId = "id" in value
  const id = value.id
  const recoveredId = isRequestId(id) ? id : null
  if ("method" in value) {
    if (value.jsonrpc !== "2.0") return invalid(recoveredId, "The jsonrpc member must be exactly \"2.0\"")
    if (typeof value.method !== "string") return invalid(recoveredId, "The method member must be a string")
    // `null` (what other implementations send for "no params") reads as absent. Only a message that has it is copied,
    // below: the others are returned as they are.
    let nullParams = false
    if ("params" in value) {
      const params = value.params
      if (params == null) nullParams = true
      else if (typeof params !== "object") {
        return invalid(recoveredId, "The params member must be an array or an object")
      }
    }
    const excess = firstExcessKey(value, allowedRequestKeys)
    if (excess !== undefined) return invalid(recoveredId, `Unexpected member: ${excess}`)
    if (!hasId) {
      return {
        _tag: "Notification",
        message: nullParams ? { jsonrpc: "2.0", method: value.method } : value as unknown as Notification
      }
    }
    if (!isRequestId(id)) return invalid(null, "The id member must be a string or an integer")
    return {
      _tag: "Request",
      message: nullParams ? { jsonrpc: "2.0", id, method: value.method } : value as unknown as Request
    }
  }
  const hasResult = "result" in value
  const hasError = "error" in value
  if (!hasResult && !hasError) return invalid(recoveredId, "Missing required member: method")
  // From here on the value is response-shaped: problems are reported but never answered.
  if (value.jsonrpc !== "2.0") return invalid(recoveredId, "The jsonrpc member must be exactly \"2.0\"", false)
  if (hasResult && hasError) return invalid(recoveredId, "A response has either result or error, not both", false)
  const excess = firstExcessKey(value, allowedResponseKeys)
  if (excess !== undefined) return invalid(recoveredId, `Unexpected member: ${excess}`, false)
  if (hasResult) {
    if (!isRequestId(id)) return invalid(null, "The id of a success response must be a string or an integer", false)
    return { _tag: "Response", message: value as unknown as Success }
  }
  if (id !== null && !isRequestId(id)) {
    return invalid(null, "The id of an error response must be a string, an integer or null", false)
  }
  if (classifyError(value.error) === undefined) {
    return invalid(recoveredId, "The error member must be { code: integer, message: string, data? }", false)
  }
  return { _tag: "Response", message: value as unknown as Failure }
}

const emptyBatch: Incoming = { _tag: "Single", item: invalid(null, "An empty batch is not a valid request") }

/**
 * Classifies a parsed JSON value, which may be a batch.
 *
 * @since 0.1.0
 * @category constructors
 */
export const classifyValue = (value: unknown): Incoming => {
  if (!Array.isArray(value)) return { _tag: "Single", item: classify(value) }
  if (value.length === 0) return emptyBatch
  return { _tag: "Batch", items: value.map(classify) }
}

const textDecoder = new TextDecoder("utf-8", { fatal: true })
const textEncoder = new TextEncoder()

/**
 * Bounds on what one frame's body may hold, checked without recursion: a hostile peer cannot make the parser build a
 * batch of 600,000 messages or a value nested millions of levels deep (both cost seconds and gigabytes inside
 * `JSON.parse`, with no way to stop it). A body over 256 KiB is checked before `JSON.parse` sees it, a smaller one
 * after (its parse is cheap whatever it holds: ~30 ms at worst). A body over a bound is one `Invalid` (-32600, id
 * `null`): one answer, as JSON-RPC 2.0 answers an invalid batch, and nothing of it is served.
 *
 * @since 0.1.0
 * @category models
 */
export interface Limits {
  /** Most messages in one batch. Default 1,000. */
  readonly maxBatchItems: number
  /** Largest body of a batch, in bytes (a single message is bounded by the framing's `maxBodyBytes` only). Default 16 MiB. */
  readonly maxBatchBytes: number
  /**
   * Deepest nesting of arrays and objects in one body, the message object and a batch's array included: a request
   * whose params are an object is 2 deep, in a batch 3. Default 128, deep enough for any real params and shallow
   * enough for code that walks a value recursively (`JSON.stringify`, a recursive Schema).
   */
  readonly maxDepth: number
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const defaultLimits: Limits = { maxBatchItems: 1000, maxBatchBytes: 16 * 1024 * 1024, maxDepth: 128 }

/**
 * Every bound given, the others at their default.
 *
 * @since 0.1.0
 * @category constructors
 */
export const resolveLimits = (limits: Partial<Limits> | undefined): Limits =>
  limits === undefined ? defaultLimits : {
    maxBatchItems: limits.maxBatchItems ?? defaultLimits.maxBatchItems,
    maxBatchBytes: limits.maxBatchBytes ?? defaultLimits.maxBatchBytes,
    maxDepth: limits.maxDepth ?? defaultLimits.maxDepth
  }

const overLimit = (detail: string): Incoming => ({ _tag: "Single", item: invalid(null, detail) })

/**
 * Parses one frame body (UTF-8 JSON) and classifies it. Invalid UTF-8 or invalid JSON is a -32700 parse error with
 * id `null`, answered as the specification says. A body over one of `limits` is one -32600 with id `null`, and
 * nothing of it is classified (see `Limits`); above 256 KiB that is found before `JSON.parse` runs.
 *
 * @since 0.1.0
 * @category constructors
 */
export const parse = (body: Uint8Array, limits: Limits = defaultLimits): Incoming => {
  const tooLarge = bodyLimits.beforeDecode(body, limits)
  if (tooLarge !== undefined) return overLimit(tooLarge)
  let value: unknown
  try {
    const text = textDecoder.decode(body)
    const early = bodyLimits.beforeParse(text, body.length, limits)
    if (early !== undefined) return overLimit(early)
    value = JSON.parse(text)
    const late = bodyLimits.afterParse(value, text, body.length, limits)
    if (late !== undefined) return overLimit(late)
  } catch (cause) {
    return {
      _tag: "Single",
      item: {
        _tag: "Invalid",
        id: null,
        error: RpcError.RpcError.parseError(cause instanceof Error ? cause.message : String(cause)),
        respond: true
      }
    }
  }
  return classifyValue(value)
}

/** A copy of a message without its `params` member, for one whose `params` is `null`. */
const withoutParams = (message: Message): Message => {
  const { params: _, ...rest } = message as Message & { readonly params?: unknown }
  return rest as Message
}

const hasNullParams = (message: Message): boolean => (message as { readonly params?: unknown }).params === null

/**
 * What goes on the wire: the message itself, or a copy without `"params": null` when a hand-built message has it
 * (`undefined` members are dropped by JSON itself). One property read per message, no copy in the normal case.
 */
const forWire = (message: Message | ReadonlyArray<Message>): Message | ReadonlyArray<Message> => {
  if (!Array.isArray(message)) {
    return hasNullParams(message as Message) ? withoutParams(message as Message) : message
  }
  const batch = message as ReadonlyArray<Message>
  for (let i = 0; i < batch.length; i++) {
    if (hasNullParams(batch[i])) return batch.map((item) => hasNullParams(item) ? withoutParams(item) : item)
  }
  return batch
}

/**
 * Serialises a message (or a batch) to its UTF-8 JSON body. Strict in what it sends: `params` is never `null` or
 * `undefined` on the wire, it is left out (JSON drops every `undefined` member). A value JSON cannot represent (a
 * BigInt, a cycle) is reported as a `Failure` so a handler bug can be answered with -32603 instead of killing the
 * writer.
 *
 * @since 0.1.0
 * @category constructors
 */
export const encode = (message: Message | ReadonlyArray<Message>): Result.Result<Uint8Array, RpcError.RpcError> => {
  try {
    return Result.succeed(textEncoder.encode(JSON.stringify(forWire(message))))
  } catch (cause) {
    return Result.fail(
      RpcError.RpcError.internalError(`Could not serialise: ${cause instanceof Error ? cause.message : String(cause)}`)
    )
  }
}

/**
 * Serialises a message to a JSON string (the framing encoders take strings to avoid a second copy). Like `encode`, it
 * never puts `"params": null` on the wire.
 *
 * @since 0.1.0
 * @category constructors
 */
export const stringify = (message: Message | ReadonlyArray<Message>): Result.Result<string, RpcError.RpcError> => {
  try {
    return Result.succeed(JSON.stringify(forWire(message)))
  } catch (cause) {
    return Result.fail(
      RpcError.RpcError.internalError(`Could not serialise: ${cause instanceof Error ? cause.message : String(cause)}`)
    )
  }
}

/**
 * A request. Params given as `null` or `undefined` are left out: JSON-RPC 2.0 says params MAY be omitted, and a
 * receiver that is strict about their type refuses `null` (-32600).
 *
 * @since 0.1.0
 * @category constructors
 */
export const request = (id: RequestId, method: string, params?: Params | null | undefined): Request =>
  params == null ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params }

/**
 * A notification. Params given as `null` or `undefined` are left out, as in `request`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const notification = (method: string, params?: Params | null | undefined): Notification =>
  params == null ? { jsonrpc: "2.0", method } : { jsonrpc: "2.0", method, params }

/**
 * @since 0.1.0
 * @category constructors
 */
export const success = (id: RequestId, result: unknown): Success => ({
  jsonrpc: "2.0",
  id,
  result: result === undefined ? null : result
})

/**
 * @since 0.1.0
 * @category constructors
 */
export const failure = (id: RequestId | null, error: RpcError.RpcError | RpcError.ErrorObject): Failure => ({
  jsonrpc: "2.0",
  id,
  error: error instanceof RpcError.RpcError ? error.toWire() : error
})

/**
 * The answer owed to an invalid message, or `undefined` when it must not be answered.
 *
 * @since 0.1.0
 * @category constructors
 */
export const answerTo = (item: Classified): Failure | undefined =>
  item._tag === "Invalid" && item.respond ? failure(item.id, item.error) : undefined
