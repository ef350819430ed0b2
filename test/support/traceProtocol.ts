/**
 * The protocol of the trace test across two real processes (`test/TraceAcrossProcesses.test.ts`, fixture
 * `test/fixtures/trace-server.ts`): the host calls `server/work`, the server's handler calls `host/lookup` back before it
 * answers, and `trace/spans` hands the host what the server's in-memory exporter kept. MCP's cancellation makes it
 * MCP's profile, so W3C trace context travels in `params._meta` by default.
 *
 * @since 0.3.0
 */
import * as Cancellation from "@lifeline/kernel/Cancellation"
import * as Method from "@lifeline/kernel/Method"
import * as Protocol from "@lifeline/kernel/Protocol"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Tracer from "effect/Tracer"

export const Work = Method.request("server/work", {
  params: Schema.Struct({ task: Schema.String }),
  result: Schema.String
})
export const Lookup = Method.request("host/lookup", {
  params: Schema.Struct({ key: Schema.String }),
  result: Schema.String
})

/** A span as an in-memory exporter keeps it; `parent.external`: a parent that arrived in `_meta.traceparent`. */
export const Recorded = Schema.Struct({
  name: Schema.String,
  kind: Schema.String,
  traceId: Schema.String,
  spanId: Schema.String,
  parent: Schema.NullOr(Schema.Struct({ spanId: Schema.String, traceId: Schema.String, external: Schema.Boolean }))
})
export type Recorded = typeof Recorded.Type

export const Spans = Method.request("trace/spans", { params: Schema.Struct({}), result: Schema.Array(Recorded) })

/** The host's view; the server's is its flip. */
export const Host = Protocol.make({ serves: [Lookup], calls: [Work, Spans], cancellation: Cancellation.mcp })

/** A tracer that keeps every span it makes, in memory: the exporter each side of the test installs. */
export const collector = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span(options) {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    }
  })
  const recorded = (): Array<Recorded> =>
    spans.map((span) => {
      const parent = Option.getOrUndefined(span.parent)
      return {
        name: span.name,
        kind: span.kind,
        traceId: span.traceId,
        spanId: span.spanId,
        parent: parent === undefined
          ? null
          : { spanId: parent.spanId, traceId: parent.traceId, external: parent._tag === "ExternalSpan" }
      }
    })
  return { tracer, recorded }
}
