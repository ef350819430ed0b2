/**
 * One trace across a real process boundary: a host (this process) and a server (`test/fixtures/trace-server.ts`, a
 * child over stdio), each with its own in-memory exporter and MCP's profile. The host calls `server/work`; the
 * server's handler calls `host/lookup` back; the server then hands over its spans. Both sides' spans make one trace,
 * and each `rpc.serve` has as its parent the other process's `rpc.call`, known only through `_meta.traceparent`. The
 * same assertions as `packages/kernel/test/TraceAcrossPeers.test.ts`, with real ids and a real pipe.
 */
import { assert, layer } from "@effect/vitest"
import * as Framing from "@lifeline/jsonrpc/Framing"
import { NodeChildProcess } from "@lifeline/node"
import { Effect } from "effect"
import * as Fixtures from "./support/fixtures.js"
import { collector, Host, type Recorded, Spans, Work } from "./support/traceProtocol.js"

layer(Fixtures.layer(["trace-server"]), { excludeTestServices: true, timeout: "60 seconds" })(
  "one trace across two processes",
  (it) => {
    it.effect("host → server → host: one trace id; each rpc.serve the child of the other process's rpc.call", () =>
      Effect.gen(function*() {
        const host = collector()
        const { peer } = yield* NodeChildProcess.makePeer({
          command: yield* Fixtures.command("trace-server"),
          name: "trace-server",
          protocol: Host,
          framing: Framing.ndjson,
          handlers: { "host/lookup": ({ key }) => Effect.succeed(`value of ${key}`) }
        }).pipe(Effect.withTracer(host.tracer))
        const answer = yield* peer.call(Work, { task: "report" }).pipe(
          Effect.withSpan("host: answer a prompt"),
          Effect.withTracer(host.tracer)
        )
        assert.strictEqual(answer, "report: value of report")
        // Outside any span: the server's answer to this is not part of the trace under test.
        const server = (yield* peer.call(Spans, {})).filter((span) => span.name !== "rpc.serve trace/spans")
        const mine = host.recorded()
        const find = (spans: ReadonlyArray<Recorded>, name: string): Recorded => {
          const found = spans.filter((span) => span.name === name)
          assert.strictEqual(found.length, 1, name)
          return found[0]!
        }
        const root = find(mine, "host: answer a prompt")
        const hostCall = find(mine, "rpc.call server/work")
        const serverServe = find(server, "rpc.serve server/work")
        const serverCall = find(server, "rpc.call host/lookup")
        const hostServe = find(mine, "rpc.serve host/lookup")
        const traceId = root.traceId
        assert.match(traceId, /^[0-9a-f]{32}$/)
        for (const span of [hostCall, serverServe, serverCall, hostServe]) {
          assert.strictEqual(span.traceId, traceId, span.name)
        }
        assert.deepStrictEqual(
          [hostCall.kind, serverServe.kind, serverCall.kind, hostServe.kind],
          ["client", "server", "client", "server"]
        )
        assert.deepStrictEqual(hostCall.parent, { spanId: root.spanId, traceId, external: false })
        assert.deepStrictEqual(serverServe.parent, { spanId: hostCall.spanId, traceId, external: true })
        assert.deepStrictEqual(serverCall.parent, { spanId: serverServe.spanId, traceId, external: false })
        assert.deepStrictEqual(hostServe.parent, { spanId: serverCall.spanId, traceId, external: true })
      }).pipe(Effect.scoped))
  }
)
