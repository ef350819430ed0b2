import { assert, describe, it } from "@effect/vitest"
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as PeerError from "@lifeline/kernel/PeerError"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/testing/TestClock"
import * as Negotiation from "../src/Negotiation.js"

type Reply = Effect.Effect<unknown, RpcError.RpcError | PeerError.RequestTimeout | PeerError.PeerClosed>

/** A server scripted by method; every call and notification is recorded in order. */
const scripted = (replies: Record<string, (params: unknown) => Reply>) => {
  const sent: Array<{ readonly method: string; readonly params: unknown }> = []
  const caller: Negotiation.Caller = {
    callUntyped: (method, params) =>
      Effect.suspend(() => {
        sent.push({ method, params })
        const reply = replies[method]
        return reply === undefined ? Effect.fail(RpcError.RpcError.methodNotFound(method)) : reply(params)
      }),
    notifyUntyped: (method, params) => Effect.sync(() => void sent.push({ method, params }))
  }
  return { caller, methods: () => sent.map((message) => message.method), sent }
}

const clientInfo = { name: "test-client", version: "1.0.0" }

const legacyServer = {
  initialize: () =>
    Effect.succeed({
      protocolVersion: "2025-11-25",
      capabilities: { tools: {} },
      serverInfo: { name: "old", version: "1" }
    })
}

const discovered = {
  resultType: "complete",
  ttlMs: 0,
  cacheScope: "private",
  supportedVersions: ["2026-07-28"],
  capabilities: { tools: { listChanged: false } },
  _meta: { "io.modelcontextprotocol/serverInfo": { name: "new", version: "2" } }
}

describe("Negotiation.negotiate", () => {
  it.effect("a 2026-07-28 server: server/discover only, and each request carries the version in _meta", () =>
    Effect.gen(function*() {
      const server = scripted({ "server/discover": () => Effect.succeed(discovered) })
      const session = yield* Negotiation.negotiate(server.caller, { clientInfo, capabilities: { roots: {} } })
      assert.strictEqual(session.protocolVersion, "2026-07-28")
      assert.strictEqual(session.era, "modern")
      assert.deepStrictEqual(session.serverInfo, { name: "new", version: "2" })
      assert.deepStrictEqual(session.probe, { _tag: "Answered" })
      assert.deepStrictEqual(server.methods(), ["server/discover"])
      const meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": clientInfo,
        "io.modelcontextprotocol/clientCapabilities": { roots: {} }
      }
      assert.deepStrictEqual(server.sent[0]!.params, { _meta: meta })
      assert.deepStrictEqual(session.params({ name: "echo", _meta: { progressToken: 1 } }), {
        name: "echo",
        _meta: { ...meta, progressToken: 1 }
      })
    }))

  it.effect("server/discover refused with any error but -32022: initialize and notifications/initialized", () =>
    Effect.gen(function*() {
      for (const error of [RpcError.RpcError.methodNotFound("server/discover"), RpcError.RpcError.invalidParams()]) {
        const server = scripted({ "server/discover": () => Effect.fail(error), ...legacyServer })
        const session = yield* Negotiation.negotiate(server.caller, { clientInfo })
        assert.strictEqual(session.protocolVersion, "2025-11-25")
        assert.strictEqual(session.era, "legacy")
        assert.deepStrictEqual(session.probe, { _tag: "Refused", code: error.code, message: error.message })
        assert.deepStrictEqual(server.methods(), ["server/discover", "initialize", "notifications/initialized"])
        assert.deepStrictEqual(server.sent[1]!.params, { protocolVersion: "2025-11-25", capabilities: {}, clientInfo })
        assert.deepStrictEqual(session.params({ name: "echo" }), { name: "echo" })
      }
    }))

  it.effect("server/discover unanswered: initialize exactly discoverTimeout later, not a moment before", () =>
    Effect.gen(function*() {
      const server = scripted({ "server/discover": () => Effect.never, ...legacyServer })
      const fiber = yield* Effect.forkChild(
        Negotiation.negotiate(server.caller, { clientInfo, discoverTimeout: "2 seconds" })
      )
      yield* TestClock.adjust("1999 millis")
      assert.deepStrictEqual(server.methods(), ["server/discover"])
      yield* TestClock.adjust("1 millis")
      const session = yield* Fiber.join(fiber)
      assert.deepStrictEqual(session.probe, { _tag: "Silent", timeoutMillis: 2000 })
      assert.strictEqual(session.protocolVersion, "2025-11-25")
      assert.deepStrictEqual(server.methods(), ["server/discover", "initialize", "notifications/initialized"])
    }))

  it.effect("no answer in time, then initialize refused with -32022: a slow 2026-07-28 server, asked again", () =>
    Effect.gen(function*() {
      let probes = 0
      const server = scripted({
        "server/discover": () => ++probes === 1 ? Effect.never : Effect.succeed(discovered),
        initialize: () => Effect.fail(new RpcError.RpcError({ code: -32022, message: "initialize is not supported" }))
      })
      const fiber = yield* Effect.forkChild(
        Negotiation.negotiate(server.caller, { clientInfo, discoverTimeout: "1 second" })
      )
      yield* TestClock.adjust("1 second")
      const session = yield* Fiber.join(fiber)
      assert.strictEqual(session.protocolVersion, "2026-07-28")
      assert.deepStrictEqual(session.probe, { _tag: "AnsweredOnRetry", timeoutMillis: 1000 })
      assert.deepStrictEqual(server.methods(), ["server/discover", "initialize", "server/discover"])
      // A refused probe is an older server for good: its -32022 on initialize is an error, not a retry.
      const refused = scripted({
        initialize: () => Effect.fail(new RpcError.RpcError({ code: -32022, message: "no" }))
      })
      const error = yield* Effect.flip(Negotiation.negotiate(refused.caller, { clientInfo }))
      assert.strictEqual((error as RpcError.RpcError).code, -32022)
      assert.deepStrictEqual(refused.methods(), ["server/discover", "initialize"])
    }))

  it.effect("the default discoverTimeout is 10 seconds", () =>
    Effect.gen(function*() {
      const server = scripted({ "server/discover": () => Effect.never, ...legacyServer })
      const fiber = yield* Effect.forkChild(Negotiation.negotiate(server.caller, { clientInfo }))
      yield* TestClock.adjust("9999 millis")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual((yield* Fiber.join(fiber)).probe, { _tag: "Silent", timeoutMillis: 10_000 })
    }))

  it.effect("the peer's own request timeout on the probe counts as no answer too", () =>
    Effect.gen(function*() {
      const timedOut = new PeerError.RequestTimeout({ method: "server/discover", id: 1, timeoutMillis: 500 })
      const server = scripted({ "server/discover": () => Effect.fail(timedOut), ...legacyServer })
      const session = yield* Negotiation.negotiate(server.caller, { clientInfo })
      assert.deepStrictEqual(session.probe, { _tag: "Silent", timeoutMillis: 500 })
      assert.strictEqual(session.era, "legacy")
    }))

  it.effect("-32022 is a newer server, not an older one: UnsupportedVersion naming what it speaks, no initialize", () =>
    Effect.gen(function*() {
      const rejection = new RpcError.RpcError({
        code: -32022,
        message: "unsupported",
        data: { supported: ["2027-01-01"], requested: "2026-07-28" }
      })
      const server = scripted({ "server/discover": () => Effect.fail(rejection), ...legacyServer })
      const error = yield* Effect.flip(Negotiation.negotiate(server.caller, { clientInfo }))
      assert.instanceOf(error, Negotiation.NegotiationError)
      assert.strictEqual((error as Negotiation.NegotiationError).reason, "UnsupportedVersion")
      assert.include(error.message, "2027-01-01")
      assert.deepStrictEqual(server.methods(), ["server/discover"])
    }))

  it.effect("a connection that ends during the probe: ClosedOnProbe, nothing else sent; during initialize: its error", () =>
    Effect.gen(function*() {
      const closed = new PeerError.PeerClosed({ reason: "TransportClosed" })
      const server = scripted({ "server/discover": () => Effect.fail(closed), ...legacyServer })
      const error = yield* Effect.flip(Negotiation.negotiate(server.caller, { clientInfo }))
      assert.strictEqual((error as Negotiation.NegotiationError).reason, "ClosedOnProbe")
      assert.deepStrictEqual(server.methods(), ["server/discover"])
      const dying = scripted({ initialize: () => Effect.fail(closed) })
      assert.strictEqual(yield* Effect.flip(Negotiation.negotiate(dying.caller, { clientInfo })), closed)
      // A connection that failed (a frame over its bound) is not a server that ended: the peer's error as it is.
      const failed = new PeerError.PeerClosed({ reason: "TransportFailed", detail: "frame too long" })
      const broken = scripted({ "server/discover": () => Effect.fail(failed) })
      assert.strictEqual(yield* Effect.flip(Negotiation.negotiate(broken.caller, { clientInfo })), failed)
    }))

  it.effect("mode legacy: no probe; mode modern: an older server is UnsupportedVersion", () =>
    Effect.gen(function*() {
      const legacy = scripted(legacyServer)
      const session = yield* Negotiation.negotiate(legacy.caller, { clientInfo, mode: "legacy" })
      assert.deepStrictEqual(session.probe, { _tag: "Skipped" })
      assert.deepStrictEqual(legacy.methods(), ["initialize", "notifications/initialized"])
      const modern = scripted(legacyServer)
      const error = yield* Effect.flip(Negotiation.negotiate(modern.caller, { clientInfo, mode: "modern" }))
      assert.strictEqual((error as Negotiation.NegotiationError).reason, "UnsupportedVersion")
      assert.deepStrictEqual(modern.methods(), ["server/discover"])
    }))

  it.effect("a discover result without 2026-07-28 in supportedVersions, or an initialize of an unknown version", () =>
    Effect.gen(function*() {
      const newer = scripted({
        "server/discover": () => Effect.succeed({ ...discovered, supportedVersions: ["2027-01-01"] })
      })
      const first = yield* Effect.flip(Negotiation.negotiate(newer.caller, { clientInfo }))
      assert.strictEqual((first as Negotiation.NegotiationError).reason, "UnsupportedVersion")
      const echoing = scripted({
        initialize: () => Effect.succeed({ protocolVersion: "1999-01-01", capabilities: {} })
      })
      const second = yield* Effect.flip(Negotiation.negotiate(echoing.caller, { clientInfo }))
      assert.strictEqual((second as Negotiation.NegotiationError).reason, "UnsupportedVersion")
      assert.notInclude(echoing.methods(), "notifications/initialized")
    }))

  it.effect("untrusted answers: a malformed result, or a text over its bound, is InvalidResult, escaped", () =>
    Effect.gen(function*() {
      const cases: Array<[unknown, Negotiation.Options]> = [
        [{ ...discovered, capabilities: "none" }, { clientInfo }],
        [{ ...discovered, instructions: "x".repeat(101) }, { clientInfo, maxInstructionsLength: 100 }],
        [{ ...discovered, supportedVersions: ["2026-07-28", "a", "b"] }, { clientInfo, maxVersions: 2 }],
        [
          {
            ...discovered,
            _meta: { "io.modelcontextprotocol/serverInfo": { name: "\u001b[2J" + "n".repeat(20), version: "1" } }
          },
          { clientInfo, maxTextLength: 16 }
        ]
      ]
      for (const [result, options] of cases) {
        const server = scripted({ "server/discover": () => Effect.succeed(result) })
        const error = yield* Effect.flip(Negotiation.negotiate(server.caller, options))
        assert.strictEqual((error as Negotiation.NegotiationError).reason, "InvalidResult")
        assert.notMatch(error.message, /\u001b/)
      }
      const within = scripted({
        "server/discover": () => Effect.succeed({ ...discovered, instructions: "x".repeat(100) })
      })
      const session = yield* Negotiation.negotiate(within.caller, { clientInfo, maxInstructionsLength: 100 })
      assert.strictEqual(session.instructions?.length, 100)
    }))
})
