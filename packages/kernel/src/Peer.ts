/**
 * A bidirectional JSON-RPC 2.0 peer over a `Transport`: it serves and calls the methods of its protocol, matches
 * answers by id in any order, and cancels both ways when its protocol can. Closing its Scope fails every pending call
 * and interrupts every handler (docs/peer.md).
 *
 * @since 0.1.0
 */
import type * as Framing from "@lifeline/jsonrpc/Framing"
import type * as Message from "@lifeline/jsonrpc/Message"
import type * as RpcError from "@lifeline/jsonrpc/RpcError"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Cancellation_ from "./Cancellation.js"
import * as internal from "./internal/peer.js"
import type * as Method from "./Method.js"
import type * as PeerError from "./PeerError.js"
import type * as Protocol from "./Protocol.js"
import type * as Transport from "./Transport.js"

/**
 * What a request handler knows about the request it serves.
 *
 * @since 0.1.0
 * @category models
 */
export interface HandlerContext {
  readonly id: Message.RequestId
  readonly method: string
}

/**
 * Serves one request: fail with the method's typed error or an `RpcError` to answer with an error response. A defect
 * answers -32603 without a stack trace (unless `exposeDefects`), and never kills the peer.
 *
 * @since 0.1.0
 * @category models
 */
export type RequestHandler<M extends Method.AnyRequest, R> = (
  params: Method.Params<M>,
  context: HandlerContext
) => Effect.Effect<Method.Result<M>, Method.Failure<M> | RpcError.RpcError, R>

/**
 * Handles one notification. Failures are logged; nothing is ever answered.
 *
 * @since 0.1.0
 * @category models
 */
export type NotificationHandler<M extends Method.AnyNotification, R> = (
  params: Method.Params<M>
) => Effect.Effect<void, unknown, R>

/**
 * One handler per method the protocol serves: leaving one out is a type error.
 *
 * @since 0.1.0
 * @category models
 */
export type Handlers<Serves extends Method.Any, R> = {
  readonly [Name in Serves["name"]]: Handler<Extract<Serves, { readonly name: Name }>, R>
}

/**
 * The handler a method needs.
 *
 * @since 0.1.0
 * @category models
 */
export type Handler<M extends Method.Any, R> = M extends Method.AnyRequest ? RequestHandler<M, R>
  : M extends Method.AnyNotification ? NotificationHandler<M, R>
  : never

/**
 * A cancellation notification's spelling. Kept for code written before `Cancellation` was a module of its own.
 *
 * @deprecated Use `Cancellation.Spelling` (or `Cancellation.Cancellation`, which also allows `Cancellation.none`).
 * @since 0.1.0
 * @category models
 */
export type Cancellation = Cancellation_.Spelling

/**
 * What the lifecycle decides about traffic, asked synchronously for every message.
 *
 * @since 0.1.0
 * @category models
 */
export interface Gate {
  /** An error to answer an inbound request with instead of serving it (not initialized, shutting down). */
  readonly inbound: (method: string) => RpcError.RpcError | undefined
  /** Whether an inbound notification is handled (`false` drops it). */
  readonly inboundNotification?: ((method: string) => boolean) | undefined
  /** An error to fail an outbound call or notification with at once. */
  readonly outbound: () => PeerError.Disconnect | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<Serves extends Method.Any, Calls extends Method.Any, R> {
  readonly protocol: Protocol.Protocol<Serves, Calls>
  readonly handlers: Handlers<Serves, R>
  readonly transport: Transport.Transport.Service
  /** Default: `Content-Length` (LSP, Hermes). */
  readonly framing?: Framing.Framing | undefined
  /**
   * What the other side may send: defaults `Framing.defaultLimits` and `Message.defaultLimits`. A body over a
   * `Message` limit is answered with one -32600 (id `null`) and nothing of it is served.
   */
  readonly limits?: Partial<Framing.Limits & Message.Limits> | undefined
  /** Default timeout of an outbound call: 5 seconds (docs/protocol.md, "extension's own calls to Hermes"). */
  readonly requestTimeout?: Duration.Input | undefined
  /** How long teardown waits for queued answers to be written before it ends the transport. Default 1 second. */
  readonly flushTimeout?: Duration.Input | undefined
  /** At most one WARN per this interval about what the peer sent wrong; the rest are counted. Default 1 second. */
  readonly invalidMessageLogInterval?: Duration.Input | undefined
  /** At most this many inbound requests are served at once; the rest wait for a permit. Default: no limit. */
  readonly maxConcurrentHandlers?: number | undefined
  /** Frames waiting to be written; a sender waits when it is full. Default 1024. */
  readonly outboundCapacity?: number | undefined
  /**
   * Answers waiting to be written before the reader holds the next request (docs/peer.md, "Answers the other side does
   * not read"). Default 4096.
   */
  readonly maxPendingAnswers?: number | undefined
  /** The same bound in bytes: the frames of the answers waiting to be written. Default 16 MiB. */
  readonly maxPendingAnswerBytes?: number | undefined
  /**
   * How long the reader may stay held by answers the other side does not read before the connection ends with
   * `PeerClosed` `Unresponsive` (same section). Default 30 seconds.
   */
  readonly stallTimeout?: Duration.Input | undefined
  /** How many abandoned ids are remembered to recognise late answers. Default 10,000. */
  readonly tombstoneCapacity?: number | undefined
  /**
   * Log annotations (`rpc.method`, `rpc.id`) and an `rpc.serve <method>` span around every inbound request: `"auto"`
   * (default) makes the span only when a tracer other than Effect's built-in one is installed; `true` always, `false`
   * neither (docs/peer.md, "Observability").
   */
  readonly tracing?: boolean | "auto" | undefined
  /** Overrides the protocol's `traceContext`: W3C trace context in `params._meta` (docs/tracing.md). */
  readonly traceContext?: Protocol.TraceContext | undefined
  /** Put the pretty-printed cause of a handler defect in the -32603 answer's `data`. Default false. */
  readonly exposeDefects?: boolean | undefined
  /** Overrides the protocol's cancellation (docs/peer.md, "Cancellation"). */
  readonly cancellation?: Cancellation_.Cancellation | undefined
  readonly gate?: Gate | undefined
  /** Serves requests for methods the protocol does not name (a generic client answering whatever it is asked). */
  readonly onUnknownRequest?:
    | ((method: string, params: unknown, context: HandlerContext) => Effect.Effect<unknown, RpcError.RpcError, R>)
    | undefined
  readonly onUnknownNotification?: ((method: string, params: unknown) => Effect.Effect<void, never, R>) | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface CallOptions {
  readonly timeout?: Duration.Input | undefined
}

/**
 * Every way an outbound call can fail besides the method's own typed error.
 *
 * @since 0.1.0
 * @category models
 */
export type CallError = RpcError.RpcError | PeerError.RequestTimeout | PeerError.Disconnect

/**
 * A piece of work a teardown cut off: an outbound call that got no answer, or an inbound request whose handler was
 * interrupted. The recovery journal persists these.
 *
 * @since 0.1.0
 * @category models
 */
export interface CutOff {
  readonly direction: "inbound" | "outbound"
  /** `null` for an inbound notification whose handler was still running. */
  readonly id: Message.RequestId | null
  readonly method: string
}

/**
 * Counters, read at any time.
 *
 * @since 0.1.0
 * @category models
 */
export interface Stats {
  readonly requestsSent: number
  readonly notificationsSent: number
  readonly responsesReceived: number
  readonly requestsReceived: number
  readonly notificationsReceived: number
  /** Outbound calls that got no answer in time. */
  readonly timedOut: number
  /** Outbound calls abandoned because their caller was interrupted (whether or not the protocol says so on the wire). */
  readonly cancelledByUs: number
  /** Inbound requests cancelled by the peer while their handler ran. */
  readonly cancelledByPeer: number
  /** Answers to tombstoned ids, dropped quietly. */
  readonly lateResponses: number
  /** Answers to ids never sent: a protocol violation, logged. */
  readonly unknownResponses: number
  readonly invalidMessages: number
  /** Outbound calls failed because the connection ended or shut down. */
  readonly failedByDisconnect: number
  readonly handlerDefects: number
  /** Times the reader held a request because answers waited to be written over `maxPendingAnswers(Bytes)`. */
  readonly readsHeld: number
  /** 1 once the connection ended because the reader was held longer than `stallTimeout`, else 0. */
  readonly unresponsive: number
  /** Inbound `_meta.traceparent`, `tracestate` or `baggage` values ignored because they are not valid W3C values. */
  readonly traceContextInvalid: number
  readonly pendingOutbound: number
  readonly activeInbound: number
  readonly tombstones: number
  /** Answers waiting to be written (handed to the writer, not yet to the transport), and their bytes. */
  readonly pendingAnswers: number
  readonly pendingAnswerBytes: number
}

/**
 * A running peer. Callers outside Effect call it through `PromiseClient.make(peer)`: Promises that reject with the
 * typed error, and no fiber per pending call.
 *
 * @since 0.1.0
 * @category models
 */
export interface Peer<Serves extends Method.Any, Calls extends Method.Any> {
  readonly protocol: Protocol.Protocol<Serves, Calls>
  /** Calls a method of the protocol and waits for its answer, at most the method's or the peer's timeout. */
  readonly call: <M extends Extract<Calls, Method.AnyRequest>>(
    method: M,
    params: Method.Params<M>,
    options?: CallOptions
  ) => Effect.Effect<Method.Result<M>, Method.Failure<M> | CallError>
  readonly notify: <M extends Extract<Calls, Method.AnyNotification>>(
    method: M,
    params: Method.Params<M>
  ) => Effect.Effect<void, PeerError.Disconnect>
  /** A call by name with raw JSON params, for methods outside the protocol. */
  readonly callUntyped: (
    method: string,
    params?: Message.Params | null | undefined,
    options?: CallOptions
  ) => Effect.Effect<unknown, CallError>
  readonly notifyUntyped: (
    method: string,
    params?: Message.Params | null | undefined
  ) => Effect.Effect<void, PeerError.Disconnect>
  readonly stats: Effect.Effect<Stats>
  readonly unsafeStats: () => Stats
  /** Completes when the connection is over, with the reason: the other side closed it, it failed, or we stopped. */
  readonly closed: Effect.Effect<PeerError.Disconnect>
  readonly isClosed: Effect.Effect<boolean>
  /** Completes when no outbound call is pending and no inbound request or notification handler is running. */
  readonly awaitIdle: Effect.Effect<void>
  /** Completes when every queued frame has been handed to the transport. */
  readonly flush: Effect.Effect<void>
  /** Refuses new outbound calls and notifications with `error` from now on. */
  readonly refuseNew: (error: PeerError.Disconnect) => Effect.Effect<void>
  /** Fails every pending outbound call with `error` now and tombstones its id. */
  readonly failPending: (error: PeerError.Disconnect) => Effect.Effect<ReadonlyArray<CutOff>>
  /** Interrupts every inbound handler now and tombstones its id. */
  readonly interruptHandlers: Effect.Effect<ReadonlyArray<CutOff>>
  /**
   * Ends the connection in the steps of docs/peer.md, "Teardown"; completes once every pending caller has its error.
   * Idempotent; the Scope's finalizer runs it too.
   */
  readonly close: (error: PeerError.Disconnect) => Effect.Effect<void>
}

/**
 * Starts a peer in the current Scope.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Method, Peer, Protocol } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 * const server = Protocol.make({ serves: [Add] })
 *
 * const program = Effect.gen(function*() {
 *   const { left, right } = yield* TestTransport.makePair()
 *   yield* Peer.make({ protocol: server, transport: left, handlers: { add: ([a, b]) => Effect.succeed(a + b) } })
 *   const client = yield* Peer.make({ protocol: Protocol.flip(server), transport: right, handlers: {} })
 *   return yield* client.call(Add, [1, 2]) // 3
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: <Serves extends Method.Any, Calls extends Method.Any, R = never>(
  options: Options<Serves, Calls, R>
) => Effect.Effect<Peer<Serves, Calls>, never, Scope.Scope | R> = internal.make
