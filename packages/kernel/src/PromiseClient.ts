/**
 * A running peer's calls as Promises, for callers outside Effect: a call rejects with its typed error itself, an
 * `AbortSignal` abandons it, and a pending call costs no fiber (docs/peer.md, "Calling from outside Effect").
 *
 * @since 0.1.0
 */
import type * as Message from "@lifeline/jsonrpc/Message"
import type * as Duration from "effect/Duration"
import * as internal from "./internal/peer/promise.js"
import type * as Method from "./Method.js"
import type * as Peer from "./Peer.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface CallOptions {
  /** Overrides the method's and the peer's timeout, as in `Peer.CallOptions` (a number is milliseconds). */
  readonly timeout?: Duration.Input | undefined
  /**
   * Abandons the call when aborted, as interrupting an Effect caller does; the Promise rejects with `signal.reason`.
   * A signal already aborted rejects at once and sends nothing.
   */
  readonly signal?: AbortSignal | undefined
}

/**
 * What a call's Promise may reject with (besides an aborted signal's reason), for narrowing with `instanceof` or
 * `_tag`: Promises carry no error type.
 *
 * @since 0.1.0
 * @category models
 */
export type CallRejection<M extends Method.AnyRequest> = Method.Failure<M> | Peer.CallError

/**
 * @since 0.1.0
 * @category models
 */
export interface PromiseClient<Calls extends Method.Any> {
  /** The peer it calls through; its Scope still decides how long the connection lives. */
  readonly peer: Peer.Peer<any, Calls>
  /**
   * Calls a method of the protocol: resolves with the decoded result, rejects with a `CallRejection<M>` (params that
   * fail their Schema reject with -32602 and send nothing).
   */
  readonly call: <M extends Extract<Calls, Method.AnyRequest>>(
    method: M,
    params: Method.Params<M>,
    options?: CallOptions
  ) => Promise<Method.Result<M>>
  /** A call by name with raw JSON params, for methods outside the protocol. */
  readonly callUntyped: (
    method: string,
    params?: Message.Params | null | undefined,
    options?: CallOptions
  ) => Promise<unknown>
  /**
   * Sends a notification: resolves once it is queued, rejects with a `Disconnect` or, for params that fail their
   * Schema, an `Error`. Left un-awaited, it never becomes an unhandled rejection.
   */
  readonly notify: <M extends Extract<Calls, Method.AnyNotification>>(
    method: M,
    params: Method.Params<M>
  ) => Promise<void>
  readonly notifyUntyped: (method: string, params?: Message.Params | null | undefined) => Promise<void>
}

/**
 * The Promise client of a running peer; synchronous, since its callers are outside Effect. It owns nothing: the
 * peer's Scope decides when the connection ends, and then every pending call rejects with the reason. For a `Peer.Peer`
 * not made by `Peer.make` (a test double), each call runs its Effect as a fiber.
 *
 * @example
 * ```ts
 * import { Effect, Exit, Schema, Scope } from "effect"
 * import { Method, Peer, PeerError, PromiseClient, Protocol } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 * const server = Protocol.make({ serves: [Add] })
 *
 * const main = async () => {
 *   // Effect starts the peers once; everything after is plain Promises.
 *   const scope = Effect.runSync(Scope.make())
 *   const peer = await Effect.runPromise(Scope.provide(
 *     Effect.gen(function*() {
 *       const { left, right } = yield* TestTransport.makePair()
 *       yield* Peer.make({ protocol: server, transport: left, handlers: { add: ([a, b]) => Effect.succeed(a + b) } })
 *       return yield* Peer.make({ protocol: Protocol.flip(server), transport: right, handlers: {} })
 *     }),
 *     scope
 *   ))
 *   const client = PromiseClient.make(peer)
 *   try {
 *     const sum: number = await client.call(Add, [1, 2], { timeout: "2 seconds", signal: AbortSignal.timeout(1000) })
 *     return sum // 3
 *   } catch (error) {
 *     // The typed error itself (RpcError, PeerError.RequestTimeout, PeerError.ShutdownError...) or the signal's reason
 *     if (error instanceof PeerError.RequestTimeout) return `no answer within ${error.timeoutMillis} ms`
 *     throw error
 *   } finally {
 *     await Effect.runPromise(Scope.close(scope, Exit.void)) // calls still pending reject with ShutdownError
 *   }
 * }
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: <Serves extends Method.Any, Calls extends Method.Any>(
  peer: Peer.Peer<Serves, Calls>
) => PromiseClient<Calls> = internal.make
