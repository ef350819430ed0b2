/**
 * A protocol seen from one side: the methods this side serves and the methods it calls. The other side's view is
 * the same protocol flipped.
 *
 * @since 0.1.0
 */
import type * as Method from "./Method.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Protocol<out Serves extends Method.Any, out Calls extends Method.Any> {
  readonly serves: ReadonlyArray<Serves>
  readonly calls: ReadonlyArray<Calls>
}

/**
 * @since 0.1.0
 * @category models
 */
export type Any = Protocol<Method.Any, Method.Any>

/**
 * Groups methods into what this side serves and what it calls.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Method, Protocol } from "@lifeline/kernel"
 *
 * const Ping = Method.request("ping", { params: Schema.Struct({}), result: Schema.Literal("pong") })
 * const Log = Method.notification("log", { params: Schema.Struct({ text: Schema.String }) })
 * const server = Protocol.make({ serves: [Ping], calls: [Log] })
 * const client = Protocol.flip(server) // serves Log, calls Ping
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
}): Protocol<Serves[number], Calls[number]> => ({ serves: groups.serves ?? [], calls: groups.calls ?? [] })

/**
 * The same protocol seen from the other side.
 *
 * @since 0.1.0
 * @category combinators
 */
export const flip = <S extends Method.Any, C extends Method.Any>(self: Protocol<S, C>): Protocol<C, S> => ({
  serves: self.calls,
  calls: self.serves
})
