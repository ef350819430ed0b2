/**
 * Handshakes typed against the protocol: `accept` names what the protocol serves, `initiate(method, params)` calls what
 * it calls, and a handshake method with a typed error compiles and fails `make` with that error. The type-level cases
 * are `@ts-expect-error` lines: `tsc -b packages/kernel` fails if any of them compiles.
 */
import { assert, describe, it } from "@effect/vitest"
import { RpcError } from "@lifeline/jsonrpc"
import { Connection, Method, Peer, Protocol } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Schema } from "effect"

class VersionMismatch extends Schema.TaggedError<VersionMismatch>()("VersionMismatch", {
  supported: Schema.Number
}) {}

const Initialize = Method.request("initialize", {
  params: Schema.Struct({ version: Schema.Number }),
  result: Schema.Struct({ name: Schema.String }),
  error: VersionMismatch
})
const Initialized = Method.notification("initialized", { params: Schema.Struct({}) })
const Work = Method.request("work", { params: Schema.Struct({}), result: Schema.Number })
const Other = Method.request("other", { params: Schema.Struct({}), result: Schema.Number })

const Server = Protocol.make({ serves: [Initialize, Initialized, Work] })
const Client = Protocol.flip(Server)

const serverHandlers = {
  initialize: ({ version }: { readonly version: number }) =>
    version === 2 ? Effect.succeed({ name: "server" }) : Effect.fail(new VersionMismatch({ supported: 2 })),
  initialized: () => Effect.void,
  work: () => Effect.succeed(42)
}

describe("Connection handshakes typed against the protocol", () => {
  it.effect("initiate(method, params, { then }): calls it, runs then, and the connection is Ready", () =>
    Effect.gen(function*() {
      const { left, right } = yield* TestTransport.makePair()
      const server = yield* Connection.make({
        protocol: Server,
        transport: left,
        handlers: serverHandlers,
        handshake: Connection.accept(Initialize, { notifications: [Initialized] })
      })
      let name = ""
      const client = yield* Connection.make({
        protocol: Client,
        transport: right,
        handlers: {},
        handshake: Connection.initiate(Initialize, { version: 2 }, {
          then: (result, peer) => {
            name = result.name
            return peer.notify(Initialized, {})
          }
        })
      })
      assert.strictEqual(name, "server")
      assert.strictEqual((yield* client.lifecycle.state)._tag, "Ready")
      yield* server.lifecycle.awaitState((state) => state._tag === "Ready")
      assert.strictEqual(yield* client.peer.call(Work, {}), 42)
    }).pipe(Effect.scoped))

  it.effect("a handshake method's typed error fails make with that error, and the connection shuts down as Failed", () =>
    Effect.gen(function*() {
      const { transport } = yield* TestTransport.serve(Server, serverHandlers)
      const reports: Array<Connection.ShutdownReport> = []
      const error = yield* Effect.flip(Connection.make({
        protocol: Client,
        transport,
        handlers: {},
        handshake: Connection.initiate(Initialize, { version: 1 }),
        onShutdown: (report) => Effect.sync(() => reports.push(report))
      }))
      assert.instanceOf(error, VersionMismatch)
      assert.strictEqual((error as VersionMismatch).supported, 2)
      assert.deepStrictEqual(reports.map((report) => report.reason), ["Failed"])
      // Caught by its tag, like any typed error.
      const supported = yield* Connection.make({
        protocol: Client,
        transport: (yield* TestTransport.serve(Server, serverHandlers)).transport,
        handlers: {},
        handshake: Connection.initiate(Initialize, { version: 1 })
      }).pipe(Effect.as(0), Effect.catchTag("VersionMismatch", (e) => Effect.succeed(e.supported)))
      assert.strictEqual(supported, 2)
    }).pipe(Effect.scoped))

  it.effect("the function form may fail with a typed error too; a Lifecycle.Failure stays what it is", () =>
    Effect.gen(function*() {
      const { transport } = yield* TestTransport.serve(Server, serverHandlers)
      const typed = yield* Effect.flip(Connection.make({
        protocol: Client,
        transport,
        handlers: {},
        handshake: Connection.initiate((peer) => peer.call(Initialize, { version: 3 }))
      }))
      assert.instanceOf(typed, VersionMismatch)

      const refused = yield* Effect.flip(Connection.make({
        protocol: Client,
        transport: (yield* TestTransport.serve(Server, serverHandlers)).transport,
        handlers: {},
        handshake: Connection.initiate(() => Effect.fail(RpcError.RpcError.invalidRequest("no")))
      }))
      assert.instanceOf(refused, RpcError.RpcError)
    }).pipe(Effect.scoped))

  it.effect("accept with methods or names: the handler runs the handshake, other requests wait for Ready", () =>
    Effect.gen(function*() {
      const { left, right } = yield* TestTransport.makePair()
      const server = yield* Connection.make({
        protocol: Server,
        transport: left,
        handlers: serverHandlers,
        handshake: Connection.accept(Initialize, { notifications: [Initialized] })
      })
      const client = yield* Peer.make({ protocol: Client, transport: right, handlers: {} })
      const early = yield* Effect.flip(client.call(Work, {}))
      assert.strictEqual((early as RpcError.RpcError).code, -32002)
      assert.deepStrictEqual(yield* client.call(Initialize, { version: 2 }), { name: "server" })
      yield* client.notify(Initialized, {})
      yield* server.lifecycle.awaitState((state) => state._tag === "Ready")
      assert.strictEqual(yield* client.call(Work, {}), 42)
    }).pipe(Effect.scoped))

  it("does not compile: a misspelled or foreign method, or a typed error where none is expected", () => {
    const check = (transport: TestTransport.Pair["left"]) => [
      Connection.make({
        protocol: Server,
        transport,
        handlers: serverHandlers,
        // @ts-expect-error: the protocol serves `initialize`, not `initialise`
        handshake: Connection.accept("initialise")
      }),
      Connection.make({
        protocol: Server,
        transport,
        handlers: serverHandlers,
        // @ts-expect-error: `initialized` is a notification; `accept` starts with a request
        handshake: Connection.accept("initialized")
      }),
      Connection.make({
        protocol: Server,
        transport,
        handlers: serverHandlers,
        // @ts-expect-error: the protocol serves no notification `initialised`
        handshake: Connection.accept("initialize", { notifications: ["initialised"] })
      }),
      Connection.make({
        protocol: Client,
        transport,
        handlers: {},
        // @ts-expect-error: the protocol does not call `other`
        handshake: Connection.initiate(Other, {})
      }),
      Connection.make({
        protocol: Client,
        transport,
        handlers: {},
        // @ts-expect-error: params are checked against the method
        handshake: Connection.initiate(Initialize, { version: "2" })
      }),
      // The typed error is part of what `make` can fail with: it compiles, and the error type says so.
      Connection.make({
        protocol: Client,
        transport,
        handlers: {},
        handshake: Connection.initiate(Initialize, { version: 2 })
      }).pipe(Effect.catchTag("VersionMismatch", () => Effect.void))
    ]
    assert.isFunction(check)
  })
})
