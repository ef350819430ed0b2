/**
 * One trace across the process boundary, as a scenario the trace test asserts and `scripts/trace-waterfall.ts` draws
 * (docs/tracing.md): a host calls `server/work` on a server, whose handler calls `host/lookup` back on the host
 * before it answers. Two kernel peers over a `TestTransport` pair, each side with a tracer of its own that keeps the
 * spans it makes in memory (an in-memory exporter), the protocol MCP's (trace context on by default). Everything runs
 * on the `TestClock`: each message takes 1 ms on its link and the handlers' work is given in milliseconds, so every run
 * gives the same spans and the same times. Span ids are numbered per side instead of random, for the same reason.
 */
import { Cancellation, Method, Peer, Protocol } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Fiber, Option, Schema, Tracer } from "effect"
import { TestClock } from "effect/testing"

/** The same trace id as W3C Trace Context's own examples. */
export const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"

const Work = Method.request("server/work", { params: Schema.Struct({ task: Schema.String }), result: Schema.String })
const Lookup = Method.request("host/lookup", { params: Schema.Struct({ key: Schema.String }), result: Schema.String })

/** The host's view: it serves `host/lookup` and calls `server/work`. MCP's cancellation makes it MCP's profile. */
export const HostProtocol = Protocol.make({ serves: [Lookup], calls: [Work], cancellation: Cancellation.mcp })

/**
 * A span as the in-memory exporter keeps it: which side made it, its parent as that side saw it (`external`: a parent
 * that arrived in `_meta.traceparent`), and its times in milliseconds since the scenario began.
 */
export interface Recorded {
  readonly side: "host" | "server"
  readonly name: string
  readonly kind: Tracer.SpanKind
  readonly traceId: string
  readonly spanId: string
  readonly parent: { readonly spanId: string; readonly traceId: string; readonly external: boolean } | undefined
  readonly startMillis: number
  readonly endMillis: number
}

/** A tracer that keeps every span it makes: the in-memory exporter. Root spans get `traceId`, span ids a counter. */
const collector = (side: "host" | "server", prefix: string) => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span(options) {
      const span = new Tracer.NativeSpan(options)
      span._spanId = `${prefix}${String(spans.length + 1).padStart(16 - prefix.length, "0")}`
      if (Option.isNone(options.parent)) span._traceId = traceId
      spans.push(span)
      return span
    }
  })
  const recorded = (): Array<Recorded> =>
    spans.map((span) => {
      const parent = Option.getOrUndefined(span.parent)
      const end = span.status._tag === "Ended" ? span.status.endTime : span.startTime
      return {
        side,
        name: span.name,
        kind: span.kind,
        traceId: span.traceId,
        spanId: span.spanId,
        parent: parent === undefined
          ? undefined
          : { spanId: parent.spanId, traceId: parent.traceId, external: parent._tag === "ExternalSpan" },
        startMillis: Number(span.startTime / 1_000_000n),
        endMillis: Number(end / 1_000_000n)
      }
    })
  return { tracer, recorded }
}

/** How long each handler works, in milliseconds on the TestClock, before and after its own call. */
export const timings = { link: 1, workBefore: 2, lookup: 3, workAfter: 2 } as const

/**
 * Runs the scenario and returns what the host got and every span of both sides, in the order they started. Drives the
 * TestClock itself, 1 ms at a time, until the host's call is answered.
 */
export const run: Effect.Effect<{ readonly answer: string; readonly spans: ReadonlyArray<Recorded> }> = Effect.gen(
  function*() {
    const host = collector("host", "a")
    const server = collector("server", "b")
    const pair = yield* TestTransport.makePair()
    yield* pair.leftToRight.delay(`${timings.link} millis`)
    yield* pair.rightToLeft.delay(`${timings.link} millis`)

    const hostPeer = yield* Peer.make({
      protocol: HostProtocol,
      transport: pair.left,
      handlers: {
        "host/lookup": ({ key }) => Effect.as(Effect.sleep(`${timings.lookup} millis`), `value of ${key}`)
      }
    }).pipe(Effect.withTracer(host.tracer))
    const serverPeer: Peer.Peer<typeof Work, typeof Lookup> = yield* Peer.make({
      protocol: Protocol.flip(HostProtocol),
      transport: pair.right,
      handlers: {
        "server/work": ({ task }) =>
          Effect.gen(function*() {
            yield* Effect.sleep(`${timings.workBefore} millis`)
            const found = yield* Effect.orDie(serverPeer.call(Lookup, { key: task }))
            yield* Effect.sleep(`${timings.workAfter} millis`)
            return `${task}: ${found}`
          })
      }
    }).pipe(Effect.withTracer(server.tracer))

    const call = yield* hostPeer.call(Work, { task: "report" }).pipe(
      Effect.withSpan("host: answer a prompt", {}, { captureStackTrace: false }),
      Effect.withTracer(host.tracer),
      Effect.forkChild
    )
    while (call.pollUnsafe() === undefined) yield* TestClock.adjust("1 millis")
    const answer = yield* Effect.orDie(Fiber.join(call))
    const spans = [...host.recorded(), ...server.recorded()].sort((a, b) => a.startMillis - b.startMillis)
    return { answer, spans }
  }
).pipe(Effect.scoped, Effect.provide(TestClock.layer()))
