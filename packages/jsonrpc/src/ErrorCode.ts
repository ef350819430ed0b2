/**
 * JSON-RPC 2.0 error codes as named constants: the five standard codes, the reserved server range, and the codes
 * the Lifeline kernel answers with (LSP's request-cancelled and server-not-initialized, and one for shutting down).
 *
 * @since 0.1.0
 */

/**
 * Invalid JSON was received (the body could not be parsed). Answered with id `null`.
 *
 * @since 0.1.0
 * @category models
 */
export const ParseError = -32700 as const

/**
 * The JSON sent is not a valid Request object.
 *
 * @since 0.1.0
 * @category models
 */
export const InvalidRequest = -32600 as const

/**
 * The method does not exist or is not available.
 *
 * @since 0.1.0
 * @category models
 */
export const MethodNotFound = -32601 as const

/**
 * Invalid method parameter(s): the params did not decode with the method's Schema.
 *
 * @since 0.1.0
 * @category models
 */
export const InvalidParams = -32602 as const

/**
 * Internal JSON-RPC error: a handler defect.
 *
 * @since 0.1.0
 * @category models
 */
export const InternalError = -32603 as const

/**
 * Lower bound of the range reserved for implementation-defined server errors (-32099 ..= -32000).
 *
 * @since 0.1.0
 * @category models
 */
export const ServerErrorStart = -32099 as const

/**
 * Upper bound of the range reserved for implementation-defined server errors (-32099 ..= -32000).
 * Hermes uses -32000 for "Shutdown failed" (docs/protocol.md, `shutdown`).
 *
 * @since 0.1.0
 * @category models
 */
export const ServerErrorEnd = -32000 as const

/**
 * A request arrived before the handshake completed (LSP's `ServerNotInitialized`).
 *
 * @since 0.1.0
 * @category models
 */
export const ServerNotInitialized = -32002 as const

/**
 * A request arrived while the peer is shutting down. Chosen in the reserved server range, next to LSP's codes.
 *
 * @since 0.1.0
 * @category models
 */
export const ShuttingDown = -32003 as const

/**
 * The request was cancelled by `$/cancelRequest` (LSP's `RequestCancelled`).
 *
 * @since 0.1.0
 * @category models
 */
export const RequestCancelled = -32800 as const

/**
 * The request was valid, but the server could not serve it now (LSP's `RequestFailed`); `data` may say why and whether
 * a later request can succeed. The Hermes host answers it to a `ui/openWindow` over its bound of open windows.
 *
 * @since 0.1.0
 * @category models
 */
export const RequestFailed = -32803 as const

/**
 * Whether `code` lies in the range JSON-RPC 2.0 reserves for pre-defined errors (-32768 ..= -32000).
 *
 * @example
 * ```ts
 * import { ErrorCode } from "@lifeline/jsonrpc"
 * ErrorCode.isReserved(ErrorCode.MethodNotFound) // true
 * ErrorCode.isReserved(1) // false
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const isReserved = (code: number): boolean => code >= -32768 && code <= -32000

/**
 * Whether `code` lies in the implementation-defined server error range (-32099 ..= -32000).
 *
 * @since 0.1.0
 * @category models
 */
export const isServerError = (code: number): boolean => code >= ServerErrorStart && code <= ServerErrorEnd
