/**
 * A connection for programs written with Promises: opened and closed with `await`, served by Promise handlers, called
 * through a `PromiseClient`, stopped under the shutdown policy like any other connection.
 *
 * @since 0.2.0
 */
import type * as Layer from "effect/Layer"
import type * as Connection from "./Connection.js"
import * as internal from "./internal/promiseConnection.js"
import type * as Lifecycle from "./Lifecycle.js"
import type * as Method from "./Method.js"
import type * as Peer from "./Peer.js"
import type * as PromiseClient from "./PromiseClient.js"
import type * as Protocol from "./Protocol.js"
import type * as Transport from "./Transport.js"

/**
 * What a Promise handler is given beside its params: the request's id and method, and a `signal` that aborts when the
 * request is cancelled (a cancellation from the other side, a fail-fast stop, a drain's deadline).
 *
 * @since 0.2.0
 * @category models
 */
export interface HandlerContext extends Peer.HandlerContext {
  readonly signal: AbortSignal
}

/**
 * Serves one request. Resolve with the result; reject with an `RpcError` (or the method's typed error) to answer
 * with that error. Any other rejection answers -32603 (its text is not sent unless `exposeDefects`).
 *
 * @since 0.2.0
 * @category models
 */
export type RequestHandler<M extends Method.AnyRequest> = (
  params: Method.Params<M>,
  context: HandlerContext
) => Promise<Method.Result<M>> | Method.Result<M>

/**
 * Handles one notification; a rejection is logged, nothing is answered.
 *
 * @since 0.2.0
 * @category models
 */
export type NotificationHandler<M extends Method.AnyNotification> = (params: Method.Params<M>) => Promise<void> | void

/**
 * One Promise handler per method the protocol serves.
 *
 * @since 0.2.0
 * @category models
 */
export type Handlers<Serves extends Method.Any> = {
  readonly [Name in Serves["name"]]: Extract<Serves, { readonly name: Name }> extends infer M
    ? M extends Method.AnyRequest ? RequestHandler<M>
    : M extends Method.AnyNotification ? NotificationHandler<M>
    : never
    : never
}

/**
 * Options of {@link open}: the transport as a Layer, the handlers as Promise functions, and what `Connection.make`
 * takes besides.
 *
 * @since 0.2.0
 * @category models
 */
export interface Options<Serves extends Method.Any, Calls extends Method.Any, E>
  extends Omit<Connection.Options<Serves, Calls, never>, "transport" | "handlers" | "handshake" | "onShutdown">
{
  readonly transport: Layer.Layer<Transport.Transport, E>
  readonly handlers: Handlers<Serves>
}

/**
 * An open connection, for Promise code.
 *
 * @since 0.2.0
 * @category models
 */
export interface PromiseConnection<Calls extends Method.Any> {
  readonly client: PromiseClient.PromiseClient<Calls>
  /**
   * Stops under the policy, then releases the transport (a child process gets its whole stop ladder), and resolves
   * with what the shutdown did. Idempotent: every call gets the same report; it never rejects.
   */
  readonly close: (reason?: Lifecycle.CloseReason) => Promise<Connection.ShutdownReport>
  /** Resolves with the report once the connection is over, however it ended; `close` still releases the transport. */
  readonly closed: Promise<Connection.ShutdownReport>
  /** Stops fail-fast whatever the policy (what a second Ctrl-C does), then as `close`. */
  readonly closeNow: (reason?: Lifecycle.CloseReason) => Promise<Connection.ShutdownReport>
}

/**
 * Opens a connection and resolves once it is `Ready`, or rejects with the transport's or the connection's error. Logs
 * go to stderr. Not for extensions whose stdout is the protocol: use `NodeStdio`.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Method, PromiseConnection, Protocol, ShutdownPolicy } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 * const Hello = Method.request("hello", { params: Schema.Struct({ name: Schema.String }), result: Schema.String })
 * const Server = Protocol.make({ serves: [Add], calls: [Hello] })
 *
 * // In your program, `transport` is e.g. `NodeChildProcess.layer({ command: ChildProcess.make("server", []) })`.
 * const transport = TestTransport.layerServe(Server, { add: ([a, b]) => Effect.succeed(a + b) })
 *
 * export const main = async () => {
 *   const connection = await PromiseConnection.open({
 *     protocol: Protocol.flip(Server),
 *     transport,
 *     handlers: { hello: async ({ name }) => `hello, ${name}` },
 *     policy: ShutdownPolicy.drain("2 seconds")
 *   })
 *   const sum = await connection.client.call(Add, [1, 2]) // 3
 *   const report = await connection.close() // drained, then the transport released
 *   return { sum, drained: report.drained }
 * }
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const open: <Serves extends Method.Any, Calls extends Method.Any, E = never>(
  options: Options<Serves, Calls, E>
) => Promise<PromiseConnection<Calls>> = internal.open

/**
 * Promise handlers as the Effect handlers a `Peer` or `Connection` takes, for a program that makes its connection in
 * Effect but writes its handlers with Promises.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Method, PromiseConnection, Protocol } from "@lifeline/kernel"
 *
 * const Greet = Method.request("greet", { params: Schema.Struct({ name: Schema.String }), result: Schema.String })
 * const handlers = PromiseConnection.handlers(Protocol.make({ serves: [Greet] }), {
 *   greet: async ({ name }) => `hello, ${name}`
 * })
 * ```
 *
 * @since 0.2.0
 * @category combinators
 */
export const handlers: <Serves extends Method.Any, Calls extends Method.Any>(
  protocol: Protocol.Protocol<Serves, Calls>,
  handlers: Handlers<Serves>
) => Peer.Handlers<Serves, never> = internal.handlers
