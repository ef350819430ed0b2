/**
 * W3C trace context in `params._meta` (docs/tracing.md): the formats an inbound value must have, what an
 * outbound message gets (and what it never loses), the default per protocol, and what an invalid value costs: nothing
 * but a count and a line that does not repeat it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cancellation, Method, Peer, PeerMetrics, Protocol } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Context, Effect, Logger, Metric, Option, Schema, Tracer } from "effect"
import * as TraceContext from "../src/internal/peer/traceContext.js"
import { makeRaw } from "./utils.js"

const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
const parentId = "00f067aa0ba902b7"
const valid = `00-${trace}-${parentId}-01`

describe("TraceContext formats", () => {
  it("traceparent: version 00, lowercase hex, ids not all zero, nothing more", () => {
    const table: ReadonlyArray<readonly [unknown, boolean, string]> = [
      [valid, true, "the W3C example"],
      [`00-${trace}-${parentId}-00`, true, "not sampled"],
      [`00-${"0".repeat(32)}-${parentId}-01`, false, "all-zero trace id"],
      [`00-${trace}-${"0".repeat(16)}-01`, false, "all-zero parent id"],
      [valid.toUpperCase(), false, "uppercase"],
      [`00-${trace.toUpperCase()}-${parentId}-01`, false, "uppercase trace id"],
      [`ff-${trace}-${parentId}-01`, false, "version ff"],
      [`01-${trace}-${parentId}-01`, false, "a later version (not parsed)"],
      [`00-${trace}-${parentId}-0g`, false, "flags not hex"],
      [`00-${trace}-${parentId}-01-`, false, "one character too many"],
      [`00-${trace}-${parentId}`, false, "no flags"],
      [`00-${trace.slice(1)}0-${parentId}-1`, false, "dashes in the wrong places"],
      [`00_${trace}_${parentId}_01`, false, "not dashes"],
      [valid + "x".repeat(1_000_000), false, "a megabyte long"],
      ["", false, "empty"],
      [42, false, "not a string"],
      [null, false, "null"]
    ]
    for (const [value, ok, what] of table) {
      const parsed = TraceContext.parseTraceparent(value)
      assert.strictEqual(parsed !== undefined, ok, what)
    }
    const parsed = TraceContext.parseTraceparent(valid)!
    assert.deepStrictEqual([parsed.traceId, parsed.spanId, parsed.sampled], [trace, parentId, true])
    assert.isFalse(TraceContext.parseTraceparent(`00-${trace}-${parentId}-00`)!.sampled)
  })

  it("tracestate: key=value members, at most 32 and 512 characters, keys unique", () => {
    const members = (n: number) => Array.from({ length: n }, (_, i) => `k${i}=v`).join(",")
    const table: ReadonlyArray<readonly [unknown, boolean, string]> = [
      ["congo=t61rcWkgMzE", true, "one member"],
      ["rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", true, "two members"],
      ["rojo=1 , ,congo=2", true, "optional white space and an empty member"],
      ["tenant1@vendor=x", true, "a multi-tenant key"],
      ["a-b_c*d/e=with space inside", true, "key characters, a space inside a value"],
      [members(32), true, "32 members"],
      [members(33), false, "33 members"],
      [`k=${"v".repeat(257)}`, false, "a value over 256 characters"],
      [`k=${"v".repeat(256)}`, true, "a value of 256 characters"],
      [`${"a".repeat(250)}=1,${"b".repeat(250)}=2`, true, "504 characters"],
      [`${"a".repeat(255)}=1,${"b".repeat(254)}=2`, false, "513 characters"],
      ["Rojo=1", false, "an uppercase key"],
      ["1abc=1", false, "a simple key starting with a digit"],
      ["rojo=1,rojo=2", false, "a key twice"],
      ["rojo=a=b", false, "= in a value"],
      ["rojo=trailing ", true, "a trailing space is optional white space"],
      ["rojo=", false, "an empty value"],
      ["rojo", false, "no value"],
      ["rojo=1\n", false, "a line break"],
      ["rojo=\u00e9", false, "not ASCII"],
      [1, false, "not a string"]
    ]
    for (const [value, ok, what] of table) assert.strictEqual(TraceContext.isTracestate(value), ok, what)
  })

  it("baggage: key=value members with properties, at most 180 and 8192 bytes", () => {
    const members = (n: number) => Array.from({ length: n }, (_, i) => `k${i}=v`).join(",")
    const table: ReadonlyArray<readonly [unknown, boolean, string]> = [
      ["userId=alice", true, "one member"],
      ["userId=alice, serverNode = DF%2028,isProduction=false", true, "white space and percent-encoding"],
      ["key1=value1;property1;property2=x", true, "properties"],
      ["k=", true, "an empty value"],
      [members(180), true, "180 members"],
      [members(181), false, "181 members"],
      [`k=${"v".repeat(8190)}`, true, "8192 bytes"],
      [`k=${"v".repeat(8191)}`, false, "8193 bytes"],
      ["k=a b", false, "a space in a value"],
      ["k=a\"b", false, "a quote in a value"],
      ["k=a,", false, "an empty member"],
      ["=v", false, "no key"],
      ["k(1)=v", false, "a key that is not a token"],
      ["k=\u00e9", false, "not ASCII"],
      [{}, false, "not a string"]
    ]
    for (const [value, ok, what] of table) assert.strictEqual(TraceContext.isBaggage(value), ok, what)
  })

  it("inbound: no _meta.traceparent costs nothing; an invalid one drops the context; tracestate and baggage alone", () => {
    for (const params of [undefined, null, [1], {}, { _meta: null }, { _meta: "x" }, { _meta: { progressToken: 1 } }]) {
      assert.deepStrictEqual(TraceContext.inbound(params as any), { parent: undefined, invalid: 0 })
    }
    const plain = TraceContext.inbound({ _meta: { traceparent: valid } })
    assert.deepStrictEqual([plain.parent?.traceId, plain.parent?.spanId, plain.invalid], [trace, parentId, 0])
    assert.deepStrictEqual(
      TraceContext.inbound({ _meta: { traceparent: valid.toUpperCase(), tracestate: "a=1" } }),
      { parent: undefined, invalid: 1 }
    )
    const kept = TraceContext.inbound({ _meta: { traceparent: valid, tracestate: "a=1", baggage: "b=2" } })
    assert.strictEqual(kept.invalid, 0)
    assert.deepStrictEqual(Context.get(kept.parent!.annotations, TraceContext.Carried), {
      tracestate: "a=1",
      baggage: "b=2"
    })
    const dropped = TraceContext.inbound({ _meta: { traceparent: valid, tracestate: "A=1", baggage: "b=\u00e9" } })
    assert.strictEqual(dropped.invalid, 2)
    assert.strictEqual(dropped.parent?.spanId, parentId)
    assert.isUndefined(Context.get(dropped.parent!.annotations, TraceContext.Carried))
  })
})

describe("TraceContext injection", () => {
  const span = Tracer.externalSpan({ traceId: trace, spanId: parentId })
  const traceparent = valid

  it("no span, array params, a _meta that is not an object, a traceparent already set: the params as they were", () => {
    const cases: ReadonlyArray<any> = [
      [1, 2],
      { _meta: "x" },
      { _meta: [1] },
      { _meta: null },
      { _meta: { traceparent: "set by the caller" } }
    ]
    for (const params of cases) assert.strictEqual(TraceContext.inject(span, params), params)
    const params = { a: 1 }
    assert.strictEqual(TraceContext.inject(undefined, params), params)
  })

  it("adds _meta.traceparent next to what the caller put in _meta, without changing the caller's object", () => {
    const params = { name: "x", _meta: { progressToken: 7 } }
    assert.deepStrictEqual(TraceContext.inject(span, params), {
      name: "x",
      _meta: { progressToken: 7, traceparent }
    })
    assert.deepStrictEqual(params, { name: "x", _meta: { progressToken: 7 } })
    assert.deepStrictEqual(TraceContext.inject(span, undefined), { _meta: { traceparent } })
    assert.deepStrictEqual(TraceContext.inject(span, null), { _meta: { traceparent } })
    const unsampled = Tracer.externalSpan({ traceId: trace, spanId: parentId, sampled: false })
    assert.deepStrictEqual(TraceContext.inject(unsampled, {}), { _meta: { traceparent: `00-${trace}-${parentId}-00` } })
  })

  it("skips spans that disable propagation, and ids a traceparent cannot carry", () => {
    const disabled = Tracer.externalSpan({
      traceId: trace,
      spanId: parentId,
      annotations: Context.make(Tracer.DisablePropagation, true)
    })
    assert.deepStrictEqual(TraceContext.inject(disabled, { a: 1 }), { a: 1 })
    for (const [traceId, spanId] of [["trace-1", parentId], [trace, "span-1"], ["0".repeat(32), parentId]]) {
      assert.deepStrictEqual(
        TraceContext.inject(Tracer.externalSpan({ traceId, spanId }), {}),
        {},
        `${traceId} ${spanId}`
      )
    }
    // A 64-bit (B3) trace id is widened to 128 bits, as W3C says.
    assert.deepStrictEqual(
      TraceContext.inject(Tracer.externalSpan({ traceId: trace.slice(16), spanId: parentId }), {}),
      { _meta: { traceparent: `00-${"0".repeat(16)}${trace.slice(16)}-${parentId}-01` } }
    )
  })

  it("carries on the tracestate and baggage its trace arrived with, under a span of its own; not into another trace", () => {
    const arrived = TraceContext.inbound({ _meta: { traceparent: valid, tracestate: "a=1", baggage: "b=2" } }).parent!
    const child = new Tracer.NativeSpan({
      name: "child",
      parent: Option.some(arrived),
      annotations: Context.empty(),
      links: [],
      startTime: 0n,
      kind: "internal",
      sampled: true
    })
    assert.deepStrictEqual(TraceContext.inject(child, {}), {
      _meta: { traceparent: `00-${trace}-${child.spanId}-01`, tracestate: "a=1", baggage: "b=2" }
    })
    const elsewhere = new Tracer.NativeSpan({ ...child, name: "other", parent: Option.some(arrived) })
    elsewhere._traceId = "1".repeat(32)
    assert.deepStrictEqual(TraceContext.inject(elsewhere, {}), {
      _meta: { traceparent: `00-${"1".repeat(32)}-${elsewhere.spanId}-01` }
    })
    // The caller's own tracestate wins.
    assert.deepStrictEqual(TraceContext.inject(child, { _meta: { tracestate: "mine=1" } }), {
      _meta: { tracestate: "mine=1", traceparent: `00-${trace}-${child.spanId}-01`, baggage: "b=2" }
    })
  })
})

const Echo = Method.request("echo", { params: Schema.Struct({ text: Schema.String }), result: Schema.String })
const Note = Method.notification("note", { params: Schema.Struct({ text: Schema.String }) })

describe("TraceContext in a peer", () => {
  const client = (
    protocol: Protocol.Protocol<never, typeof Echo | typeof Note>,
    traceContext?: Protocol.TraceContext
  ) =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      const raw = yield* makeRaw(pair.right)
      const peer = yield* Peer.make({ protocol, transport: pair.left, handlers: {}, traceContext })
      return { peer, raw }
    })
  const mcp = Protocol.make({ calls: [Echo, Note], cancellation: Cancellation.mcp })
  const plain = Protocol.make({ calls: [Echo, Note] })

  it("the default: on for MCP, off for every other protocol; the Peer option overrides it", () => {
    assert.strictEqual(mcp.traceContext, "propagate")
    assert.strictEqual(Protocol.flip(mcp).traceContext, "propagate")
    assert.strictEqual(plain.traceContext, "off")
    assert.strictEqual(Protocol.make({ cancellation: Cancellation.lsp }).traceContext, "off")
    assert.strictEqual(Protocol.make({ traceContext: "propagate" }).traceContext, "propagate")
  })

  it.effect("MCP: a call and a notification made in a span carry it; made outside one, their params are untouched", () =>
    Effect.gen(function*() {
      const { peer, raw } = yield* client(mcp)
      const span = yield* Effect.gen(function*() {
        yield* Effect.forkChild(peer.call(Echo, { text: "hi" }))
        yield* peer.notify(Note, { text: "n" })
        return yield* Effect.currentSpan
      }).pipe(Effect.withSpan("caller"))
      const traceparent = `00-${span.traceId}-${span.spanId}-01`
      const sent = [yield* raw.next, yield* raw.next].sort((a, b) => a.method.localeCompare(b.method))
      assert.deepStrictEqual(sent.map((message) => message.params), [
        { text: "hi", _meta: { traceparent } },
        { text: "n", _meta: { traceparent } }
      ])

      yield* Effect.forkChild(peer.callUntyped("echo", { text: "bare" }))
      assert.deepStrictEqual((yield* raw.next).params, { text: "bare" })
      yield* Effect.forkChild(peer.callUntyped("echo", ["array"]).pipe(Effect.withSpan("s")))
      assert.deepStrictEqual((yield* raw.next).params, ["array"])
      const own = { _meta: { traceparent: valid } }
      yield* Effect.forkChild(peer.callUntyped("echo", own).pipe(Effect.withSpan("s")))
      assert.deepStrictEqual((yield* raw.next).params, own)
    }))

  it.effect("off: nothing is added, in a span or not; propagate turns it on for any protocol", () =>
    Effect.gen(function*() {
      const off = yield* client(plain)
      yield* Effect.forkChild(off.peer.call(Echo, { text: "hi" }).pipe(Effect.withSpan("s")))
      assert.deepStrictEqual((yield* off.raw.next).params, { text: "hi" })
      const mcpOff = yield* client(mcp, "off")
      yield* Effect.forkChild(mcpOff.peer.call(Echo, { text: "hi" }).pipe(Effect.withSpan("s")))
      assert.deepStrictEqual((yield* mcpOff.raw.next).params, { text: "hi" })
      const on = yield* client(plain, "propagate")
      yield* Effect.forkChild(on.peer.call(Echo, { text: "hi" }).pipe(Effect.withSpan("s")))
      assert.match((yield* on.raw.next).params._meta.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
    }))

  const server = Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    const raw = yield* makeRaw(pair.right)
    const parents: Array<Tracer.AnySpan | undefined> = []
    const protocol = Protocol.make({ serves: [Echo], calls: [Echo], cancellation: Cancellation.mcp })
    const peer: Peer.Peer<typeof Echo, typeof Echo> = yield* Peer.make({
      protocol,
      transport: pair.left,
      handlers: {
        echo: ({ text }) =>
          Effect.gen(function*() {
            parents.push(Option.getOrUndefined(yield* Effect.option(Effect.currentParentSpan)))
            // The handler calls back, as an MCP server asking its client for something.
            if (text === "call back") yield* Effect.forkDetach(peer.call(Echo, { text: "from the handler" }))
            return text
          })
      }
    })
    yield* PeerMetrics.register(peer, "traced")
    return { peer, raw, parents }
  })
  const request = (id: number, text: string, _meta?: unknown) => ({
    jsonrpc: "2.0",
    id,
    method: "echo",
    params: _meta === undefined ? { text } : { text, _meta }
  })

  it.effect("inbound: a valid traceparent is the handler's parent, and its calls carry the trace and its tracestate", () =>
    Effect.gen(function*() {
      const { parents, peer, raw } = yield* server
      yield* raw.send(request(1, "call back", { traceparent: valid, tracestate: "congo=t61rcWkgMzE" }))
      // The handler's own call and its answer, in either order.
      const [callBack, answer] = [yield* raw.next, yield* raw.next].sort((a, b) =>
        (a.method ? 0 : 1) - (b.method ? 0 : 1)
      )
      assert.strictEqual(callBack.method, "echo")
      assert.deepStrictEqual(answer, { jsonrpc: "2.0", id: 1, result: "call back" })
      const sent = callBack.params._meta
      assert.match(sent.traceparent, new RegExp(`^00-${trace}-[0-9a-f]{16}-01$`))
      assert.strictEqual(sent.tracestate, "congo=t61rcWkgMzE")
      const parent = parents[0]!
      assert.deepStrictEqual([parent._tag, parent.traceId, parent.spanId], ["ExternalSpan", trace, parentId])
      assert.strictEqual((yield* peer.stats).traceContextInvalid, 0)
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map())))

  it.effect("inbound: each invalid value is ignored and counted, the request served, and the value never logged", () =>
    Effect.gen(function*() {
      const warnings: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (logLevel === "Warn") warnings.push(JSON.stringify(message))
      })
      yield* Effect.gen(function*() {
        const { parents, peer, raw } = yield* server
        const hostile = `00-${trace.toUpperCase()}-${parentId}-01\u001b[2J`
        yield* raw.send(request(1, "a", { traceparent: hostile }))
        yield* raw.send(request(2, "b", { traceparent: `ff-${trace}-${parentId}-01` }))
        yield* raw.send(request(3, "c", { traceparent: valid, tracestate: "x".repeat(600), baggage: "\u0000" }))
        yield* raw.send(request(4, "d", { tracestate: "k=v" }))
        yield* raw.send(request(5, "e"))
        for (const id of [1, 2, 3, 4, 5]) assert.strictEqual((yield* raw.next).id, id)
        assert.deepStrictEqual(parents.map((p) => p?._tag), [
          undefined,
          undefined,
          "ExternalSpan",
          undefined,
          undefined
        ])
        assert.strictEqual((yield* peer.stats).traceContextInvalid, 4)
        const snapshot = (yield* Metric.snapshot).find((s) => s.id === PeerMetrics.traceContextInvalid.id)
        assert.strictEqual((snapshot?.state as any).count, 4)
        assert.isAbove(warnings.length, 0)
        for (const line of warnings) {
          assert.notInclude(line, "\\u001b")
          assert.notInclude(line, "xxxxxxxx")
          assert.notInclude(line, trace.toUpperCase())
        }
      }).pipe(Effect.provide(Logger.layer([logger])))
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map())))
})
