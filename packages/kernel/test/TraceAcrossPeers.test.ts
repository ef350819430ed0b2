/**
 * One trace across the process boundary: host → server → host over two kernel peers, each side with an in-memory
 * exporter (`traceScenario.ts`, the scenario docs/tracing.md's waterfall is drawn from). The parent of each side's
 * `rpc.serve` span is the other side's `rpc.call` span, known only by the `_meta.traceparent` it sent.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { run, timings, traceId } from "./traceScenario.js"

describe("Trace context across peers", () => {
  it.effect("host → server → host: one trace id, and each rpc.serve is the child of the other side's rpc.call", () =>
    Effect.gen(function*() {
      const { answer, spans } = yield* run
      assert.strictEqual(answer, "report: value of report")
      assert.deepStrictEqual(
        spans.map((span) => `${span.side} ${span.kind} ${span.name}`),
        [
          "host internal host: answer a prompt",
          "host client rpc.call server/work",
          "server server rpc.serve server/work",
          "server client rpc.call host/lookup",
          "host server rpc.serve host/lookup"
        ]
      )
      const [root, hostCall, serverServe, serverCall, hostServe] = spans
      for (const span of spans) assert.strictEqual(span.traceId, traceId, span.name)
      assert.isUndefined(root!.parent)
      // Within a side, Effect links the spans itself; across the wire, only the traceparent did.
      assert.deepStrictEqual(hostCall!.parent, { spanId: root!.spanId, traceId, external: false })
      assert.deepStrictEqual(serverServe!.parent, { spanId: hostCall!.spanId, traceId, external: true })
      assert.deepStrictEqual(serverCall!.parent, { spanId: serverServe!.spanId, traceId, external: false })
      assert.deepStrictEqual(hostServe!.parent, { spanId: serverCall!.spanId, traceId, external: true })
      // The times of a waterfall: each message 1 ms on its link, each handler as long as its work.
      assert.deepStrictEqual(
        spans.map((span) => [span.startMillis, span.endMillis]),
        [
          [0, 11],
          [0, 11],
          [timings.link, 10],
          [3, 8],
          [4, 4 + timings.lookup]
        ]
      )
    }))
})
