/**
 * A running peer's calls as Promises, for callers outside Effect (a VS Code extension, an Express server, a test
 * script): a call rejects with its typed error itself (`RpcError`, `RequestTimeout`, `ShutdownError`, the method's
 * own error), an `AbortSignal` abandons it, and a pending call costs no fiber.
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
   * Abandons the call when aborted, as interrupting an Effect caller does: the call is forgotten, its id tombstoned,
   * the protocol's cancellation sent if it has one (`Cancellation.lsp`, `Cancellation.mcp`), and the Promise rejects
   * with `signal.reason`. A signal already aborted rejects at once and sends nothing.
   */
  readonly signal?: AbortSignal | undefined
}

/**
 * What a call's Promise may reject with: the method's typed error, or one of `Peer.CallError` (`RpcError`,
 * `RequestTimeout`, `PeerClosed`, `ShutdownError`, `PeerExited`), or the signal's reason once it aborts. Promises
 * carry no error type, so this is for narrowing with `instanceof` or `_tag`.
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
   * Sends a notification: resolves once it is queued (at once, unless the outbound queue is full), rejects with a
   * `Disconnect` when the connection is over, or with an `Error` when the params fail their Schema. A notification
   * left un-awaited never becomes an unhandled rejection (which would end a Node process): await it to see the error.
   */
  readonly notify: <M extends Extract<Calls, Method.AnyNotification>>(
    method: M,
    params: Method.Params<M>
  ) => Promise<void>
  readonly notifyUntyped: (method: string, params?: Message.Params | null | undefined) => Promise<void>
}

/**
 * The Promise client of a running peer (one made by `Peer.make`, `Connection.make` or `NodeChildProcess.makePeer`).
 * It owns nothing and may be made any number of times: the peer's Scope decides when the connection ends, and then
 * every pending call rejects with the reason (`ShutdownError` when that Scope closes, `PeerClosed`, `PeerExited`).
 * Synchronous, unlike other constructors, because its callers are outside Effect. Each call is an entry in the peer's
 * pending table whose callback settles the Promise: no fiber per call, and a rejection is the typed error itself. For
 * any other implementation of `Peer.Peer` (a test double), each call runs its Effect as a fiber instead.
 *
 * @example
 * ```ts
 * import { Effect, Exit, Schema, Scope } from "effect"
 * import { Method, Peer, PeerError, PromiseClient, Protocol } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/kernel/testing"
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
