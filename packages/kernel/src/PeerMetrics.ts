/**
 * A peer's traffic as Effect metrics. Two tiers: the peer's own counters, "observed" (read from its stats when the
 * registry is read, so they cost nothing per message); and, with `perMethod`, series per `rpc.method`, updated per call.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import type * as Scope from "effect/Scope"
import * as State from "./internal/peer/state.js"
import type * as Method from "./Method.js"
import type * as Peer from "./Peer.js"

/**
 * Outbound requests sent (the peer's `requestsSent`). Observed.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * // Requests sent, one series per connection (`lifeline.peer`).
 * const series = Effect.map(Metric.snapshot, (all) => all.filter((s) => s.id === PeerMetrics.calls.id))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const calls: Metric.Counter<number> = Metric.counter("lifeline.calls", {
  description: "Outbound JSON-RPC requests sent"
})

/**
 * Outbound calls that got no answer (`timedOut + failedByDisconnect`; error responses are answers). Observed.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * // Calls that got no answer, per connection.
 * const series = Effect.map(Metric.snapshot, (all) => all.filter((s) => s.id === PeerMetrics.failures.id))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const failures: Metric.Counter<number> = Metric.counter("lifeline.failures", {
  description: "Outbound JSON-RPC calls that got no answer (timed out or disconnected)"
})

/**
 * Outbound calls waiting for their answer (`pendingOutbound`). Observed.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * // Calls waiting for their answer now, per connection.
 * const series = Effect.map(Metric.snapshot, (all) => all.filter((s) => s.id === PeerMetrics.pending.id))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const pending: Metric.Gauge<number> = Metric.gauge("lifeline.pending", {
  description: "Outbound JSON-RPC calls waiting for an answer"
})

/**
 * Inbound requests received (`requestsReceived`). Observed.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * // Requests received, per connection.
 * const series = Effect.map(Metric.snapshot, (all) => all.filter((s) => s.id === PeerMetrics.served.id))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const served: Metric.Counter<number> = Metric.counter("lifeline.served", {
  description: "Inbound JSON-RPC requests received"
})

/**
 * Inbound requests and notifications whose handler is running (`activeInbound`). Observed.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * // Handlers running now, per connection.
 * const series = Effect.map(Metric.snapshot, (all) => all.filter((s) => s.id === PeerMetrics.active.id))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const active: Metric.Gauge<number> = Metric.gauge("lifeline.active", {
  description: "Inbound JSON-RPC handlers running"
})

/**
 * Answers to the other side's requests waiting to be written (`pendingAnswers`). Observed.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * // Answers the other side has not read yet, per connection.
 * const series = Effect.map(Metric.snapshot, (all) => all.filter((s) => s.id === PeerMetrics.pendingAnswers.id))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const pendingAnswers: Metric.Gauge<number> = Metric.gauge("lifeline.answers.pending", {
  description: "Answers to inbound JSON-RPC requests waiting to be written"
})

/**
 * Times the reader held a request because answers waiting to be written were at their bound (`readsHeld`). Observed.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * // Holds of the reader, per connection.
 * const series = Effect.map(Metric.snapshot, (all) => all.filter((s) => s.id === PeerMetrics.readsHeld.id))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const readsHeld: Metric.Counter<number> = Metric.counter("lifeline.reads.held", {
  description: "Times reading stopped because answers waiting to be written were at their bound"
})

/**
 * Connections ended as unresponsive (`unresponsive`, 0 or 1 per connection). Observed.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * // 1 for each connection closed because the other side did not read.
 * const series = Effect.map(Metric.snapshot, (all) => all.filter((s) => s.id === PeerMetrics.unresponsive.id))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const unresponsive: Metric.Counter<number> = Metric.counter("lifeline.unresponsive", {
  description: "Connections closed because the other side did not read its answers within stallTimeout"
})

/**
 * Inbound W3C trace context values ignored as invalid (`traceContextInvalid`). Observed.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * // Invalid trace context the other side sent, per connection.
 * const series = Effect.map(Metric.snapshot, (all) => all.filter((s) => s.id === PeerMetrics.traceContextInvalid.id))
 * ```
 *
 * @since 0.3.0
 * @category models
 */
export const traceContextInvalid: Metric.Counter<number> = Metric.counter("lifeline.trace_context.invalid", {
  description: "Inbound W3C trace context values in params._meta ignored as invalid"
})

/**
 * Per method, outbound calls made through Effect, counted when they end. Only with `perMethod`.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * // Calls per method (`rpc.method`), with `perMethod`.
 * const series = Effect.map(Metric.snapshot, (all) => all.filter((s) => s.id === PeerMetrics.methodCalls.id))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const methodCalls: Metric.Counter<number> = Metric.counter("lifeline.rpc.calls", {
  description: "Outbound JSON-RPC calls, per method"
})

/**
 * Per method, outbound calls that failed (an error response included). Only with `perMethod`.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * // Failed calls per method, with `perMethod`.
 * const series = Effect.map(Metric.snapshot, (all) => all.filter((s) => s.id === PeerMetrics.methodFailures.id))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const methodFailures: Metric.Counter<number> = Metric.counter("lifeline.rpc.failures", {
  description: "Outbound JSON-RPC calls that failed, per method"
})

/**
 * The histogram's boundaries in milliseconds: 0.05 ms to about 26 s, doubling.
 *
 * @example
 * ```ts
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * const first = PeerMetrics.durationBoundaries[0] // 0.05 ms
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const durationBoundaries: ReadonlyArray<number> = Metric.exponentialBoundaries({
  start: 0.05,
  factor: 2,
  count: 20
})

/**
 * Per method, how long outbound calls took, in milliseconds on the `Clock`. Only with `perMethod`.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * // Call durations per method, in milliseconds, with `perMethod`.
 * const series = Effect.map(Metric.snapshot, (all) => all.filter((s) => s.id === PeerMetrics.methodDuration.id))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const methodDuration: Metric.Histogram<number> = Metric.histogram("lifeline.rpc.duration", {
  description: "Duration of outbound JSON-RPC calls in milliseconds, per method",
  boundaries: durationBoundaries
})

/**
 * @example
 * ```ts
 * import { Connection, Protocol } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/testing"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const { left } = yield* TestTransport.makePair()
 *   return yield* Connection.make({
 *     protocol: Protocol.make({}),
 *     transport: left,
 *     handlers: {},
 *     metrics: { name: "language-server", perMethod: true }
 *   })
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * The `lifeline.peer` attribute of every series. Default `connection-<n>`, unique in the process: name the peers an
   * exporter should tell apart across restarts.
   */
  readonly name?: string | undefined
  /** Per-method series: three metric updates and two Clock reads per Effect call. Default false. */
  readonly perMethod?: boolean | undefined
}

let unnamed = 0

/**
 * The `lifeline.peer` name `options` gives, or the next `connection-<n>`.
 *
 * @example
 * ```ts
 * import { PeerMetrics } from "@lifeline/kernel"
 *
 * const named = PeerMetrics.nameOf({ name: "worker" }) // "worker"
 * const unnamed = PeerMetrics.nameOf(undefined) // "connection-1", "connection-2", ...
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const nameOf = (options: Options | undefined): string => options?.name ?? `connection-${++unnamed}`

/**
 * Registers the observed series of `peer` (attribute `lifeline.peer`) for the life of the current Scope.
 * `Connection.make` calls it; call it for a `Peer.make` peer.
 *
 * @example
 * ```ts
 * import { Effect, Metric } from "effect"
 * import { Peer, PeerMetrics, Protocol } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const program = Effect.gen(function*() {
 *   const { left } = yield* TestTransport.makePair()
 *   const peer = yield* Peer.make({ protocol: Protocol.make({}), transport: left, handlers: {} })
 *   yield* PeerMetrics.register(peer, "worker")
 *   return yield* Metric.snapshot // lifeline.calls{lifeline.peer="worker"} and the others
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const register = (
  peer: Peer.Peer<any, any>,
  name: string
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.contextWith((context: Context.Context<never>) => {
    const attributes = { "lifeline.peer": name }
    const observe = <S>(metric: Metric.Metric<number, S>, get: (stats: Peer.Stats) => S) =>
      Metric.registerUnsafe(Metric.withAttributes(metric, attributes), context, {
        get: () => get(peer.unsafeStats()),
        update: () => {},
        modify: () => {}
      })
    const counter = (read: (stats: Peer.Stats) => number) => (stats: Peer.Stats) => ({
      count: read(stats),
      incremental: true
    })
    const gauge = (read: (stats: Peer.Stats) => number) => (stats: Peer.Stats) => ({ value: read(stats) })
    const registrations = [
      observe(calls, counter((stats) => stats.requestsSent)),
      observe(failures, counter((stats) => stats.timedOut + stats.failedByDisconnect)),
      observe(pending, gauge((stats) => stats.pendingOutbound)),
      observe(served, counter((stats) => stats.requestsReceived)),
      observe(active, gauge((stats) => stats.activeInbound)),
      observe(pendingAnswers, gauge((stats) => stats.pendingAnswers)),
      observe(readsHeld, counter((stats) => stats.readsHeld)),
      observe(unresponsive, counter((stats) => stats.unresponsive)),
      observe(traceContextInvalid, counter((stats) => stats.traceContextInvalid))
    ]
    return Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const registration of registrations) registration.remove()
      })
    )
  })

interface MethodSeries {
  readonly calls: Metric.Metric<number, unknown>
  readonly failures: Metric.Metric<number, unknown>
  readonly duration: Metric.Metric<number, unknown>
}

/**
 * `peer` with its Effect calls counted and timed per method (attributes `lifeline.peer`, `rpc.method`); its
 * `PromiseClient` calls are not counted. `Connection.make` uses it when `metrics.perMethod` is set.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Method, Peer, PeerMetrics, Protocol } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 * const Server = Protocol.make({ serves: [Add] })
 *
 * const program = Effect.gen(function*() {
 *   const { left, right } = yield* TestTransport.makePair()
 *   yield* Peer.make({ protocol: Server, transport: left, handlers: { add: ([a, b]) => Effect.succeed(a + b) } })
 *   const raw = yield* Peer.make({ protocol: Protocol.flip(Server), transport: right, handlers: {} })
 *   const peer = yield* PeerMetrics.instrument(raw, "calculator")
 *   return yield* peer.call(Add, [1, 2]) // lifeline.rpc.calls{rpc.method="add"} is now 1
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const instrument = <Serves extends Method.Any, Calls extends Method.Any>(
  peer: Peer.Peer<Serves, Calls>,
  name: string
): Effect.Effect<Peer.Peer<Serves, Calls>> =>
  Effect.contextWith((context: Context.Context<never>) => {
    const clock = Context.get(context, Clock.Clock)
    const series = new Map<string, MethodSeries>()
    const seriesOf = (method: string): MethodSeries => {
      let found = series.get(method)
      if (found === undefined) {
        // Attributes given at construction: the series key is computed once, not merged on every update.
        const attributes = { "lifeline.peer": name, "rpc.method": method }
        found = {
          calls: Metric.counter(methodCalls.id, { description: methodCalls.description, attributes }),
          failures: Metric.counter(methodFailures.id, { description: methodFailures.description, attributes }),
          duration: Metric.histogram(methodDuration.id, {
            description: methodDuration.description,
            attributes,
            boundaries: durationBoundaries
          })
        }
        // A method that never failed shows 0 failures rather than no series.
        found.failures.updateUnsafe(0, context)
        series.set(method, found)
      }
      return found
    }
    const measured = <A, E>(method: string, call: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.suspend(() => {
        const metrics = seriesOf(method)
        const start = clock.currentTimeNanosUnsafe()
        return Effect.onExitPrimitive(call, (exit) => {
          metrics.calls.updateUnsafe(1, context)
          if (Exit.isFailure(exit)) metrics.failures.updateUnsafe(1, context)
          metrics.duration.updateUnsafe(Number(clock.currentTimeNanosUnsafe() - start) / 1_000_000, context)
          return undefined
        })
      })
    const instrumented: Peer.Peer<Serves, Calls> = {
      ...peer,
      call: (method, params, options) => measured(method.name, peer.call(method, params, options)),
      callUntyped: (method, params, options) => measured(method, peer.callUntyped(method, params, options))
    }
    // `PromiseClient` finds the peer's engine by the peer object: the instrumented one is the same engine.
    const state = State.of(peer)
    if (state !== undefined) State.register(instrumented, state)
    return Effect.succeed(instrumented)
  })
