import { assert, describe, it } from "@effect/vitest"
import type { Transport } from "@lifeline/kernel"
import { Connection, Method, Peer, Protocol, ShutdownPolicy } from "@lifeline/kernel"
import { NodeStream } from "@lifeline/node"
import { Effect, Exit, Fiber, Layer, Logger, Schema, Scope, Stream } from "effect"
import * as Net from "node:net"
import { PassThrough } from "node:stream"

const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
const WhoAreYou = Method.request("whoAreYou", { params: Schema.Struct({}), result: Schema.String })
/** The server answers `add` and asks the client who it is. */
const Server = Protocol.make({ serves: [Add], calls: [WhoAreYou] })
const Client = Protocol.flip(Server)

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text)

/** Lets Node deliver what was written to a stream: its callbacks run on the event loop, not on a fiber. */
const tick = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/** Two connected sockets on loopback, destroyed with the Scope. */
const socketPair = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ readonly server: Net.Server; readonly near: Net.Socket; readonly far: Net.Socket }>(
      (resolve, reject) => {
        const server = Net.createServer()
        server.once("error", reject)
        server.once("connection", (far) => resolve({ server, near, far }))
        let near: Net.Socket
        server.listen(0, "127.0.0.1", () => {
          const address = server.address() as Net.AddressInfo
          near = Net.connect({ host: "127.0.0.1", port: address.port })
        })
      }
    )
  ),
  ({ far, near, server }) =>
    Effect.promise(() =>
      new Promise<void>((resolve) => {
        near.destroy()
        far.destroy()
        server.close(() => resolve())
      })
    )
)

/** A transport pair over two PassThrough streams, one per direction. */
const passThroughPair = () => {
  const nearToFar = new PassThrough()
  const farToNear = new PassThrough()
  return {
    nearToFar,
    farToNear,
    near: { readable: farToNear, writable: nearToFar, name: "near" },
    far: { readable: nearToFar, writable: farToNear, name: "far" }
  }
}

const serveOn = (transport: Transport.Transport.Service) =>
  Connection.make({
    protocol: Server,
    transport,
    handlers: { add: ([a, b]) => Effect.succeed(a + b) },
    policy: ShutdownPolicy.FailFast()
  })

describe("NodeStream", () => {
  it.effect("over a socket pair on loopback: calls both ways, and the far end sees the near end go", () =>
    Effect.gen(function*() {
      const { far, near } = yield* socketPair
      const server = yield* serveOn(yield* NodeStream.make({ readable: far, writable: far, name: "far socket" }))
      const scope = yield* Scope.make()
      const client = yield* Effect.gen(function*() {
        const transport = yield* NodeStream.make({ readable: near, writable: near, name: "near socket" })
        return yield* Connection.make({
          protocol: Client,
          transport,
          handlers: { whoAreYou: () => Effect.succeed("the near end") },
          policy: ShutdownPolicy.FailFast()
        })
      }).pipe(Scope.provide(scope))
      assert.strictEqual(yield* client.peer.call(Add, [20, 22]), 42)
      assert.strictEqual(yield* server.peer.call(WhoAreYou, {}), "the near end")

      // The near end stops: it ends its side of the socket (a half-close), and the far end's input ends.
      yield* Scope.close(scope, Exit.void)
      const reason = yield* server.peer.closed
      assert.strictEqual(reason._tag, "PeerClosed")
      const report = yield* server.awaitShutdown
      assert.strictEqual(report.reason, "TransportClosed")
      assert.isFalse(near.destroyed, "the socket is the caller's to destroy")
    }).pipe(Effect.scoped))

  it.effect("over PassThrough streams, with the Content-Length framing split anywhere", () =>
    Effect.gen(function*() {
      const pair = passThroughPair()
      yield* serveOn(yield* NodeStream.make(pair.far))
      const client = yield* Peer.make({
        protocol: Client,
        transport: yield* NodeStream.make(pair.near),
        handlers: { whoAreYou: () => Effect.succeed("near") }
      })
      const calls = yield* Effect.all(
        Array.from({ length: 50 }, (_, i) => client.call(Add, [i, i])),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(calls, Array.from({ length: 50 }, (_, i) => 2 * i))
    }).pipe(Effect.scoped))

  it.effect("touches no globals: console, process.stdout and the fiber's loggers are left alone", () =>
    Effect.gen(function*() {
      const pair = passThroughPair()
      const log = globalThis.console.log
      const write = process.stdout.write
      const loggers = yield* Logger.CurrentLoggers
      const transport = yield* NodeStream.make(pair.near)
      assert.strictEqual(globalThis.console.log, log)
      assert.strictEqual(process.stdout.write, write)
      assert.strictEqual(yield* Logger.CurrentLoggers, loggers)
      yield* transport.send([utf8("hello")])
      yield* tick
      assert.strictEqual(String(pair.nearToFar.read()), "hello")
    }).pipe(Effect.scoped))

  it.effect("a readable that fails fails incoming with a Read error that names the stream", () =>
    Effect.gen(function*() {
      const pair = passThroughPair()
      const transport = yield* NodeStream.make({ ...pair.near, name: "worker pipe" })
      pair.farToNear.destroy(new Error("pipe broke"))
      const error = yield* Effect.flip(Stream.runDrain(transport.incoming))
      assert.strictEqual(error.reason, "Read")
      assert.strictEqual(error.message, "reading worker pipe failed: pipe broke")
    }).pipe(Effect.scoped))

  it.effect("a writable that breaks fails incoming with a Write error at once, and sends fail too", () =>
    Effect.gen(function*() {
      const pair = passThroughPair()
      const transport = yield* NodeStream.make(pair.near)
      const reading = yield* Effect.forkChild(Effect.flip(Stream.runDrain(transport.incoming)))
      pair.nearToFar.destroy(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }))
      yield* tick
      const error = yield* Fiber.join(reading)
      assert.strictEqual(error.reason, "Write")
      assert.strictEqual(error.message, "writing near failed: write EPIPE")
      const sent = yield* Effect.flip(transport.send([utf8("x")]))
      assert.strictEqual(sent.reason, "Write")
    }).pipe(Effect.scoped))

  it.effect("end is a half-close: the other side's input ends, ours keeps flowing", () =>
    Effect.gen(function*() {
      const pair = passThroughPair()
      const transport = yield* NodeStream.make(pair.near)
      yield* transport.end
      yield* tick
      assert.isTrue(pair.nearToFar.writableEnded)
      pair.farToNear.end("still here")
      const chunks = yield* Stream.runCollect(transport.incoming)
      assert.strictEqual(Buffer.concat(chunks as Array<Uint8Array>).toString("utf8"), "still here")
    }).pipe(Effect.scoped))

  it.effect("released, it stops reading and destroys nothing", () =>
    Effect.gen(function*() {
      const pair = passThroughPair()
      const scope = yield* Scope.make()
      const transport = yield* NodeStream.make(pair.near).pipe(Scope.provide(scope))
      yield* transport.incoming.pipe(Stream.runDrain, Effect.forkIn(scope))
      yield* tick
      assert.strictEqual(pair.farToNear.listenerCount("data"), 1)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(pair.farToNear.listenerCount("data"), 0)
      assert.isTrue(pair.farToNear.isPaused())
      assert.isFalse(pair.farToNear.destroyed)
      assert.isFalse(pair.nearToFar.destroyed)
    }))

  it.effect("layer: the Transport service of a Connection layer, over a socket", () =>
    Effect.gen(function*() {
      const { far, near } = yield* socketPair
      yield* serveOn(yield* NodeStream.make({ readable: far, writable: far }))
      class Calc extends Connection.Service<Calc>()("test/NodeStream/Calc", { protocol: Client }) {}
      const sum = yield* Calc.client.pipe(
        Effect.flatMap((client) => client.add([2, 3])),
        Effect.provide(
          Calc.layer({ handlers: { whoAreYou: () => Effect.succeed("near") } }).pipe(
            Layer.provide(NodeStream.layer({ readable: near, writable: near, name: "calculator" }))
          )
        )
      )
      assert.strictEqual(sum, 5)
    }).pipe(Effect.scoped))
})
