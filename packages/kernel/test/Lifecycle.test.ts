import { assert, describe, it } from "@effect/vitest"
import { RpcError } from "@lifeline/jsonrpc"
import { Lifecycle, PeerError } from "@lifeline/kernel"
import { Clock, Deferred, Duration, Effect, Exit, Fiber, Logger, Option, References, Scope, Stream } from "effect"
import { TestClock } from "effect/testing"

type Tag = Lifecycle.Tag

// Written out independently of the module's table, so the two check each other.
const legal: ReadonlyArray<readonly [Tag, Tag]> = [
  ["Starting", "Initializing"],
  ["Starting", "Ready"],
  ["Starting", "Closing"],
  ["Starting", "Failed"],
  ["Initializing", "Ready"],
  ["Initializing", "Closing"],
  ["Initializing", "Failed"],
  ["Ready", "Closing"],
  ["Ready", "Failed"],
  ["Closing", "Closed"],
  ["Closing", "Failed"]
]
const isLegal = (from: Tag, to: Tag) => legal.some(([f, t]) => f === from && t === to)

const failure = new Lifecycle.HandshakeTimeout({ timeoutMillis: 1 })

const sample = (tag: Tag): Lifecycle.State => {
  switch (tag) {
    case "Starting":
      return Lifecycle.Starting()
    case "Initializing":
      return Lifecycle.Initializing()
    case "Ready":
      return Lifecycle.Ready()
    case "Closing":
      return Lifecycle.Closing({ reason: "Stop" })
    case "Closed":
      return Lifecycle.Closed()
    case "Failed":
      return Lifecycle.Failed({ error: failure })
  }
}

// A legal path from Starting to each state.
const paths: { readonly [K in Tag]: ReadonlyArray<Tag> } = {
  Starting: [],
  Initializing: ["Initializing"],
  Ready: ["Initializing", "Ready"],
  Closing: ["Initializing", "Ready", "Closing"],
  Closed: ["Closing", "Closed"],
  Failed: ["Initializing", "Failed"]
}

const makeIn = (tag: Tag) =>
  Effect.gen(function*() {
    const lifecycle = yield* Lifecycle.make
    for (const step of paths[tag]) yield* lifecycle.transition(sample(step))
    assert.strictEqual(lifecycle.unsafeState()._tag, tag)
    return lifecycle
  })

const history = (lifecycle: Lifecycle.Lifecycle) =>
  // Only the part published so far: take exactly as many as happened, or the stream would wait for more.
  Effect.gen(function*() {
    const state = lifecycle.unsafeState()
    const collected: Array<Lifecycle.Event> = []
    if (state._tag === "Starting") return collected
    yield* lifecycle.events.pipe(
      Stream.takeUntil((event) => event.to === state),
      Stream.runForEach((event) => Effect.sync(() => collected.push(event)))
    )
    return collected
  })

// TestClock.adjust does not wait for forked fibers to reach their sleep, so wait until they have. Effect 4's TestClock
// does not list its sleeps: `fork` runs the effect on a Clock that counts them on their way to the TestClock.
const sleepCounter = Effect.gen(function*() {
  const clock = yield* Clock.Clock
  let sleeps = 0
  const counting: Clock.Clock = {
    ...clock,
    sleep: (duration) =>
      Effect.suspend(() => {
        sleeps++
        return clock.sleep(duration)
      })
  }
  return {
    fork: <A, E>(effect: Effect.Effect<A, E>) => Effect.forkChild(Effect.provideService(effect, Clock.Clock, counting)),
    untilSleeping: (count: number) =>
      Effect.gen(function*() {
        while (sleeps < count) yield* Effect.yieldNow
      })
  }
})

// Effect 4 has no `Fiber.poll`: the fiber's exit if it has one, as an Option.
const poll = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.sync(() => Option.fromNullishOr(fiber.pollUnsafe()))

describe("Lifecycle", () => {
  describe("transition table", () => {
    it("isLegal is exactly the table", () => {
      for (const from of Lifecycle.tags) {
        for (const to of Lifecycle.tags) {
          assert.strictEqual(Lifecycle.isLegal(from, to), isLegal(from, to), `${from} → ${to}`)
        }
      }
    })

    it("terminal and shutting-down states", () => {
      assert.deepStrictEqual(
        Lifecycle.tags.filter((tag) => Lifecycle.isTerminal(sample(tag))),
        ["Closed", "Failed"]
      )
      assert.deepStrictEqual(
        Lifecycle.tags.filter((tag) => Lifecycle.isShuttingDown(sample(tag))),
        ["Closing", "Closed", "Failed"]
      )
    })

    it.effect("a new lifecycle is Starting with no events", () =>
      Effect.gen(function*() {
        const lifecycle = yield* Lifecycle.make
        assert.deepStrictEqual(yield* lifecycle.state, Lifecycle.Starting())
        assert.deepStrictEqual(lifecycle.unsafeState(), Lifecycle.Starting())
      }))

    for (const from of ["Starting", "Initializing", "Ready", "Closing", "Closed", "Failed"] as const) {
      for (const to of ["Starting", "Initializing", "Ready", "Closing", "Closed", "Failed"] as const) {
        if (isLegal(from, to)) {
          it.effect(`${from} → ${to} is legal: the state changes and one event is published`, () =>
            Effect.gen(function*() {
              const lifecycle = yield* makeIn(from)
              const before = yield* history(lifecycle)
              yield* TestClock.adjust("7 millis")
              const event = yield* lifecycle.transition(sample(to))
              assert.deepStrictEqual(event, { from: sample(from), to: sample(to), at: 7 })
              assert.deepStrictEqual(yield* lifecycle.state, sample(to))
              assert.deepStrictEqual(yield* history(lifecycle), [...before, event])
            }))
        } else {
          it.effect(`${from} → ${to} is illegal: IllegalTransition, state and events unchanged`, () =>
            Effect.gen(function*() {
              const lifecycle = yield* makeIn(from)
              const before = yield* history(lifecycle)
              const error = yield* Effect.flip(lifecycle.transition(sample(to)))
              assert.strictEqual(error._tag, "IllegalTransition")
              assert.deepStrictEqual(error.from, sample(from))
              assert.deepStrictEqual(error.to, sample(to))
              assert.include(error.message, "not a legal")
              assert.deepStrictEqual(yield* lifecycle.state, sample(from))
              assert.deepStrictEqual(yield* history(lifecycle), before)
            }))
        }
      }
    }

    it.effect("a compare-and-set transition fails when the expected state is not current", () =>
      Effect.gen(function*() {
        const lifecycle = yield* makeIn("Ready")
        const error = yield* Effect.flip(
          lifecycle.transition(Lifecycle.Closing({ reason: "Stop" }), { from: "Initializing" })
        )
        assert.strictEqual(error.expected, "Initializing")
        assert.include(error.message, "expected Initializing but was Ready")
        assert.deepStrictEqual(yield* lifecycle.state, Lifecycle.Ready())
        yield* lifecycle.transition(Lifecycle.Closing({ reason: "Stop" }), { from: "Ready" })
        assert.deepStrictEqual(yield* lifecycle.state, Lifecycle.Closing({ reason: "Stop" }))
      }))

    it.effect("a compare-and-set transition still obeys the table", () =>
      Effect.gen(function*() {
        const lifecycle = yield* makeIn("Ready")
        const error = yield* Effect.flip(lifecycle.transition(Lifecycle.Initializing(), { from: "Ready" }))
        assert.include(error.message, "not a legal")
        assert.deepStrictEqual(yield* lifecycle.state, Lifecycle.Ready())
      }))
  })

  describe("events and changes", () => {
    it.effect("events arrive in order, stamped with TestClock time", () =>
      Effect.gen(function*() {
        const lifecycle = yield* Lifecycle.make
        const live = yield* Effect.forkChild(Stream.runCollect(lifecycle.events))
        yield* Effect.yieldNow
        yield* TestClock.adjust("10 millis")
        yield* lifecycle.transition(Lifecycle.Initializing())
        yield* TestClock.adjust("1 second")
        yield* lifecycle.transition(Lifecycle.Ready())
        yield* TestClock.adjust("1 minute")
        assert.strictEqual(yield* lifecycle.beginStop("Stop"), "Stopped")
        yield* TestClock.adjust("5 millis")
        yield* lifecycle.transition(Lifecycle.Closed())
        const expected = [
          { from: Lifecycle.Starting(), to: Lifecycle.Initializing(), at: 10 },
          { from: Lifecycle.Initializing(), to: Lifecycle.Ready(), at: 1010 },
          { from: Lifecycle.Ready(), to: Lifecycle.Closing({ reason: "Stop" }), at: 61_010 },
          { from: Lifecycle.Closing({ reason: "Stop" }), to: Lifecycle.Closed(), at: 61_015 }
        ]
        // The live subscriber ends by itself after the terminal state.
        assert.deepStrictEqual(yield* Fiber.join(live), expected)
        // A late subscriber gets the whole story too.
        assert.deepStrictEqual(yield* Stream.runCollect(lifecycle.events), expected)
      }))

    it.effect("a subscriber that joins midway sees the history, then live events, each once", () =>
      Effect.gen(function*() {
        const lifecycle = yield* Lifecycle.make
        yield* lifecycle.transition(Lifecycle.Ready())
        const live = yield* Effect.forkChild(Stream.runCollect(lifecycle.events))
        yield* Effect.yieldNow
        yield* lifecycle.transition(Lifecycle.Failed({ error: failure }))
        assert.deepStrictEqual(
          (yield* Fiber.join(live)).map((event) => `${event.from._tag}→${event.to._tag}`),
          ["Starting→Ready", "Ready→Failed"]
        )
      }))

    it.effect("changes starts with the current state and ends after a terminal one", () =>
      Effect.gen(function*() {
        const lifecycle = yield* makeIn("Ready")
        const seen: Array<Lifecycle.State> = []
        const subscribed = yield* Deferred.make<void>()
        const changes = yield* Effect.forkChild(
          Stream.runForEach(lifecycle.changes, (state) =>
            Effect.sync(() => seen.push(state)).pipe(Effect.andThen(Deferred.succeed(subscribed, void 0))))
        )
        // The first element is the state at subscription, so after it nothing can be missed.
        yield* Deferred.await(subscribed)
        yield* lifecycle.beginStop("Interrupted")
        yield* lifecycle.transition(Lifecycle.Closed())
        yield* Fiber.join(changes)
        assert.deepStrictEqual(seen, [
          Lifecycle.Ready(),
          Lifecycle.Closing({ reason: "Interrupted" }),
          Lifecycle.Closed()
        ])
        assert.deepStrictEqual(yield* Stream.runCollect(lifecycle.changes), [Lifecycle.Closed()])
      }))

    it.effect("closing the scope that made the lifecycle ends its streams", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const lifecycle = yield* Lifecycle.make.pipe(Scope.provide(scope))
        const events = yield* Effect.forkChild(Stream.runCollect(lifecycle.events))
        const changes = yield* Effect.forkChild(Stream.runCollect(lifecycle.changes))
        const waiting = yield* Effect.forkChild(lifecycle.awaitState((state) => state._tag === "Ready"))
        yield* Effect.yieldNow
        yield* Scope.close(scope, Exit.void)
        assert.deepStrictEqual(yield* Fiber.join(events), [])
        assert.deepStrictEqual(yield* Fiber.join(changes), [Lifecycle.Starting()])
        assert.deepStrictEqual(yield* Fiber.join(waiting), Lifecycle.Starting())
        // Subscribing after the scope closed ends at once too.
        assert.deepStrictEqual(yield* Stream.runCollect(lifecycle.events), [])
        assert.deepStrictEqual(yield* Stream.runCollect(lifecycle.changes), [Lifecycle.Starting()])
        assert.deepStrictEqual(yield* lifecycle.awaitState(Lifecycle.State.$is("Ready")), Lifecycle.Starting())
      }))

    it.effect("streams subscribed to after the scope closed still replay the history", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const lifecycle = yield* Lifecycle.make.pipe(Scope.provide(scope))
        yield* lifecycle.transition(Lifecycle.Ready())
        yield* Scope.close(scope, Exit.void)
        assert.deepStrictEqual(
          (yield* Stream.runCollect(lifecycle.events)).map((event) => event.to),
          [Lifecycle.Ready()]
        )
      }))

    it.effect("every transition is logged at Debug with from and to, and added to the current span", () =>
      Effect.gen(function*() {
        const lines: Array<{ level: string; message: unknown; annotations: Record<string, unknown> }> = []
        const logger = Logger.make(({ fiber, logLevel, message }) => {
          lines.push({
            level: logLevel.toUpperCase(),
            message,
            annotations: { ...fiber.getRef(References.CurrentLogAnnotations) }
          })
        })
        const spanEvents = yield* Effect.gen(function*() {
          const lifecycle = yield* Lifecycle.make
          yield* TestClock.adjust("3 millis")
          yield* lifecycle.transition(Lifecycle.Ready())
          yield* lifecycle.beginStop("RemoteShutdown")
          yield* lifecycle.beginStop("Stop") // AlreadyClosing: no transition, no log line
          yield* lifecycle.transition(
            Lifecycle.Failed({ error: new PeerError.PeerClosed({ reason: "TransportFailed" }) })
          )
          const span = yield* Effect.currentSpan
          // The native tracer keeps span events on the span object; its public type does not show them. Log lines
          // are span events too, so keep only ours.
          return (span as unknown as { events: Array<[string, bigint, Record<string, unknown>]> }).events
            .filter(([name]) => name === "lifeline.lifecycle.transition")
        }).pipe(
          Effect.withSpan("test"),
          Effect.provide(Logger.layer([logger], { mergeWithExisting: true })),
          Effect.provideService(References.MinimumLogLevel, "Debug")
        )
        assert.deepStrictEqual(lines.map((line) => [line.level, line.annotations]), [
          ["DEBUG", { from: "Starting", to: "Ready" }],
          ["DEBUG", { from: "Ready", to: "Closing", reason: "RemoteShutdown" }],
          ["DEBUG", { from: "Closing", to: "Failed", error: "PeerClosed" }]
        ])
        assert.deepStrictEqual(spanEvents, [
          ["lifeline.lifecycle.transition", 3_000_000n, { from: "Starting", to: "Ready" }],
          ["lifeline.lifecycle.transition", 3_000_000n, { from: "Ready", to: "Closing", reason: "RemoteShutdown" }],
          ["lifeline.lifecycle.transition", 3_000_000n, {
            from: "Closing",
            to: "Failed",
            error: "PeerClosed"
          }]
        ])
      }))

    it.effect("at the default log level (Info) a transition prints nothing", () =>
      Effect.gen(function*() {
        const levels: Array<string> = []
        const logger = Logger.make(({ logLevel }) => {
          levels.push(logLevel)
        })
        yield* Effect.gen(function*() {
          const lifecycle = yield* Lifecycle.make
          yield* lifecycle.transition(Lifecycle.Ready())
          yield* lifecycle.beginStop("Stop")
          yield* lifecycle.transition(Lifecycle.Closed())
          yield* Effect.logWarning("a warning still shows")
        }).pipe(Effect.scoped, Effect.provide(Logger.layer([logger])))
        assert.deepStrictEqual(levels, ["Warn"])
      }))
  })

  describe("awaitState", () => {
    it.effect("returns at once when the current state matches", () =>
      Effect.gen(function*() {
        const lifecycle = yield* makeIn("Ready")
        assert.deepStrictEqual(yield* lifecycle.awaitState((state) => state._tag === "Ready"), Lifecycle.Ready())
      }))

    it.effect("waits for a later state", () =>
      Effect.gen(function*() {
        const lifecycle = yield* Lifecycle.make
        const waiting = yield* Effect.forkChild(lifecycle.awaitState(Lifecycle.State.$is("Ready")))
        yield* Effect.yieldNow
        yield* lifecycle.transition(Lifecycle.Initializing())
        assert.isTrue(Option.isNone(yield* poll(waiting)))
        yield* lifecycle.transition(Lifecycle.Ready())
        assert.deepStrictEqual(yield* Fiber.join(waiting), Lifecycle.Ready())
      }))

    it.effect("returns the terminal state when the wanted one can no longer come", () =>
      Effect.gen(function*() {
        const lifecycle = yield* makeIn("Initializing")
        const waiting = yield* Effect.forkChild(lifecycle.awaitState(Lifecycle.State.$is("Ready")))
        yield* Effect.yieldNow
        yield* lifecycle.transition(Lifecycle.Failed({ error: failure }))
        assert.deepStrictEqual(yield* Fiber.join(waiting), Lifecycle.Failed({ error: failure }))
        // And already-terminal lifecycles answer at once.
        assert.deepStrictEqual(
          yield* lifecycle.awaitState(Lifecycle.State.$is("Ready")),
          Lifecycle.Failed({ error: failure })
        )
      }))
  })

  describe("beginStop", () => {
    for (const from of ["Starting", "Initializing", "Ready"] as const) {
      it.effect(`from ${from}: Stopped once, then AlreadyClosing`, () =>
        Effect.gen(function*() {
          const lifecycle = yield* makeIn(from)
          assert.strictEqual(yield* lifecycle.beginStop("Stop"), "Stopped")
          assert.deepStrictEqual(yield* lifecycle.state, Lifecycle.Closing({ reason: "Stop" }))
          assert.strictEqual(yield* lifecycle.beginStop("Stop"), "AlreadyClosing")
          assert.strictEqual(yield* lifecycle.beginStop("Interrupted"), "AlreadyClosing")
          // The first reason stays.
          assert.deepStrictEqual(yield* lifecycle.state, Lifecycle.Closing({ reason: "Stop" }))
          const events = yield* history(lifecycle)
          assert.strictEqual(events.filter((event) => event.to._tag === "Closing").length, 1)
        }))
    }

    for (const from of ["Closing", "Closed", "Failed"] as const) {
      it.effect(`from ${from}: AlreadyClosing, state unchanged`, () =>
        Effect.gen(function*() {
          const lifecycle = yield* makeIn(from)
          const before = yield* history(lifecycle)
          for (const reason of ["Stop", "Interrupted", "RemoteShutdown", "TransportClosed"] as const) {
            assert.strictEqual(yield* lifecycle.beginStop(reason), "AlreadyClosing")
          }
          assert.deepStrictEqual(yield* lifecycle.state, sample(from))
          assert.deepStrictEqual(yield* history(lifecycle), before)
        }))
    }

    for (const from of ["Starting", "Initializing", "Ready", "Closing", "Closed", "Failed"] as const) {
      it.effect(`from ${from}: 100 concurrent callers, at most one Stopped`, () =>
        Effect.gen(function*() {
          const lifecycle = yield* makeIn(from)
          const results = yield* Effect.all(
            // Some callers yield first, so the calls interleave with fibers that have already answered.
            Array.from({ length: 100 }, (_, i) =>
              Effect.repeat(Effect.yieldNow, { times: i % 3 }).pipe(
                Effect.andThen(lifecycle.beginStop(i % 2 === 0 ? "Stop" : "Interrupted"))
              )),
            { concurrency: "unbounded" }
          )
          const stopped = results.filter((result) => result === "Stopped").length
          assert.strictEqual(stopped, Lifecycle.isShuttingDown(sample(from)) ? 0 : 1)
          assert.strictEqual(results.length - stopped, results.filter((result) => result === "AlreadyClosing").length)
          const closing = (yield* history(lifecycle)).filter((event) => event.to._tag === "Closing")
          // Exactly one Closing event whichever the start: the one on its path, or the one a caller just made.
          assert.strictEqual(closing.length, paths[from].includes("Closing") || stopped === 1 ? 1 : 0)
        }))
    }

    it.effect("racing a handshake's Ready: one of them wins, never both", () =>
      Effect.gen(function*() {
        const lifecycle = yield* makeIn("Initializing")
        const [stop, ready] = yield* Effect.all(
          [
            lifecycle.beginStop("Stop"),
            Effect.result(lifecycle.transition(Lifecycle.Ready(), { from: "Initializing" }))
          ],
          { concurrency: "unbounded" }
        )
        // Either Ready came first and the stop closed from Ready, or the stop came first and Ready was refused.
        assert.strictEqual(stop, "Stopped")
        assert.deepStrictEqual(yield* lifecycle.state, Lifecycle.Closing({ reason: "Stop" }))
        const path = (yield* history(lifecycle)).map((event) => event.to._tag)
        assert.deepStrictEqual(
          path,
          ready._tag === "Success" ? ["Initializing", "Ready", "Closing"] : ["Initializing", "Closing"]
        )
      }))
  })

  describe("gates", () => {
    const inbound: { readonly [K in Tag]: readonly [request: number | undefined, handshake: number | undefined] } = {
      Starting: [-32002, undefined],
      Initializing: [-32002, undefined],
      Ready: [undefined, -32600],
      Closing: [-32003, -32003],
      Closed: [-32003, -32003],
      Failed: [-32003, -32003]
    }

    for (const tag of ["Starting", "Initializing", "Ready", "Closing", "Closed", "Failed"] as const) {
      it.effect(`inbound in ${tag}`, () =>
        Effect.gen(function*() {
          const lifecycle = yield* makeIn(tag)
          const [request, handshake] = inbound[tag]
          const forRequest = lifecycle.inboundGate("tools/list", false)
          const forHandshake = lifecycle.inboundGate("initialize", true)
          assert.strictEqual(forRequest?.code, request)
          assert.strictEqual(forHandshake?.code, handshake)
          if (forRequest !== undefined) assert.instanceOf(forRequest, RpcError.RpcError)
          if (forRequest !== undefined) assert.include(forRequest.message, "tools/list")
          if (forHandshake !== undefined) assert.instanceOf(forHandshake, RpcError.RpcError)
          assert.deepStrictEqual(forRequest, Lifecycle.inboundGate(sample(tag), "tools/list", false))
        }))

      it.effect(`outbound in ${tag}`, () =>
        Effect.gen(function*() {
          const lifecycle = yield* makeIn(tag)
          const error = lifecycle.outboundGate()
          if (Lifecycle.isShuttingDown(sample(tag))) {
            assert.instanceOf(error, PeerError.ShutdownError)
            assert.strictEqual(error?.phase, tag)
            assert.strictEqual(error?.reason, tag === "Failed" ? "Failed" : "Stop")
          } else {
            assert.isUndefined(error)
          }
        }))
    }

    it("outbound reasons follow what started the shutdown", () => {
      assert.deepStrictEqual(
        Lifecycle.outboundGate(Lifecycle.Closing({ reason: "Interrupted" })),
        new PeerError.ShutdownError({ reason: "Interrupted", phase: "Closing" })
      )
      assert.deepStrictEqual(
        Lifecycle.outboundGate(Lifecycle.Closing({ reason: "RemoteShutdown" })),
        new PeerError.ShutdownError({ reason: "Stop", phase: "Closing", detail: "RemoteShutdown" })
      )
      assert.deepStrictEqual(
        Lifecycle.outboundGate(Lifecycle.Failed({ error: failure })),
        new PeerError.ShutdownError({ reason: "Failed", phase: "Failed", detail: failure.message })
      )
    })
  })

  describe("runHandshake", () => {
    it.effect("a handshake that completes moves Starting → Initializing → Ready and returns its result", () =>
      Effect.gen(function*() {
        const lifecycle = yield* Lifecycle.make
        const { fork, untilSleeping } = yield* sleepCounter
        const seen: Array<Tag> = []
        const handshake = Effect.sync(() => seen.push(lifecycle.unsafeState()._tag)).pipe(
          Effect.andThen(Effect.sleep("2 seconds")),
          Effect.as({ protocolVersion: "1.0" })
        )
        const fiber = yield* fork(Lifecycle.runHandshake(lifecycle, handshake, "10 seconds"))
        yield* untilSleeping(2) // the handshake's sleep and the timeout's
        yield* TestClock.adjust("2 seconds")
        assert.deepStrictEqual(yield* Fiber.join(fiber), { protocolVersion: "1.0" })
        assert.deepStrictEqual(seen, ["Initializing"])
        assert.deepStrictEqual(yield* lifecycle.state, Lifecycle.Ready())
        assert.deepStrictEqual(
          (yield* history(lifecycle)).map((event) => [event.from._tag, event.to._tag, event.at]),
          [["Starting", "Initializing", 0], ["Initializing", "Ready", 2000]]
        )
      }))

    it.effect("a handshake that never finishes fails exactly at the timeout", () =>
      Effect.gen(function*() {
        const lifecycle = yield* Lifecycle.make
        const { fork, untilSleeping } = yield* sleepCounter
        const fiber = yield* fork(Lifecycle.runHandshake(lifecycle, Effect.never, "10 seconds"))
        yield* untilSleeping(1)
        yield* TestClock.adjust(Duration.millis(9_999))
        assert.deepStrictEqual(yield* lifecycle.state, Lifecycle.Initializing())
        assert.isTrue(Option.isNone(yield* poll(fiber)))
        yield* TestClock.adjust("1 millis")
        const error = yield* Effect.flip(Fiber.join(fiber))
        assert.deepStrictEqual(error, new Lifecycle.HandshakeTimeout({ timeoutMillis: 10_000 }))
        assert.include(error.message, "10000 ms")
        const state = yield* lifecycle.state
        assert.isTrue(state._tag === "Failed" && state.error === error)
        const [, failed] = yield* history(lifecycle)
        assert.strictEqual(failed?.at, 10_000)
      }))

    it.effect("the timed-out handshake is interrupted", () =>
      Effect.gen(function*() {
        const lifecycle = yield* Lifecycle.make
        const { fork, untilSleeping } = yield* sleepCounter
        const interrupted = yield* Deferred.make<void>()
        const handshake = Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, void 0)))
        const fiber = yield* fork(Lifecycle.runHandshake(lifecycle, handshake, "1 second"))
        yield* untilSleeping(1)
        yield* TestClock.adjust("1 second")
        yield* Effect.flip(Fiber.join(fiber))
        assert.isTrue(yield* Deferred.isDone(interrupted))
      }))

    it.effect("a handshake that fails moves to Failed with its error", () =>
      Effect.gen(function*() {
        const lifecycle = yield* Lifecycle.make
        const rejected = RpcError.RpcError.invalidParams("unsupported protocol version")
        const error = yield* Effect.flip(Lifecycle.runHandshake(lifecycle, Effect.fail(rejected), "10 seconds"))
        assert.strictEqual(error, rejected)
        const state = yield* lifecycle.state
        // The state keeps the error itself, not the span-carrying proxy the failure travelled in.
        assert.isTrue(state._tag === "Failed" && state.error === rejected)
      }))

    it.effect("a handshake on a lifecycle that is not Starting fails with IllegalTransition and changes nothing", () =>
      Effect.gen(function*() {
        for (const tag of ["Initializing", "Ready", "Closing", "Closed", "Failed"] as const) {
          const lifecycle = yield* makeIn(tag)
          let ran = false
          const error = yield* Effect.flip(
            Lifecycle.runHandshake(lifecycle, Effect.sync(() => (ran = true)), "10 seconds")
          )
          assert.strictEqual(error._tag, "IllegalTransition", tag)
          assert.isFalse(ran, tag)
          assert.deepStrictEqual(yield* lifecycle.state, sample(tag))
        }
      }))

    it.effect("a stop during the handshake wins: a late success is IllegalTransition, the state stays Closing", () =>
      Effect.gen(function*() {
        const lifecycle = yield* Lifecycle.make
        const proceed = yield* Deferred.make<void>()
        const fiber = yield* Effect.forkChild(Lifecycle.runHandshake(lifecycle, Deferred.await(proceed), "10 seconds"))
        yield* lifecycle.awaitState(Lifecycle.State.$is("Initializing"))
        assert.strictEqual(yield* lifecycle.beginStop("Stop"), "Stopped")
        yield* Deferred.succeed(proceed, void 0)
        const error = yield* Effect.flip(Fiber.join(fiber))
        assert.strictEqual(error._tag, "IllegalTransition")
        assert.deepStrictEqual(yield* lifecycle.state, Lifecycle.Closing({ reason: "Stop" }))
      }))

    it.effect("a stop during the handshake wins: a late failure does not mark the lifecycle Failed", () =>
      Effect.gen(function*() {
        const lifecycle = yield* Lifecycle.make
        const proceed = yield* Deferred.make<void>()
        const timeout = new PeerError.RequestTimeout({ method: "initialize", id: 0, timeoutMillis: 5 })
        const handshake = Deferred.await(proceed).pipe(Effect.andThen(Effect.fail(timeout)))
        const fiber = yield* Effect.forkChild(Lifecycle.runHandshake(lifecycle, handshake, "10 seconds"))
        yield* lifecycle.awaitState(Lifecycle.State.$is("Initializing"))
        assert.strictEqual(yield* lifecycle.beginStop("Stop"), "Stopped")
        yield* Deferred.succeed(proceed, void 0)
        assert.strictEqual(yield* Effect.flip(Fiber.join(fiber)), timeout)
        assert.deepStrictEqual(yield* lifecycle.state, Lifecycle.Closing({ reason: "Stop" }))
      }))
  })
})
