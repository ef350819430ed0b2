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
import type * as Effect from "effect/Effect"
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
}

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

/** A method's call codecs, built once per method definition rather than on every call. */
const callCodecs = new WeakMap<Method.AnyRequest, CallCodecs>()

/** @internal */
export const codecsOf = (method: Method.AnyRequest): CallCodecs => {
  let codecs = callCodecs.get(method)
  if (codecs === undefined) {
    codecs = {
      encodeParams: safely(Schema.encodeUnknownResult(method.params)),
      decodeResult: safely(Schema.decodeUnknownResult(method.result)),
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
    encode = safely(Schema.encodeUnknownResult(method.params))
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
  const decode = safely(Schema.decodeUnknownResult(schema))
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
  encode: safely(Schema.encodeUnknownResult(method.result)),
  toError: (error) => toRpcError(method, error)
})

/** @internal */
export const compileNotification = (
  method: Method.AnyNotification,
  handler: Peer.NotificationHandler<any, any>
): Notify => ({
  decode: paramsDecoder(method.params),
  handle: handler as Notify["handle"]
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
