/**
 * A peer's Schema codecs as plain functions that never throw: how an inbound request or notification is decoded,
 * served and answered (`Serve`, `Notify`), and how an outbound call encodes its params and reads its answer
 * (`CallCodecs`). They are built once per method, not per message, and are steps of no Effect: a request whose params
 * do not decode is answered without a fiber, and a served one costs the fewest runtime steps.
 *
 * @internal
 */
import type * as Message from "@lifeline/jsonrpc/Message"
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import type * as Method from "../../Method.js"
import type * as Peer from "../../Peer.js"

/**
 * How an inbound request is served.
 *
 * @internal
 */
export interface Serve {
  readonly decode: (params: unknown) => Result.Result<unknown, string>
  readonly handle: (params: unknown, context: Peer.HandlerContext) => Effect.Effect<unknown, unknown, any>
  readonly encode: (result: unknown) => Result.Result<unknown, string>
  /** A handler's typed failure as the error to answer with. */
  readonly toError: (error: unknown) => RpcError.RpcError
}

/** @internal */
export interface Notify {
  readonly decode: (params: unknown) => Result.Result<unknown, string>
  readonly handle: (params: unknown) => Effect.Effect<void, unknown, any>
  /** What a failed handler's cause becomes (logged), made once per method rather than per notification. */
  readonly failed: (cause: Cause.Cause<unknown>) => Effect.Effect<void>
}

/** @internal */
export const notificationFailed = (method: string) => (cause: Cause.Cause<unknown>): Effect.Effect<void> =>
  Cause.hasInterruptsOnly(cause) ? Effect.void : Effect.logWarning(`notification ${method} failed`, cause)

/** @internal */
export interface CallCodecs {
  readonly encodeParams: (u: unknown) => Result.Result<unknown, string>
  readonly decodeResult: (u: unknown) => Result.Result<unknown, string>
  readonly decodeError: ((u: unknown) => Result.Result<unknown, string>) | undefined
}

/** @internal */
export const messageOf = (u: unknown): string => u instanceof Error ? u.message : String(u)

/**
 * A Schema codec as a function that never throws. Method codecs are synchronous (no services, no async transforms),
 * and `Schema.decodeUnknownResult` and its kin throw when decoding dies instead of failing (an input whose getter
 * throws, for one): both come back as a parse failure, so a peer's bad input is -32602, not a defect.
 */
const safely = <A>(
  codec: (u: unknown) => Result.Result<A, Schema.SchemaError>
) =>
(u: unknown): Result.Result<A, string> => {
  try {
    return Result.mapError(codec(u), (error) => error.message)
  } catch (cause) {
    return Result.fail(messageOf(cause))
  }
}

const isNever = (schema: Schema.Top): boolean => SchemaAST.isNever(schema.ast)

/** No refinement, transformation, optionality or default: the node parses as its bare type. */
const isBare = (ast: SchemaAST.AST): boolean =>
  ast.checks === undefined && ast.encoding === undefined && ast.context === undefined

const primitiveTests: Readonly<Record<string, (u: unknown) => boolean>> = {
  String: (u) => typeof u === "string",
  Number: (u) => typeof u === "number",
  Boolean: (u) => typeof u === "boolean"
}

/**
 * The common params shape, a `Struct` of required `String`, `Number` and `Boolean` fields with nothing else on it,
 * decoded and encoded alike as a check of each field and a fresh object with those fields in order, as Schema's own
 * parser makes it; `undefined` for any other shape. The check is done here, without the Schema machinery (a parser, an
 * `Exit` per field, a `Result`); a value it does not accept goes to the Schema codec, whose answer (and message) stands.
 *
 * @internal
 */
export const plainStruct = (ast: SchemaAST.AST): ((u: unknown) => object | undefined) | undefined => {
  if (!SchemaAST.isObjects(ast) || !isBare(ast) || ast.indexSignatures.length > 0) return undefined
  if (ast.encodingChecks !== undefined) return undefined
  const names: Array<string> = []
  const tests: Array<(u: unknown) => boolean> = []
  for (const property of ast.propertySignatures) {
    const test = primitiveTests[property.type._tag]
    if (typeof property.name !== "string" || property.name === "__proto__") return undefined
    if (test === undefined || !isBare(property.type)) return undefined
    names.push(property.name)
    tests.push(test)
  }
  if (names.length === 0) return undefined
  return (u) => {
    if (typeof u !== "object" || u === null || Array.isArray(u)) return undefined
    const out: Record<string, unknown> = {}
    for (let i = 0; i < names.length; i++) {
      const value = (u as Record<string, unknown>)[names[i]]
      if (!tests[i](value)) return undefined
      out[names[i]] = value
    }
    return out
  }
}

/**
 * A Schema codec as a function that never throws, with `plainStruct`'s shortcut where the Schema allows it.
 *
 * @internal
 */
export const codec = (
  schema: Schema.Top,
  make: (schema: any) => (u: unknown) => Result.Result<unknown, Schema.SchemaError>
): (u: unknown) => Result.Result<unknown, string> => {
  const slow = safely(make(schema))
  const fast = plainStruct(schema.ast)
  if (fast === undefined) return slow
  return (u) => {
    try {
      const out = fast(u)
      if (out !== undefined) return Result.succeed(out)
    } catch {
      // A getter that throws: the Schema codec reports it.
    }
    return slow(u)
  }
}

/** A method's call codecs, built once per method definition rather than on every call. */
const callCodecs = new WeakMap<Method.AnyRequest, CallCodecs>()

/** @internal */
export const codecsOf = (method: Method.AnyRequest): CallCodecs => {
  let codecs = callCodecs.get(method)
  if (codecs === undefined) {
    codecs = {
      encodeParams: codec(method.params, Schema.encodeUnknownResult),
      decodeResult: codec(method.result, Schema.decodeUnknownResult),
      decodeError: isNever(method.error) ? undefined : safely(Schema.decodeUnknownResult(method.error))
    }
    callCodecs.set(method, codecs)
  }
  return codecs
}

/** A notification's params encoder, built once per method definition. */
const notificationEncoders = new WeakMap<Method.AnyNotification, (u: unknown) => Result.Result<unknown, string>>()

/** @internal */
export const notificationEncoderOf = (method: Method.AnyNotification) => {
  let encode = notificationEncoders.get(method)
  if (encode === undefined) {
    encode = codec(method.params, Schema.encodeUnknownResult)
    notificationEncoders.set(method, encode)
  }
  return encode
}

/**
 * An answer as the caller sees it: decoded with the method's Schemas when the call is typed.
 *
 * @internal
 */
export const answerExit = (
  method: string,
  codecs: CallCodecs | undefined,
  response: Message.Response
): Exit.Exit<unknown, unknown> => {
  if ("result" in response) {
    if (codecs === undefined) return Exit.succeed(response.result)
    const decoded = codecs.decodeResult(response.result)
    return Result.isSuccess(decoded) ? Exit.succeed(decoded.success) : Exit.fail(
      RpcError.RpcError.internalError(`${method}: the result does not match its Schema: ${decoded.failure}`)
    )
  }
  const error = RpcError.fromWire(response.error)
  if (codecs?.decodeError === undefined) return Exit.fail(error)
  const typed = codecs.decodeError(error.data)
  return Exit.fail(Result.isSuccess(typed) ? typed.success : error)
}

/**
 * A handler's typed failure as a wire error: an `RpcError` passes through; any other value is encoded with the
 * method's error Schema into `data`, with `code` and `message` read from the value when it has them.
 */
const toRpcError = (method: Method.AnyRequest, error: unknown): RpcError.RpcError => {
  if (error instanceof RpcError.RpcError) return error
  const fields = (typeof error === "object" && error !== null ? error : {}) as Record<string, unknown>
  const code = typeof fields.code === "number" && Number.isSafeInteger(fields.code) ? fields.code : -32000
  const message = typeof fields.message === "string" && fields.message !== ""
    ? fields.message
    : typeof fields._tag === "string"
    ? fields._tag
    : "Request failed"
  const data = safely(Schema.encodeUnknownResult(method.error))(error)
  return RpcError.make(code, message, Result.isSuccess(data) ? data.success : undefined)
}

/** What absent params are offered to a params Schema as, in this order of preference. */
const absentCandidates: ReadonlyArray<() => unknown> = [() => undefined, () => null, () => ({}), () => []]

/**
 * A method's params decoder. Absent params (left out, or `null` on the wire, which the classifier reads as left out)
 * are offered to the Schema as `undefined` when it accepts that (`Method.NoParams`, an optional Schema), else as the
 * first of `null`, `{}`, `[]` it accepts (an empty `Struct`, a `Struct` of optional fields, an empty `Tuple`), else as
 * `undefined`, whose refusal is the -32602 answer. Which one is found once, on the first request without params: a
 * request with params pays nothing for it. A fresh `{}` or `[]` each time, since a handler may keep what it gets.
 */
const paramsDecoder = (schema: Method.Codec<any>): (params: unknown) => Result.Result<unknown, string> => {
  const decode = codec(schema, Schema.decodeUnknownResult)
  let absent: (() => unknown) | undefined
  return (params) => {
    if (params !== undefined) return decode(params)
    absent ??= absentCandidates.find((candidate) => Result.isSuccess(decode(candidate()))) ?? absentCandidates[0]
    return decode(absent())
  }
}

/** @internal */
export const compileRequest = (method: Method.AnyRequest, handler: Peer.RequestHandler<any, any>): Serve => ({
  decode: paramsDecoder(method.params),
  handle: handler as Serve["handle"],
  encode: codec(method.result, Schema.encodeUnknownResult),
  toError: (error) => toRpcError(method, error)
})

/** @internal */
export const compileNotification = (
  method: Method.AnyNotification,
  handler: Peer.NotificationHandler<any, any>
): Notify => ({
  decode: paramsDecoder(method.params),
  handle: handler as Notify["handle"],
  failed: notificationFailed(method.name)
})

/**
 * `onUnknownRequest` as a `Serve`: params and results pass as they are, and its failures are `RpcError`s.
 *
 * @internal
 */
export const compileFallback = (
  method: string,
  fallback: NonNullable<Peer.Options<any, any, any>["onUnknownRequest"]>
): Serve => ({
  decode: Result.succeed,
  handle: (params, context) => fallback(method, params, context),
  encode: Result.succeed,
  toError: (error) => error as RpcError.RpcError
})
