/**
 * The Layer-first API from a user's seat, through public entry points only: a `Calculator` service built with
 * `Layer.effect` over a `Connection.Service`, tested by swapping the `Transport` layer for
 * `TestTransport.layerServe`, under `TestClock`.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Peer, PeerError, Transport } from "@lifeline/kernel"
import { Connection, Lifecycle, Method, Protocol, ShutdownPolicy } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import {
  Config,
  ConfigProvider,
  Context,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Queue,
  Ref,
  Schema,
  Scope
} from "effect"
import { TestClock } from "effect/testing"

const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
/** The far end takes `n` seconds (on the Clock) to answer. */
const SlowSquare = Method.request("slowSquare", { params: Schema.Struct({ n: Schema.Number }), result: Schema.Number })
const Log = Method.notification("log", { params: Schema.Struct({ text: Schema.String }) })

/** The calculator's protocol as its client sees it. */
const CalcProtocol = Protocol.make({ calls: [Add, SlowSquare, Log] })

class CalcConnection extends Connection.Service<CalcConnection>()("test/CalcConnection", {
  protocol: CalcProtocol
}) {}

/** A service of the application, built on the connection: what the tests below exercise. */
class Calculator extends Context.Service<Calculator, {
  readonly add: (a: number, b: number) => Effect.Effect<number, Peer.CallError>
  readonly slowSquare: (n: number) => Effect.Effect<number, Peer.CallError>
  readonly log: (text: string) => Effect.Effect<void, PeerError.Disconnect>
}>()("test/Calculator") {
  static readonly layer = Layer.effect(
    Calculator,
    Effect.gen(function*() {
      const client = yield* CalcConnection.client
      return {
        add: (a, b) => client.add([a, b]),
        slowSquare: (n) => client.slowSquare({ n }),
        log: (text) => client.log({ text })
      }
    })
  )
}

/**
 * The far end, in memory: it serves the flipped protocol, sleeping on the Clock (it says when it starts to, so that a
 * test moves the clock only once the sleep is scheduled), and records what it is told.
 */
const farEnd = (logged: Ref.Ref<ReadonlyArray<string>>, started?: Queue.Queue<number>) =>
  TestTransport.layerServe(Protocol.flip(CalcProtocol), {
    add: ([a, b]) => Effect.succeed(a + b),
    slowSquare: ({ n }) =>
      Effect.andThen(
        started === undefined ? Effect.void : Queue.offer(started, n),
        Effect.as(Effect.sleep(Duration.seconds(n)), n * n)
      ),
    log: ({ text }) => Ref.update(logged, (lines) => [...lines, text])
  })

const calculatorOver = (transport: Layer.Layer<Transport.Transport>) =>
  Calculator.layer.pipe(
    Layer.provideMerge(
      CalcConnection.layer({ handlers: {}, requestTimeout: "4 seconds", policy: ShutdownPolicy.FailFast() })
    ),
    Layer.provide(transport)
  )

describe("Connection layers", () => {
  it.effect("a service built on Connection.Service runs against TestTransport.layerServe", () =>
    Effect.gen(function*() {
      const logged = yield* Ref.make<ReadonlyArray<string>>([])
      yield* Effect.gen(function*() {
        const calculator = yield* Calculator
        assert.strictEqual(yield* calculator.add(1, 2), 3)
        yield* calculator.log("hello")
        const connection = yield* CalcConnection
        assert.strictEqual((yield* connection.lifecycle.state)._tag, "Ready")
        // Notifications are fire and forget: wait until the far end has handled it.
        while ((yield* Ref.get(logged)).length === 0) yield* Effect.yieldNow
      }).pipe(Effect.provide(calculatorOver(farEnd(logged))))
      assert.deepStrictEqual(yield* Ref.get(logged), ["hello"])
    }))

  it.effect("under TestClock: a slow far end answers when the clock says so, and times out past requestTimeout", () =>
    Effect.gen(function*() {
      const logged = yield* Ref.make<ReadonlyArray<string>>([])
      const started = yield* Queue.unbounded<number>()
      yield* Effect.gen(function*() {
        const calculator = yield* Calculator
        const three = yield* Effect.forkChild(calculator.slowSquare(3))
        yield* Queue.take(started)
        yield* TestClock.adjust("2 seconds")
        assert.isUndefined(three.pollUnsafe(), "no answer before the far end's 3 seconds")
        yield* TestClock.adjust("1 second")
        assert.strictEqual(yield* Fiber.join(three), 9)

        const five = yield* Effect.forkChild(Effect.flip(calculator.slowSquare(5)))
        yield* Queue.take(started)
        yield* TestClock.adjust("4 seconds")
        const error = yield* Fiber.join(five)
        assert.strictEqual(error._tag, "RequestTimeout")
      }).pipe(Effect.provide(calculatorOver(farEnd(logged, started))))
    }))

  it.effect("released, the layer stops its connection under its policy", () =>
    Effect.gen(function*() {
      const logged = yield* Ref.make<ReadonlyArray<string>>([])
      const started = yield* Queue.unbounded<number>()
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(calculatorOver(farEnd(logged, started)), scope)
      const connection = Context.get(context, CalcConnection)
      const pending = yield* Effect.forkChild(Effect.flip(Context.get(context, Calculator).slowSquare(3)))
      yield* Queue.take(started)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual((yield* connection.lifecycle.state)._tag, "Closed")
      const error = yield* Fiber.join(pending)
      assert.strictEqual(error._tag, "ShutdownError")
      const report = yield* connection.awaitShutdown
      assert.strictEqual(report.policy._tag, "FailFast")
      assert.deepStrictEqual(report.cutOff.map((cut) => cut.method), ["slowSquare"])
    }))

  it.effect("the connection's layer can be swapped too: a canned connection for a unit test of the service", () =>
    Effect.gen(function*() {
      const canned = TestTransport.layerServe(Protocol.flip(CalcProtocol), {
        add: () => Effect.succeed(42),
        slowSquare: () => Effect.succeed(0),
        log: () => Effect.void
      })
      const sum = yield* Calculator.use((calculator) => calculator.add(1, 1)).pipe(
        Effect.provide(calculatorOver(canned))
      )
      assert.strictEqual(sum, 42)
    }))

  it.effect("layer with an Initiate handshake: built means Ready; a refused handshake fails the layer", () =>
    Effect.gen(function*() {
      class Refused extends Schema.TaggedError<Refused>()("Refused", { reason: Schema.String }) {}
      const Hello = Method.request("hello", {
        params: Schema.Struct({ version: Schema.Number }),
        result: Schema.Struct({ server: Schema.String }),
        error: Refused
      })
      const Ready = Method.notification("ready", { params: Schema.Struct({}) })
      const Greeting = Protocol.make({ calls: [Hello, Ready] })
      class Greeter extends Connection.Service<Greeter>()("test/Greeter", { protocol: Greeting }) {}
      const served = yield* Deferred.make<void>()
      const farEnd = TestTransport.layerServe(Protocol.flip(Greeting), {
        hello: ({ version }) =>
          version === 2 ? Effect.succeed({ server: "far" }) : Effect.fail(new Refused({ reason: "too old" })),
        ready: () => Deferred.succeed(served, void 0)
      })
      const layerFor = (version: number) =>
        Greeter.layer({
          handlers: {},
          handshake: Connection.initiate(Hello, { version }, { then: (_, peer) => peer.notify(Ready, {}) })
        }).pipe(Layer.provide(farEnd))

      const state = yield* Greeter.use((greeter) =>
        // `then` sent `ready` before the layer was built; the far end handles it in its own time.
        Effect.andThen(Deferred.await(served), greeter.lifecycle.state)
      ).pipe(Effect.provide(layerFor(2)))
      assert.strictEqual(state._tag, "Ready")

      // The typed error of the handshake's method is the layer's error, and can be caught by its tag.
      const reason = yield* Layer.build(layerFor(1)).pipe(
        Effect.scoped,
        Effect.as("built"),
        Effect.catchTag("Refused", (refused) => Effect.succeed(refused.reason))
      )
      assert.strictEqual(reason, "too old")
    }))

  it.effect("layerConfig reads the settings from Config when the layer is built", () =>
    Effect.gen(function*() {
      const logged = yield* Ref.make<ReadonlyArray<string>>([])
      const started = yield* Queue.unbounded<number>()
      const configured = CalcConnection.layerConfig({
        handlers: {},
        config: {
          requestTimeout: Config.Duration("CALC_TIMEOUT"),
          policy: ShutdownPolicy.config
        }
      })
      const program = Effect.gen(function*() {
        const connection = yield* CalcConnection
        assert.deepStrictEqual(connection.policy, ShutdownPolicy.drain("3 seconds"))
        const call = yield* Effect.forkChild(Effect.flip(connection.peer.call(SlowSquare, { n: 5 })))
        yield* Queue.take(started)
        yield* TestClock.adjust("1 second")
        return yield* Fiber.join(call)
      }).pipe(
        Effect.provide(configured.pipe(Layer.provide(farEnd(logged, started)))),
        Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({
          env: {
            CALC_TIMEOUT: "1 second",
            [ShutdownPolicy.POLICY_VARIABLE]: "drain",
            [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "3 seconds"
          }
        })))
      )
      const error = yield* program
      assert.strictEqual(error._tag, "RequestTimeout")

      const missing = yield* Layer.build(configured.pipe(Layer.provide(farEnd(logged)))).pipe(
        Effect.scoped,
        Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: {} }))),
        Effect.flip
      )
      assert.strictEqual(missing._tag, "ConfigError")
    }))

  it.effect("Connection.layer over a plain Context.Service key", () =>
    Effect.gen(function*() {
      class Plain extends Context.Service<Plain, Connection.Connection<never, typeof Add>>()("test/Plain") {}
      const live = Connection.layer(Plain, { protocol: Protocol.make({ calls: [Add] }), handlers: {} }).pipe(
        Layer.provide(
          TestTransport.layerServe(Protocol.make({ serves: [Add] }), { add: ([a, b]) => Effect.succeed(a * b) })
        )
      )
      const product = yield* Plain.use((connection) => Protocol.client(connection.peer).add([6, 7])).pipe(
        Effect.provide(live)
      )
      assert.strictEqual(product, 42)
      assert.isTrue(Lifecycle.isLegal("Ready", "Closing"))
    }))
})
