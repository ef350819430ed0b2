/**
 * A protocol seen from one side: the methods this side serves and the methods it calls, and how the protocol cancels
 * a request on the wire, if it can. The other side's view is the same protocol flipped.
 *
 * @since 0.1.0
 */
import * as Cancellation from "./Cancellation.js"
import type * as Method from "./Method.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Protocol<out Serves extends Method.Any, out Calls extends Method.Any> {
  readonly serves: ReadonlyArray<Serves>
  readonly calls: ReadonlyArray<Calls>
  /**
   * What a peer sends when it abandons a call (it timed out, or its caller was interrupted) and which inbound
   * notification cancels a request it serves. `Cancellation.none` unless the protocol opts in.
   */
  readonly cancellation: Cancellation.Cancellation
}

/**
 * @since 0.1.0
 * @category models
 */
export type Any = Protocol<Method.Any, Method.Any>

/**
 * Groups methods into what this side serves and what it calls.
 *
 * `cancellation` defaults to `Cancellation.none`: JSON-RPC 2.0 defines no cancellation, so a peer that speaks plain
 * JSON-RPC must never receive `$/cancelRequest`. A protocol that has one says so: `Cancellation.lsp` (LSP's
 * `$/cancelRequest`), `Cancellation.mcp` (MCP's `notifications/cancelled`), or a `Cancellation.Spelling` of its own.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Cancellation, Method, Protocol } from "@lifeline/kernel"
 *
 * const Ping = Method.request("ping", { params: Schema.Struct({}), result: Schema.Literal("pong") })
 * const Log = Method.notification("log", { params: Schema.Struct({ text: Schema.String }) })
 * const server = Protocol.make({ serves: [Ping], calls: [Log] })
 * const client = Protocol.flip(server) // serves Log, calls Ping
 *
 * // An LSP-style protocol: abandoned calls send `$/cancelRequest`, and an inbound one interrupts the handler.
 * const lspServer = Protocol.make({ serves: [Ping], cancellation: Cancellation.lsp })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <
  const Serves extends ReadonlyArray<Method.Any> = readonly [],
  const Calls extends ReadonlyArray<Method.Any> = readonly []
>(groups: {
  readonly serves?: Serves | undefined
  readonly calls?: Calls | undefined
  readonly cancellation?: Cancellation.Cancellation | undefined
}): Protocol<Serves[number], Calls[number]> => ({
  serves: groups.serves ?? [],
  calls: groups.calls ?? [],
  cancellation: groups.cancellation ?? Cancellation.none
})

/**
 * The same protocol seen from the other side. Cancellation is the protocol's, so both sides keep it.
 *
 * @since 0.1.0
 * @category combinators
 */
export const flip = <S extends Method.Any, C extends Method.Any>(self: Protocol<S, C>): Protocol<C, S> => ({
  serves: self.calls,
  calls: self.serves,
  cancellation: self.cancellation
})
