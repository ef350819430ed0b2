import { assert, describe, it } from "@effect/vitest"
import { Bounds } from "@lifeline/kernel"
import { Reconnect } from "@lifeline/mcp"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/testing/TestClock"
import * as Internal from "../src/internal/reconnect.js"

const settings = (overrides: Partial<Internal.Settings> = {}): Internal.Settings => ({
  ...Internal.decode({}),
  ...overrides
})

describe("the defaults", () => {
  it("come from the kernel's MCP profile of bounds", () => {
    const defaults = Internal.decode({})
    assert.strictEqual(defaults.budget, 5)
    assert.strictEqual(defaults.budget, Bounds.mcp.restartBudget)
    assert.strictEqual(Duration.toMillis(defaults.initialDelay), 1000)
    assert.strictEqual(defaults.factor, 2)
    assert.strictEqual(Duration.toMillis(defaults.maxDelay), 30_000)
    assert.strictEqual(Duration.toMillis(defaults.stableAfter), 60_000)
    assert.strictEqual(Duration.toMillis(defaults.connectTimeout), Duration.toMillis(Bounds.handshakeTimeout))
    // The transport's stop: the SDK's figures.
    assert.strictEqual(Duration.toMillis(Bounds.mcp.exitTimeout), 2000)
    assert.strictEqual(Duration.toMillis(Bounds.mcp.killGrace), 2000)
    const given = Internal.decode({ restartBudget: 0, initialDelay: "5 millis", maxDelay: "1 minute", factor: 3 })
    assert.strictEqual(given.budget, 0)
    assert.strictEqual(Duration.toMillis(given.initialDelay), 5)
    assert.strictEqual(Duration.toMillis(given.maxDelay), 60_000)
    assert.strictEqual(given.factor, 3)
  })
})

/** Connections whose end the test decides; each connect records the clock's time, and may be told to fail. */
const harness = Effect.gen(function*() {
  const first = yield* Deferred.make<Internal.End>()
  const connections: Array<Deferred.Deferred<Internal.End>> = [first]
  const connectedAt: Array<number> = []
  const restarts: Array<Reconnect.RestartEvent> = []
  let failNext = 0
  const connect = Effect.gen(function*() {
    connectedAt.push(yield* Clock.currentTimeMillis)
    if (failNext > 0) {
      failNext--
      return yield* Effect.fail(new Error(`attempt ${connectedAt.length} did not connect`))
    }
    const end = yield* Deferred.make<Internal.End>()
    connections.push(end)
    return Deferred.await(end)
  })
  const run = (s: Internal.Settings) =>
    Effect.forkChild(
      Internal.loop(s, Deferred.await(first), connect, { restarting: (event) => restarts.push(event) })
    )
  const crash = (index: number) =>
    Deferred.succeed(connections[index]!, { _tag: "Lost", error: new Error(`crash ${index}`) })
  return {
    connections,
    connectedAt,
    restarts,
    run,
    crash,
    failAttempts: (n: number) => {
      failNext = n
    }
  }
})

describe("the restart loop (TestClock)", () => {
  it.effect("backoff: each restart exactly initialDelay × factor^n after the crash, capped at maxDelay", () =>
    Effect.gen(function*() {
      const h = yield* harness
      yield* h.run(settings({ budget: 7, maxDelay: Duration.seconds(10) }))
      const expected = [1000, 2000, 4000, 8000, 10_000, 10_000]
      for (let i = 0; i < expected.length; i++) {
        const crashedAt = yield* Clock.currentTimeMillis
        yield* h.crash(i)
        yield* TestClock.adjust(expected[i]! - 1)
        assert.strictEqual(h.connectedAt.length, i, `restart ${i + 1} not 1 ms early`)
        yield* TestClock.adjust(1)
        assert.strictEqual(h.connectedAt.length, i + 1, `restart ${i + 1} on time`)
        assert.strictEqual(h.connectedAt[i]! - crashedAt, expected[i])
        // A connection that lives a moment (less than stableAfter) before the next crash.
        yield* TestClock.adjust(500)
      }
      assert.deepStrictEqual(h.restarts.map((event) => Duration.toMillis(event.delay)), expected)
      assert.deepStrictEqual(h.restarts.map((event) => event.delayMillis), expected)
      assert.deepStrictEqual(h.restarts.map((event) => event.restart), [1, 2, 3, 4, 5, 6])
      assert.strictEqual(h.restarts[2]!.error.message, "crash 2")
    }))

  it.effect("a connection that lived stableAfter resets the backoff and the budget", () =>
    Effect.gen(function*() {
      const h = yield* harness
      const fiber = yield* h.run(settings({ budget: 3 }))
      // Three crashes in a row: 1 s, 2 s, 4 s; the budget is spent.
      for (const delay of [1000, 2000, 4000]) {
        yield* h.crash(h.connections.length - 1)
        yield* TestClock.adjust(delay)
      }
      assert.strictEqual(h.connectedAt.length, 3)
      // The budget is spent: one more crash now would end the loop; this connection lives stableAfter instead.
      yield* TestClock.adjust(Duration.toMillis(Duration.seconds(60)))
      yield* h.crash(3)
      yield* TestClock.adjust(999)
      assert.strictEqual(h.connectedAt.length, 3, "the first delay again, not 1 ms early")
      yield* TestClock.adjust(1)
      assert.strictEqual(h.connectedAt.length, 4)
      assert.strictEqual(h.restarts[3]!.restart, 1, "the series counts from 1 again")
      // And the whole budget is there again: 2 s, 4 s, then the give-up.
      for (const delay of [2000, 4000]) {
        yield* h.crash(h.connections.length - 1)
        yield* TestClock.adjust(delay)
      }
      assert.strictEqual(h.connectedAt.length, 6)
      assert.isUndefined(fiber.pollUnsafe())
      yield* h.crash(6)
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(Exit.isFailure(exit))
    }))

  it.effect("a run 1 ms short of stableAfter does not reset", () =>
    Effect.gen(function*() {
      const h = yield* harness
      yield* h.run(settings())
      yield* h.crash(0)
      yield* TestClock.adjust(1000)
      yield* TestClock.adjust(59_999)
      yield* h.crash(1)
      yield* TestClock.adjust(1999)
      assert.strictEqual(h.connectedAt.length, 1, "the second delay (2 s), not the first")
      yield* TestClock.adjust(1)
      assert.strictEqual(h.connectedAt.length, 2)
      assert.strictEqual(h.restarts[1]!.restart, 2)
    }))

  it.effect("gives up after the budget, with the last error; failed connects count", () =>
    Effect.gen(function*() {
      const h = yield* harness
      const fiber = yield* h.run(settings({ budget: 2 }))
      h.failAttempts(2)
      yield* h.crash(0)
      yield* TestClock.adjust(1000)
      assert.strictEqual(h.connectedAt.length, 1)
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust(2000)
      assert.strictEqual(h.connectedAt.length, 2)
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(Exit.isFailure(exit))
      const failure = Exit.findErrorOption(exit)
      assert.strictEqual(failure._tag, "Some")
      if (failure._tag === "Some") {
        assert.strictEqual(failure.value.restarts, 2)
        assert.strictEqual(failure.value.error.message, "attempt 2 did not connect")
      }
      // No third attempt, however long one waits.
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(h.connectedAt.length, 2)
    }))

  it.effect("a budget of 0 gives up at the first crash, without a restart", () =>
    Effect.gen(function*() {
      const h = yield* harness
      const fiber = yield* h.run(settings({ budget: 0 }))
      yield* h.crash(0)
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(h.connectedAt.length, 0)
      assert.deepStrictEqual(h.restarts, [])
    }))

  it.effect("a connection closed by the host ends the loop: no restart", () =>
    Effect.gen(function*() {
      const h = yield* harness
      const fiber = yield* h.run(settings())
      yield* h.crash(0)
      yield* TestClock.adjust(1000)
      yield* Deferred.succeed(h.connections[1]!, { _tag: "Closed" })
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(Exit.isSuccess(exit))
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(h.connectedAt.length, 1)
    }))
})

/** A transport whose server the test kills; `closes` counts the host's `close()` calls. */
class FakeTransport implements Transport {
  onclose?: (() => void) | undefined
  onerror?: ((error: Error) => void) | undefined
  onmessage?: Transport["onmessage"]
  closes = 0
  start = () => Promise.resolve()
  send = () => Promise.resolve()
  close = () => {
    this.closes++
    this.onclose?.()
    return Promise.resolve()
  }
  crash = () => this.onclose?.()
}

/** The part of the SDK's Client the helper uses, as the SDK's `Protocol` does it: it chains the transport's onclose. */
class FakeClient implements Reconnect.ReconnectableClient {
  transport: Transport | undefined
  onerror?: ((error: Error) => void) | undefined
  connect(transport: Transport) {
    this.transport = transport
    transport.onclose = () => {
      this.transport = undefined
    }
    return transport.start()
  }
  close() {
    return this.transport?.close() ?? Promise.resolve()
  }
}

/** `Reconnect.reconnecting` over fake transports, each one it makes pushed to `made`. */
const reconnect = (client: FakeClient, made: Array<FakeTransport>, options: Reconnect.ReconnectOptions) =>
  Reconnect.reconnecting(client, () => {
    made.push(new FakeTransport())
    return made.at(-1)!
  }, options)

/** One turn of the event loop: the loop reacts on its own fiber. */
const turn = () => new Promise((resolve) => setImmediate(resolve))

describe("reconnecting: the explicit close", () => {
  it("client.close() while connected: closed resolves, no new transport", async () => {
    const made: Array<FakeTransport> = []
    const client = new FakeClient()
    const connection = await reconnect(client, made, { initialDelay: 0 })
    assert.strictEqual(connection.transport, made[0])
    await client.close()
    await connection.closed
    assert.strictEqual(made.length, 1)
    assert.strictEqual(made[0]!.closes, 1)
    assert.strictEqual(connection.restarts, 0)
  })

  it("close() while a restart waits its delay: no restart, closed resolves", async () => {
    const made: Array<FakeTransport> = []
    const client = new FakeClient()
    const restarts: Array<number> = []
    const connection = await reconnect(client, made, {
      initialDelay: "1 hour",
      maxDelay: "1 hour",
      onRestart: (event) => restarts.push(Duration.toMillis(event.delay))
    })
    made[0]!.crash()
    // The loop reacts on its own fiber.
    await turn()
    assert.deepStrictEqual(restarts, [3_600_000])
    assert.isUndefined(connection.transport)
    await connection.close()
    await connection.closed
    assert.strictEqual(made.length, 1)
  })

  it("close() while a restart connects: no further restart, even when that connect fails afterwards", async () => {
    const made: Array<FakeTransport> = []
    const client = new FakeClient()
    let release: (error: Error) => void = () => {}
    const connect = client.connect.bind(client)
    let connects = 0
    client.connect = (transport) => {
      connects++
      if (connects === 1) return connect(transport)
      // The restart's initialize hangs until the test fails it.
      return new Promise<void>((_, reject) => {
        release = reject
      })
    }
    const connection = await reconnect(client, made, { initialDelay: 0 })
    made[0]!.crash()
    while (connects < 2) await turn()
    await connection.close()
    await connection.closed
    release(new Error("initialize failed"))
    for (let i = 0; i < 5; i++) await turn()
    assert.strictEqual(connects, 2)
    assert.strictEqual(made.length, 2)
  })

  it("client.close() while a restart waits its delay: no restart, closed resolves, the Client's close is its own again", async () => {
    const made: Array<FakeTransport> = []
    const client = new FakeClient()
    const connection = await reconnect(client, made, { initialDelay: "1 hour", maxDelay: "1 hour" })
    assert.isTrue(Object.hasOwn(client, "close"), "the loop's close while it runs")
    made[0]!.crash()
    await turn()
    assert.strictEqual(connection.restarts, 1)
    await client.close()
    await connection.closed
    await turn()
    assert.strictEqual(made.length, 1)
    assert.isFalse(Object.hasOwn(client, "close"), "the class's close again")
  })

  it("client.close() while a restart connects: the server that answers afterwards is closed, no further restart", async () => {
    const made: Array<FakeTransport> = []
    const client = new FakeClient()
    let answer: () => void = () => {}
    const connect = client.connect.bind(client)
    let connects = 0
    client.connect = (transport) => {
      connects++
      if (connects === 1) return connect(transport)
      // The restart's initialize is answered only after the host's close.
      return new Promise<void>((resolve) => {
        answer = () => resolve(connect(transport))
      })
    }
    const connection = await reconnect(client, made, { initialDelay: 0 })
    made[0]!.crash()
    while (connects < 2) await turn()
    await client.close()
    await connection.closed
    answer()
    for (let i = 0; i < 5; i++) await turn()
    assert.strictEqual(connects, 2)
    assert.strictEqual(made.length, 2)
    assert.strictEqual(made[1]!.closes, 1, "the restarted server is closed")
  })

  it("the Client's own close() when a restart's initialize fails (as the SDK's does) is not a stop: restarts go on", async () => {
    const made: Array<FakeTransport> = []
    const client = new FakeClient()
    const connect = client.connect.bind(client)
    let connects = 0
    client.connect = async (transport) => {
      connects++
      await connect(transport)
      if (connects !== 2) return
      // The restarted server dies during initialize; the SDK's Client then closes itself and rejects.
      made.at(-1)!.crash()
      void client.close()
      throw new Error("Connection closed")
    }
    const connection = await reconnect(client, made, { initialDelay: 0 })
    made[0]!.crash()
    while (connects < 3) await turn()
    assert.strictEqual(connection.transport, made[2], "a third connection after the failed second")
    await client.close()
    await connection.closed
  })

  it("onReconnected once a restart connected, with its number in the series", async () => {
    const made: Array<FakeTransport> = []
    const client = new FakeClient()
    const reconnected: Array<number> = []
    const connection = await reconnect(client, made, {
      initialDelay: 0,
      onReconnected: (restart) => reconnected.push(restart)
    })
    made[0]!.crash()
    while (made.length < 2 || reconnected.length < 1) await turn()
    made[1]!.crash()
    while (made.length < 3 || reconnected.length < 2) await turn()
    assert.deepStrictEqual(reconnected, [1, 2])
    assert.strictEqual(connection.restarts, 2)
    assert.strictEqual(connection.transport, made[2])
    await connection.close()
    await connection.closed
    assert.strictEqual(made[2]!.closes, 1)
  })

  it("the give-up: closed rejects with RestartBudgetExhausted, client.onerror gets it; a throwing onRestart is ignored", async () => {
    const made: Array<FakeTransport> = []
    const client = new FakeClient()
    const errors: Array<Error> = []
    client.onerror = (error) => errors.push(error)
    const connection = await Reconnect.reconnecting(client, () => {
      const transport = new FakeTransport()
      // Every restart's server fails to start.
      const start = made.length + 1
      if (start > 1) transport.start = () => Promise.reject(new Error(`start ${start} failed`))
      made.push(transport)
      return transport
    }, {
      initialDelay: 0,
      restartBudget: 2,
      onRestart: () => {
        throw new Error("the host's callback throws")
      }
    })
    made[0]!.crash()
    const outcome = await connection.closed.then(() => undefined, (e: unknown) => e)
    assert.instanceOf(outcome, Reconnect.RestartBudgetExhausted)
    const exhausted = outcome as Reconnect.RestartBudgetExhausted
    assert.strictEqual(exhausted.restarts, 2)
    assert.strictEqual(exhausted.lastError.message, "start 3 failed")
    assert.match(exhausted.message, /restarted 2 times in a row/)
    assert.deepStrictEqual(errors, [exhausted])
    assert.strictEqual(made.length, 3)
    assert.strictEqual(connection.restarts, 2)
    assert.isUndefined(connection.transport)
  })

  it("the first connection failing rejects, with no restart", async () => {
    let made = 0
    const client = new FakeClient()
    client.connect = () => Promise.reject(new Error("spawn ENOENT"))
    const error = await Reconnect.reconnecting(client, () => {
      made++
      return new FakeTransport()
    }).then(() => undefined, (e: unknown) => e)
    assert.match(String(error), /ENOENT/)
    assert.strictEqual(made, 1)
  })
})
