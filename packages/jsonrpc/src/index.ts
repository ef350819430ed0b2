/**
 * @since 0.1.0
 */
export * as ErrorCode from "./ErrorCode.js"

/**
 * @since 0.1.0
 */
export * as Framing from "./Framing.js"

/**
 * @since 0.1.0
 */
export * as Message from "./Message.js"

/**
 * @since 0.1.0
 */
export * as RpcError from "./RpcError.js"
