/**
 * A protocol seen from one side: the methods this side serves and calls, and how it cancels a request on the wire, if
 * it can. The other side's view is the same protocol flipped.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import * as Cancellation from "./Cancellation.js"
import type * as Method from "./Method.js"
import type * as Peer from "./Peer.js"
import type * as PeerError from "./PeerError.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Protocol<out Serves extends Method.Any, out Calls extends Method.Any> {
  readonly serves: ReadonlyArray<Serves>
  readonly calls: ReadonlyArray<Calls>
  /** How an abandoned call is cancelled on the wire, both ways; `Cancellation.none` unless the protocol opts in. */
  readonly cancellation: Cancellation.Cancellation
  /** See {@link TraceContext}; absent means `"off"`. */
  readonly traceContext?: TraceContext | undefined
}

/**
 * Whether W3C trace context travels in `params._meta`: `"off"` (plain JSON-RPC, Hermes, LSP: their params have no
 * `_meta`) or `"propagate"` (MCP; docs/tracing.md).
 *
 * @since 0.3.0
 * @category models
 */
export type TraceContext = "off" | "propagate"

/**
 * @since 0.1.0
 * @category models
 */
export type Any = Protocol<Method.Any, Method.Any>

/**
 * Groups methods into what this side serves and what it calls. `cancellation` defaults to `Cancellation.none` (plain
 * JSON-RPC has none); `traceContext` to `"propagate"` when the cancellation is `Cancellation.mcp`, else `"off"`.
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
  readonly traceContext?: TraceContext | undefined
}): Protocol<Serves[number], Calls[number]> => ({
  serves: groups.serves ?? [],
  calls: groups.calls ?? [],
  cancellation: groups.cancellation ?? Cancellation.none,
  traceContext: groups.traceContext ?? (groups.cancellation === Cancellation.mcp ? "propagate" : "off")
})

/**
 * The same protocol seen from the other side. Cancellation and trace context are the protocol's, so both sides keep
 * them.
 *
 * @since 0.1.0
 * @category combinators
 */
export const flip = <S extends Method.Any, C extends Method.Any>(self: Protocol<S, C>): Protocol<C, S> => ({
  serves: self.calls,
  calls: self.serves,
  cancellation: self.cancellation,
  traceContext: self.traceContext
})

/**
 * The methods a protocol serves.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Method, Protocol } from "@lifeline/kernel"
 *
 * const Ping = Method.request("ping", { params: Schema.Struct({}), result: Schema.String })
 * const Server = Protocol.make({ serves: [Ping] })
 *
 * type Served = Protocol.Serves<typeof Server> // typeof Ping
 * const served: Served = Ping
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Serves<P extends Any> = P extends Protocol<infer S, infer _C> ? S : never

/**
 * The methods a protocol calls.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Method, Protocol } from "@lifeline/kernel"
 *
 * const Ping = Method.request("ping", { params: Schema.Struct({}), result: Schema.String })
 * const Client = Protocol.make({ calls: [Ping] })
 *
 * type Called = Protocol.Calls<typeof Client> // typeof Ping
 * const called: Called = Ping
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Calls<P extends Any> = P extends Protocol<infer _S, infer C> ? C : never

/**
 * One method of a {@link Client}: a request answers with its decoded result or fails with the method's typed error
 * or a `Peer.CallError`; a notification completes once it is queued, or fails with the `Disconnect` that ended the
 * connection. Params a method's Schema accepts `undefined` for (`Method.NoParams`) may be left out.
 *
 * @example
 * ```ts
 * import type { Effect } from "effect"
 * import { Schema } from "effect"
 * import type { Peer } from "@lifeline/kernel"
 * import { Method, Protocol } from "@lifeline/kernel"
 *
 * const Version = Method.request("version", { params: Method.NoParams, result: Schema.String })
 *
 * // Params that accept `undefined` may be left out: `client.version()`.
 * type Version = Protocol.ClientMethod<typeof Version>
 * const check = (version: Version): Effect.Effect<string, Peer.CallError> => version()
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type ClientMethod<M extends Method.Any> = M extends Method.AnyRequest ? (
    ...args: undefined extends Method.Params<M> ? [params?: Method.Params<M>, options?: Peer.CallOptions]
      : [params: Method.Params<M>, options?: Peer.CallOptions]
  ) => Effect.Effect<Method.Result<M>, Method.Failure<M> | Peer.CallError>
  : (
    ...args: undefined extends Method.Params<M> ? [params?: Method.Params<M>] : [params: Method.Params<M>]
  ) => Effect.Effect<void, PeerError.Disconnect>

/**
 * The methods a side calls, as a record keyed by method name, the name exactly as the protocol spells it.
 *
 * @example
 * ```ts
 * import { Context, Schema } from "effect"
 * import { Method, Protocol } from "@lifeline/kernel"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 * const Calc = Protocol.make({ calls: [Add] })
 *
 * // The client as a service of its own.
 * class CalcClient extends Context.Service<CalcClient, Protocol.Client<Protocol.Calls<typeof Calc>>>()("app/CalcClient") {}
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Client<Calls extends Method.Any> = {
  readonly [M in Calls as M["name"]]: ClientMethod<M>
}

/**
 * The peer's callable methods as a typed record keyed by wire name: `client.add([1, 2])` is `peer.call(Add, [1, 2])`.
 * Each function calls the peer directly, so it costs what `peer.call` costs; it owns nothing.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Method, Peer, Protocol } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 * const GetMessage = Method.request("editor/getMessage", {
 *   params: Schema.Struct({}),
 *   result: Schema.Struct({ message: Schema.String })
 * })
 * const Log = Method.notification("log", { params: Schema.Struct({ text: Schema.String }) })
 * const Server = Protocol.make({ serves: [Add, GetMessage, Log] })
 *
 * const program = Effect.gen(function*() {
 *   const { left, right } = yield* TestTransport.makePair()
 *   yield* Peer.make({
 *     protocol: Server,
 *     transport: left,
 *     handlers: {
 *       add: ([a, b]) => Effect.succeed(a + b),
 *       "editor/getMessage": () => Effect.succeed({ message: "hello" }),
 *       log: () => Effect.void
 *     }
 *   })
 *   const peer = yield* Peer.make({ protocol: Protocol.flip(Server), transport: right, handlers: {} })
 *   const client = Protocol.client(peer)
 *   const sum: number = yield* client.add([1, 2]) // 3
 *   const { message } = yield* client["editor/getMessage"]({}, { timeout: "2 seconds" })
 *   yield* client.log({ text: `${sum} ${message}` })
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const client = <Serves extends Method.Any, Calls extends Method.Any>(
  peer: Peer.Peer<Serves, Calls>
): Client<Calls> => {
  const out: Record<string, unknown> = {}
  for (const method of peer.protocol.calls as ReadonlyArray<Method.Any>) {
    const call = method._tag === "Request"
      ? (params: unknown, options?: Peer.CallOptions) => peer.call(method as any, params, options)
      : (params: unknown) => peer.notify(method as any, params)
    // A plain assignment would set the prototype for a method called `__proto__`.
    Object.defineProperty(out, method.name, { value: call, enumerable: true })
  }
  return out as Client<Calls>
}
