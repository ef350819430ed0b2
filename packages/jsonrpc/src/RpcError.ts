/**
 * The one wire error type: the `error` member of a JSON-RPC 2.0 error response, `{ code, message, data? }`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as ErrorCode from "./ErrorCode.js"

/**
 * A JSON-RPC error as it travels on the wire. It is also an Effect error (yieldable, `_tag` "RpcError"), so a caller
 * receives a peer's error response as a typed failure and a handler can fail with one to answer with it.
 *
 * @example
 * ```ts
 * import { RpcError } from "@lifeline/jsonrpc"
 * const error = RpcError.RpcError.methodNotFound("editor/frobnicate")
 * error.code // -32601
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class RpcError extends Schema.TaggedError<RpcError>("@lifeline/jsonrpc/RpcError")("RpcError", {
  code: Schema.Int,
  message: Schema.String,
  data: Schema.optional(Schema.Unknown)
}) {
  /** -32700, answered with id `null`. */
  static parseError(detail?: unknown): RpcError {
    return make(ErrorCode.ParseError, "Parse error", detail)
  }
  /** -32600: the JSON is not a valid request object. */
  static invalidRequest(detail?: unknown): RpcError {
    return make(ErrorCode.InvalidRequest, "Invalid Request", detail)
  }
  /** -32601 */
  static methodNotFound(method: string): RpcError {
    return make(ErrorCode.MethodNotFound, `Method not found: ${method}`)
  }
  /** -32602, with the parse issue in `data`. */
  static invalidParams(detail?: unknown): RpcError {
    return make(ErrorCode.InvalidParams, "Invalid params", detail)
  }
  /** -32603: never carries a stack trace unless the caller puts one in `detail`. */
  static internalError(detail?: unknown): RpcError {
    return make(ErrorCode.InternalError, "Internal error", detail)
  }
  /** -32002: a request other than the handshake arrived before the peer was ready. */
  static serverNotInitialized(method: string): RpcError {
    return make(ErrorCode.ServerNotInitialized, `Server not initialized: ${method}`)
  }
  /** -32003: a request arrived while the peer is shutting down. */
  static shuttingDown(method: string): RpcError {
    return make(ErrorCode.ShuttingDown, `Shutting down: ${method}`)
  }
  /** -32800: the request was cancelled with `$/cancelRequest`. */
  static requestCancelled(): RpcError {
    return make(ErrorCode.RequestCancelled, "Request cancelled")
  }
  /** -32803: the request was valid, but could not be served now; `message` and `data` say why. */
  static requestFailed(message: string, data?: unknown): RpcError {
    return make(ErrorCode.RequestFailed, message, data)
  }

  /** The plain `{ code, message, data? }` object written to the wire. */
  toWire(): ErrorObject {
    return this.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, data: this.data }
  }
}

/**
 * The plain wire shape of an error.
 *
 * @since 0.1.0
 * @category models
 */
export interface ErrorObject {
  readonly code: number
  readonly message: string
  readonly data?: unknown
}

/**
 * Builds an `RpcError`; `data` is left out entirely when `undefined`, so it never reaches the wire as `null`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (code: number, message: string, data?: unknown): RpcError =>
  data === undefined ? new RpcError({ code, message }) : new RpcError({ code, message, data })

/**
 * Reads an error object received from the wire.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromWire = (error: ErrorObject): RpcError => make(error.code, error.message, error.data)
