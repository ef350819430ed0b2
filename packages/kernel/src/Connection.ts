/**
 * A peer with a lifecycle: the handshake that makes it `Ready`, the gates that refuse traffic in the wrong state, and
 * an idempotent `stop` under a `ShutdownPolicy`. Closing its Scope, or `GracefulShutdown`, stops it the same way
 * (docs/lifecycle.md). `Service` declares a connection of one protocol as a service of its own.
 *
 * @since 0.1.0
 */
import type * as Config from "effect/Config"
import type * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/connection.js"
import * as internalHandshake from "./internal/connectionHandshake.js"
import * as internalLayer from "./internal/connectionLayer.js"
import type * as Lifecycle from "./Lifecycle.js"
import type * as Method from "./Method.js"
import type * as Peer from "./Peer.js"
import type * as PeerError from "./PeerError.js"
import type * as PeerMetrics from "./PeerMetrics.js"
import type * as Protocol from "./Protocol.js"
import type * as ShutdownPolicy from "./ShutdownPolicy.js"
import type * as Transport from "./Transport.js"

/**
 * How the connection becomes `Ready`: this side starts it ({@link initiate}) or the other side does ({@link accept});
 * docs/lifecycle.md, "Handshakes" and "Gates". `E` is the typed error of the method the handshake calls.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Connection, Method, Protocol } from "@lifeline/kernel"
 *
 * const Initialize = Method.request("initialize", { params: Schema.Struct({}), result: Schema.Struct({}) })
 * const Server = Protocol.make({ serves: [Initialize] })
 *
 * const handshake: Connection.Handshake<Protocol.Serves<typeof Server>, never> = Connection.accept("initialize")
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Handshake<Serves extends Method.Any, Calls extends Method.Any, E = never> =
  | Initiate<Serves, Calls, E>
  | Accept<RequestName<Serves>, NotificationName<Serves>>

/**
 * The handshakes `make` accepts for a protocol that serves `Serves` and calls `Calls`: checked against the protocol,
 * never inferred from it; only the typed error `E` is inferred.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Connection, Method, Protocol } from "@lifeline/kernel"
 *
 * const Initialize = Method.request("initialize", { params: Schema.Struct({}), result: Schema.Struct({}) })
 * const Server = Protocol.make({ serves: [Initialize] })
 * type Serves = Protocol.Serves<typeof Server>
 *
 * const ok: Connection.HandshakeFor<Serves, never, never> = Connection.accept("initialize")
 * // @ts-expect-error: the protocol serves no `initialise`
 * const typo: Connection.HandshakeFor<Serves, never, never> = Connection.accept("initialise")
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type HandshakeFor<Serves extends Method.Any, Calls extends Method.Any, E> =
  // Written out rather than as `Initiate<...>`: TypeScript would infer `Serves` and `Calls` from the type arguments of
  // a handshake made without the protocol (`initiate(method, params)`) and let any method through.
  | {
    readonly _tag: "Initiate"
    readonly run: (peer: Peer.Peer<Serves, Calls>) => Effect.Effect<unknown, E | Lifecycle.Failure>
    readonly timeout: Duration.Duration
    readonly method?: NoInfer<Extract<Calls, Method.AnyRequest>> | undefined
  }
  // `NoInfer` around the names, never inside `Extract`: `NoInfer<A | B>` is not distributed over.
  | Accept<NoInfer<RequestName<Serves>>, NoInfer<NotificationName<Serves>>>

/**
 * The names of the requests among `M`.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Connection, Method } from "@lifeline/kernel"
 *
 * const Initialize = Method.request("initialize", { params: Schema.Struct({}), result: Schema.Struct({}) })
 * const Initialized = Method.notification("initialized", { params: Schema.Struct({}) })
 *
 * type Name = Connection.RequestName<typeof Initialize | typeof Initialized> // "initialize"
 * const name: Name = "initialize"
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type RequestName<M extends Method.Any> = Extract<M, Method.AnyRequest>["name"]

/**
 * The names of the notifications among `M`.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Connection, Method } from "@lifeline/kernel"
 *
 * const Initialize = Method.request("initialize", { params: Schema.Struct({}), result: Schema.Struct({}) })
 * const Initialized = Method.notification("initialized", { params: Schema.Struct({}) })
 *
 * type Name = Connection.NotificationName<typeof Initialize | typeof Initialized> // "initialized"
 * const name: Name = "initialized"
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type NotificationName<M extends Method.Any> = Extract<M, Method.AnyNotification>["name"]

/**
 * A handshake this side starts. `method` is the request it calls, when it was made from one
 * (`initiate(Initialize, params)`): `make` checks that the protocol calls it.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Connection, Method } from "@lifeline/kernel"
 *
 * const Initialize = Method.request("initialize", { params: Schema.Struct({}), result: Schema.Struct({}) })
 *
 * const handshake = Connection.initiate(Initialize, {}, { timeout: "5 seconds" })
 * const method: typeof Initialize | undefined = handshake.method
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Initiate<
  Serves extends Method.Any,
  Calls extends Method.Any,
  E = never,
  M extends Method.AnyRequest = Extract<Calls, Method.AnyRequest>
> {
  readonly _tag: "Initiate"
  readonly run: (peer: Peer.Peer<Serves, Calls>) => Effect.Effect<unknown, E | Lifecycle.Failure>
  readonly timeout: Duration.Duration
  readonly method?: M | undefined
}

/**
 * A handshake the other side starts with `request`.
 *
 * @example
 * ```ts
 * import { Connection } from "@lifeline/kernel"
 *
 * const handshake: Connection.Accept<"initialize", "initialized"> = Connection.accept("initialize", {
 *   notifications: ["initialized"]
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Accept<Request extends string = string, Notification extends string = string> {
  readonly _tag: "Accept"
  readonly request: Request
  readonly notifications: ReadonlyArray<Notification>
  readonly timeout: Duration.Duration | undefined
}

/**
 * This side starts the handshake, within `timeout` (default `Bounds.handshakeTimeout`), which is also its calls'
 * timeout (docs/lifecycle.md, "Handshakes"). Made from a method, `make` checks that the protocol calls it; made from a
 * function, `peer` calls any method unless the type parameters are given (`initiate<Serves, Calls>(...)`). A failure
 * that is not a `Lifecycle.Failure` leaves the lifecycle `Failed` with an `RpcError` -32000 whose `data` is that error.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Connection, Method } from "@lifeline/kernel"
 *
 * class Refused extends Schema.TaggedError<Refused>()("Refused", { reason: Schema.String }) {}
 * const Initialize = Method.request("initialize", {
 *   params: Schema.Struct({ version: Schema.String }),
 *   result: Schema.Struct({ name: Schema.String }),
 *   error: Refused
 * })
 * const Initialized = Method.notification("initialized", { params: Schema.Struct({}) })
 *
 * // The method form: `make` checks that the protocol calls `initialize`, and may fail with `Refused`.
 * const typed = Connection.initiate(Initialize, { version: "1.0" }, {
 *   then: (_result, peer) => peer.notify(Initialized, {}),
 *   timeout: "5 seconds"
 * })
 *
 * // The function form.
 * const free = Connection.initiate((peer) => peer.callUntyped("initialize", { capabilities: {} }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const initiate: {
  <M extends Method.AnyRequest, E = never>(
    method: M,
    params: Method.Params<M>,
    options?: {
      readonly then?:
        | ((result: Method.Result<M>, peer: Peer.Peer<any, any>) => Effect.Effect<unknown, E | Lifecycle.Failure>)
        | undefined
      readonly timeout?: Duration.Input | undefined
      readonly callOptions?: Peer.CallOptions | undefined
    }
  ): Initiate<any, any, Method.Failure<M> | E, M>
  <Serves extends Method.Any, Calls extends Method.Any, E = never>(
    run: (peer: Peer.Peer<Serves, Calls>) => Effect.Effect<unknown, E | Lifecycle.Failure>,
    options?: { readonly timeout?: Duration.Input | undefined }
  ): Initiate<Serves, Calls, E, never>
} = internalHandshake.initiate as any

/**
 * The other side starts the handshake with `request`, which its handler serves. Given as methods or names, the request
 * and `notifications` are checked against the protocol by `make`: a misspelled one does not compile.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Connection, Method } from "@lifeline/kernel"
 *
 * const Initialized = Method.notification("initialized", { params: Schema.Struct({}) })
 *
 * const byName = Connection.accept("initialize", { notifications: ["initialized"], timeout: "10 seconds" })
 * const byMethod = Connection.accept("initialize", { notifications: [Initialized] })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const accept = <
  const Request extends string,
  const Notifications extends ReadonlyArray<string | Method.AnyNotification> = readonly []
>(
  request: Request | Method.Request<Request, any, any, any>,
  options?: {
    readonly notifications?: Notifications | undefined
    readonly timeout?: Duration.Input | undefined
  }
): Accept<Request, NameOf<Notifications[number]>> => ({
  _tag: "Accept",
  request: (typeof request === "string" ? request : request.name) as Request,
  notifications: (options?.notifications ?? []).map((n) => typeof n === "string" ? n : n.name) as Array<
    NameOf<Notifications[number]>
  >,
  timeout: options?.timeout === undefined ? undefined : internalHandshake.nonNegative(options.timeout)
})

type NameOf<N> = N extends string ? N : N extends Method.AnyNotification ? N["name"] : never

/**
 * What a shutdown did: under which policy and why, whether everything in flight finished (`drained`), and what was
 * cut off. The recovery journal persists `cutOff`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ShutdownReport {
  readonly policy: ShutdownPolicy.Policy
  readonly reason: Lifecycle.CloseReason | "Failed"
  readonly drained: boolean
  readonly cutOff: ReadonlyArray<Peer.CutOff>
  readonly startedAt: number
  readonly finishedAt: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<Serves extends Method.Any, Calls extends Method.Any, R, E = never>
  extends Peer.Options<Serves, Calls, R>
{
  /** Checked against `protocol` ({@link HandshakeFor}). */
  readonly handshake?: HandshakeFor<Serves, Calls, E> | undefined
  /** Default: `ShutdownPolicy.resolve` (an invalid environment fails `make` with a `ConfigError`). */
  readonly policy?: ShutdownPolicy.Policy | undefined
  /** Runs once, after every shutdown, with what it cut off. */
  readonly onShutdown?: ((report: ShutdownReport) => Effect.Effect<void>) | undefined
  /** Registers the connection with the `GracefulShutdown` service, when one is provided. Default true. */
  readonly gracefulShutdown?: boolean | undefined
  /** `PeerMetrics` of the connection: on by default (the observed tier), `false` registers nothing. */
  readonly metrics?: boolean | PeerMetrics.Options | undefined
}

/**
 * Options of one `stop` call.
 *
 * @since 0.1.0
 * @category models
 */
export interface StopOptions {
  /**
   * How long this caller waits; no default. On expiry it gets `PeerError.StopTimeout` and the stop goes on to its end
   * (docs/lifecycle.md, "stop").
   */
  readonly timeout: Duration.Input
}

/**
 * A running connection.
 *
 * @since 0.1.0
 * @category models
 */
export interface Connection<Serves extends Method.Any, Calls extends Method.Any> {
  readonly peer: Peer.Peer<Serves, Calls>
  readonly lifecycle: Lifecycle.Lifecycle
  readonly policy: ShutdownPolicy.Policy
  /**
   * Stops under the policy: the first caller gets `Stopped` once the shutdown is over, every other caller
   * `AlreadyClosing` at once (docs/lifecycle.md, "stop").
   */
  readonly stop: {
    (reason?: Lifecycle.CloseReason): Effect.Effect<Lifecycle.StopResult>
    (
      reason: Lifecycle.CloseReason | undefined,
      options: StopOptions
    ): Effect.Effect<Lifecycle.StopResult, PeerError.StopTimeout>
  }
  /** Stops fail-fast whatever the policy, cutting a drain short (`ShutdownError { reason: "Forced" }`). */
  readonly stopNow: (reason?: Lifecycle.CloseReason) => Effect.Effect<Lifecycle.StopResult>
  /** Waits for the end of the shutdown, however it started, and tells what it did. */
  readonly awaitShutdown: Effect.Effect<ShutdownReport>
}

/**
 * Starts a connection in the current Scope.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Connection, Method, Protocol, ShutdownPolicy } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const Work = Method.request("work", { params: Schema.Struct({}), result: Schema.Null })
 *
 * const program = Effect.gen(function*() {
 *   const { left } = yield* TestTransport.makePair()
 *   const connection = yield* Connection.make({
 *     protocol: Protocol.make({ serves: [Work] }),
 *     transport: left,
 *     handlers: { work: () => Effect.succeed(null) },
 *     policy: ShutdownPolicy.drain("3 seconds")
 *   })
 *   return yield* connection.stop() // "Stopped"
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: <Serves extends Method.Any, Calls extends Method.Any, R = never, E = never>(
  options: Options<Serves, Calls, R, E>
) => Effect.Effect<
  Connection<Serves, Calls>,
  Lifecycle.Failure | E | Lifecycle.IllegalTransition | Config.ConfigError,
  Scope.Scope | R
> = internal.make

// -- Layer-first --------------------------------------------------------------------------------------------------

/**
 * Options of a connection made by a layer: those of {@link make} without the transport, which is the `Transport`
 * service the layer is built over.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Connection, Method, Protocol } from "@lifeline/kernel"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 *
 * const options: Connection.LayerOptions<typeof Add, never, never> = {
 *   protocol: Protocol.make({ serves: [Add] }),
 *   handlers: { add: ([a, b]) => Effect.succeed(a + b) },
 *   requestTimeout: "2 seconds"
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface LayerOptions<Serves extends Method.Any, Calls extends Method.Any, R, E = never>
  extends Omit<Options<Serves, Calls, R, E>, "transport">
{}

/**
 * What a layer can fail with: what {@link make} fails with.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Connection } from "@lifeline/kernel"
 *
 * class Refused extends Schema.TaggedError<Refused>()("Refused", {}) {}
 *
 * // A layer whose handshake may fail with `Refused`, recovered into a fallback.
 * const fallback = (error: Connection.LayerError<Refused>) =>
 *   error._tag === "Refused" ? Effect.succeed("refused") : Effect.fail(error)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type LayerError<E = never> = Lifecycle.Failure | E | Lifecycle.IllegalTransition | Config.ConfigError

/**
 * A connection for the life of the layer, over the `Transport` service, as the service `tag`: `Ready` once built,
 * stopped under its policy once released.
 *
 * @example
 * ```ts
 * import { Context, Layer, Schema } from "effect"
 * import { Connection, Method, Protocol } from "@lifeline/kernel"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 * const Calc = Protocol.make({ calls: [Add] })
 *
 * class CalcConnection
 *   extends Context.Service<CalcConnection, Connection.Connection<never, typeof Add>>()("app/CalcConnection")
 * {}
 *
 * // Layer<CalcConnection, Lifecycle.Failure | ..., Transport>
 * const CalcConnectionLive = Connection.layer(CalcConnection, { protocol: Calc, handlers: {} })
 * const _check: Layer.Layer<CalcConnection, unknown, unknown> = CalcConnectionLive
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: <I, Serves extends Method.Any, Calls extends Method.Any, R = never, E = never>(
  tag: Context.Key<I, Connection<Serves, Calls>>,
  options: LayerOptions<Serves, Calls, R, E>
) => Layer.Layer<I, LayerError<E>, Transport.Transport | Exclude<R, Scope.Scope>> = internalLayer.layer

/**
 * The settings of a connection that can come from `Config` (see {@link layerConfig}).
 *
 * @example
 * ```ts
 * import { Connection, ShutdownPolicy } from "@lifeline/kernel"
 *
 * const settings: Connection.Settings = { policy: ShutdownPolicy.drain("3 seconds"), requestTimeout: "10 seconds" }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  readonly policy?: ShutdownPolicy.Policy | undefined
  readonly requestTimeout?: Duration.Input | undefined
  readonly flushTimeout?: Duration.Input | undefined
  readonly maxConcurrentHandlers?: number | undefined
  readonly outboundCapacity?: number | undefined
  readonly maxPendingAnswers?: number | undefined
  readonly maxPendingAnswerBytes?: number | undefined
  readonly stallTimeout?: Duration.Input | undefined
}

/**
 * Options of {@link layerConfig}: {@link LayerOptions} whose {@link Settings} are read from `config`.
 *
 * @example
 * ```ts
 * import { Config } from "effect"
 * import { Connection, Protocol } from "@lifeline/kernel"
 *
 * const options: Connection.LayerConfigOptions<never, never, never> = {
 *   protocol: Protocol.make({}),
 *   handlers: {},
 *   config: { maxConcurrentHandlers: Config.Int("MAX_HANDLERS") }
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface LayerConfigOptions<Serves extends Method.Any, Calls extends Method.Any, R, E = never>
  extends Omit<LayerOptions<Serves, Calls, R, E>, keyof Settings>
{
  /** Each setting as a `Config` (a missing one keeps its default), or all of them as one `Config`. */
  readonly config: Config.Wrap<Settings>
}

/**
 * {@link layer} with its settings read from `Config` when the layer is built: an invalid value fails the layer with the
 * `ConfigError` that names it. Without a `policy` in `config`, `ShutdownPolicy.resolve` decides, as in {@link make}.
 *
 * @example
 * ```ts
 * import { Config, Context, Schema } from "effect"
 * import { Connection, Method, Protocol, ShutdownPolicy } from "@lifeline/kernel"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 * const Calc = Protocol.make({ calls: [Add] })
 *
 * class CalcConnection
 *   extends Context.Service<CalcConnection, Connection.Connection<never, typeof Add>>()("app/CalcConnection")
 * {}
 *
 * const CalcConnectionLive = Connection.layerConfig(CalcConnection, {
 *   protocol: Calc,
 *   handlers: {},
 *   config: {
 *     requestTimeout: Config.Duration("CALC_TIMEOUT").pipe(Config.withDefault("5 seconds")),
 *     policy: ShutdownPolicy.config
 *   }
 * })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: <I, Serves extends Method.Any, Calls extends Method.Any, R = never, E = never>(
  tag: Context.Key<I, Connection<Serves, Calls>>,
  options: LayerConfigOptions<Serves, Calls, R, E>
) => Layer.Layer<I, LayerError<E>, Transport.Transport | Exclude<R, Scope.Scope>> = internalLayer.layerConfig

/**
 * A connection as a service of its own, one per protocol, made by {@link Service}: the class is the key, its statics
 * build it.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Connection, Method, Protocol } from "@lifeline/kernel"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 *
 * class Calc extends Connection.Service<Calc>()("app/Calc", { protocol: Protocol.make({ calls: [Add] }) }) {}
 *
 * const protocol = Calc.protocol
 * const sum = Effect.flatMap(Calc.client, (client) => client.add([1, 2])) // Effect<number, ..., Calc>
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Service<Self, Id extends string, Serves extends Method.Any, Calls extends Method.Any>
  extends Context.ServiceClass<Self, Id, Connection<Serves, Calls>>
{
  readonly protocol: Protocol.Protocol<Serves, Calls>
  /** {@link layer} for this service and its protocol. */
  readonly layer: <R = never, E = never>(
    options: Omit<LayerOptions<Serves, Calls, R, E>, "protocol">
  ) => Layer.Layer<Self, LayerError<E>, Transport.Transport | Exclude<R, Scope.Scope>>
  /** {@link layerConfig} for this service and its protocol. */
  readonly layerConfig: <R = never, E = never>(
    options: Omit<LayerConfigOptions<Serves, Calls, R, E>, "protocol">
  ) => Layer.Layer<Self, LayerError<E>, Transport.Transport | Exclude<R, Scope.Scope>>
  /** The methods the protocol calls, as `Protocol.client` makes them, on the connection of this service. */
  readonly client: Effect.Effect<Protocol.Client<Calls>, never, Self>
}

/**
 * Declares a connection service for a protocol, as `Context.Service` declares any service, with `layer` and
 * `layerConfig` over the `Transport` service and `client` for typed calls. In a test, provide
 * `TestTransport.layerServe(protocol, handlers)` as the `Transport`.
 *
 * @example
 * ```ts
 * import { Context, Effect, Layer, Schema } from "effect"
 * import { Connection, Method, Peer, Protocol } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 * const CalcProtocol = Protocol.make({ calls: [Add] })
 *
 * class CalcConnection extends Connection.Service<CalcConnection>()("app/CalcConnection", {
 *   protocol: CalcProtocol
 * }) {}
 *
 * class Calculator extends Context.Service<Calculator, {
 *   readonly add: (a: number, b: number) => Effect.Effect<number, Peer.CallError>
 * }>()("app/Calculator") {
 *   static readonly layer = Layer.effect(
 *     Calculator,
 *     Effect.map(CalcConnection.client, (client) => ({ add: (a: number, b: number) => client.add([a, b]) }))
 *   ).pipe(Layer.provide(CalcConnection.layer({ handlers: {} })))
 * }
 *
 * // In a test: the far end serves the protocol in memory.
 * const CalculatorTest = Calculator.layer.pipe(
 *   Layer.provide(TestTransport.layerServe(Protocol.flip(CalcProtocol), { add: ([a, b]) => Effect.succeed(a + b) }))
 * )
 *
 * const program = Effect.gen(function*() {
 *   const calculator = yield* Calculator
 *   return yield* calculator.add(1, 2) // 3
 * }).pipe(Effect.provide(CalculatorTest))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const Service: <Self>() => <const Id extends string, Serves extends Method.Any, Calls extends Method.Any>(
  id: Id,
  options: { readonly protocol: Protocol.Protocol<Serves, Calls> }
) => Service<Self, Id, Serves, Calls> = internalLayer.Service
