/**
 * How a protocol cancels a request on the wire, if it can: LSP's `$/cancelRequest`, MCP's `notifications/cancelled`,
 * or not at all. JSON-RPC 2.0 defines no cancellation, so a protocol has none unless it opts in.
 *
 * @since 0.1.0
 */
import type * as Message from "@lifeline/jsonrpc/Message"

/**
 * A cancellation notification's spelling: its method, how a request id goes into its params and comes back out, and
 * whether a cancelled request is still answered.
 *
 * @since 0.1.0
 * @category models
 */
export interface Spelling {
  readonly method: string
  /**
   * The params of the notification that cancels request `id`. `reason` says why in words (it timed out, its caller
   * was interrupted), for a protocol that carries one.
   */
  readonly encode: (id: Message.RequestId, reason: string) => Message.Params
  /** The id of the request to cancel, or `undefined` when the params name none. */
  readonly decode: (params: unknown) => Message.RequestId | undefined
  /**
   * Whether a request the other side cancelled is still answered, with -32800 `RequestCancelled`. Default true: LSP
   * wants an answer; MCP says the receiver of `notifications/cancelled` SHOULD NOT send one (false).
   */
  readonly answerCancelled?: boolean | undefined
}

/**
 * No cancellation on the wire: an abandoned call is only forgotten, and no inbound notification cancels anything.
 *
 * @since 0.1.0
 * @category models
 */
export interface None {
  readonly _tag: "None"
}

/**
 * A protocol's cancellation: a {@link Spelling}, or {@link none}.
 *
 * @since 0.1.0
 * @category models
 */
export type Cancellation = Spelling | None

/**
 * JSON-RPC 2.0 as it stands: nothing is sent when a call is abandoned, and `$/cancelRequest` is an ordinary
 * notification. The default of `Protocol.make`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const none: Cancellation = { _tag: "None" }

const idOf = (u: unknown): Message.RequestId | undefined =>
  typeof u === "string" || (typeof u === "number" && Number.isSafeInteger(u)) ? u : undefined

/**
 * LSP: `$/cancelRequest` with `{ id }`; the cancelled request is still answered, with -32800 `RequestCancelled`.
 *
 * @example
 * ```ts
 * import { Cancellation, Protocol } from "@lifeline/kernel"
 *
 * const lspClient = Protocol.make({ calls: [], cancellation: Cancellation.lsp })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const lsp: Spelling = {
  method: "$/cancelRequest",
  encode: (id) => ({ id }),
  decode: (params) => idOf((params as { readonly id?: unknown } | null | undefined)?.id)
}

/**
 * MCP: `notifications/cancelled` with `{ requestId, reason? }`; the cancelled request gets no answer ("Receivers of a
 * cancellation notification SHOULD NOT send a response for the cancelled request", 2025-06-18, Utilities /
 * Cancellation).
 *
 * @since 0.1.0
 * @category constructors
 */
export const mcp: Spelling = {
  method: "notifications/cancelled",
  encode: (requestId, reason) => ({ requestId, reason }),
  decode: (params) => idOf((params as { readonly requestId?: unknown } | null | undefined)?.requestId),
  answerCancelled: false
}

/**
 * @since 0.1.0
 * @category combinators
 */
export const isNone = (self: Cancellation): self is None => "_tag" in self && self._tag === "None"

/**
 * The spelling to use, or `undefined` for none.
 *
 * @since 0.1.0
 * @category combinators
 */
export const spelling = (self: Cancellation): Spelling | undefined => isNone(self) ? undefined : self
