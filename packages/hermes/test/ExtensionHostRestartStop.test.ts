import { assert, describe, it } from "@effect/vitest"
import { ExtensionHost, MessageStore, Spawner, WindowPresenter } from "@lifeline/hermes"
import { TestSpawner } from "@lifeline/hermes/testing"
import { Framing } from "@lifeline/jsonrpc"
import { GracefulShutdown, Transport } from "@lifeline/kernel"
import { Effect, Fiber, Option, Queue, Stream } from "effect"
import type { Raw } from "./utils.js"
import { adjust, eventually, makeRaw, poll } from "./utils.js"

const sample = "MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|42|P|2.5\rPID|1||123||DOE^JOHN||19800101"
const spec: Spawner.Spec = { command: "restarting-extension" }
const options: ExtensionHost.Options = { dataDir: "/data", hermesVersion: "test", hostPid: 1 }
const info = { name: "restarting", version: "1.0.0", commands: [] }

/** Generation 1: answers `initialize` and `shutdown`, and crashes when `crash` is offered. */
const crashingFirst = (crashes: Queue.Queue<void>) =>
  Effect.scoped(Effect.flatMap(Transport.Transport, (transport) =>
    Effect.gen(function*() {
      const raw: Raw = yield* makeRaw(transport)
      const init = yield* raw.next
      yield* raw.send({ jsonrpc: "2.0", id: init.id, result: info })
      const serve = Effect.gen(function*() {
        for (;;) {
          const message = yield* raw.next
          if (message.method === "shutdown") {
            return yield* raw.send({ jsonrpc: "2.0", id: message.id, result: { success: true } })
          }
        }
      })
      yield* Effect.raceFirst(serve, Effect.andThen(Queue.take(crashes), Effect.fail("crash")))
    })))

/**
 * A relaunch that never answers `initialize`: records the method of every message it reads, and ends at the end of
 * its input unless `onEnd` says otherwise (`Effect.never`: it ignores it; uninterruptible too: it ignores SIGTERM).
 */
const hanging = (seen: Array<string>, onEnd: Effect.Effect<void> = Effect.void) =>
  Effect.flatMap(Transport.Transport, (transport) =>
    transport.incoming.pipe(
      Framing.decode(Framing.contentLength),
      Stream.runForEach((body) =>
        Effect.sync(() => {
          seen.push(String(JSON.parse(new TextDecoder().decode(body)).method))
        })
      ),
      Effect.ignore,
      Effect.andThen(onEnd)
    ))

const provide = (spawner: TestSpawner.TestSpawner) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.flatMap(MessageStore.make(sample), (store) =>
    self.pipe(
      Effect.provideService(Spawner.Spawner, spawner),
      Effect.provideService(MessageStore.MessageStore, store),
      Effect.provideService(WindowPresenter.WindowPresenter, { present: () => Effect.succeed({ skipped: "test" }) })
    ))

/** Starts the host, crashes generation 1 and waits until generation 2 has been sent `initialize`. */
const crashedAndRelaunching = (seen: Array<string>, crash: Effect.Effect<void>) =>
  Effect.gen(function*() {
    const extension = yield* ExtensionHost.start(spec, options)
    assert.strictEqual(yield* extension.status, "Ready")
    yield* crash
    yield* eventually(Effect.sync(() => seen.includes("initialize")), "the relaunch was sent initialize")
    assert.strictEqual(yield* extension.status, "Starting")
    return extension
  })

const setup = (onEnd?: Effect.Effect<void>) =>
  Effect.gen(function*() {
    const crashes = yield* Queue.unbounded<void>()
    const seen: Array<string> = []
    const spawner = yield* TestSpawner.make((_, index) => index === 0 ? crashingFirst(crashes) : hanging(seen, onEnd))
    return { seen, spawner, crash: Queue.offer(crashes, void 0) }
  })

const summaryOf = (history: ReadonlyArray<ExtensionHost.Event>) => {
  const finished = history.filter((e) => e._tag === "ShutdownFinished")
  return finished.length === 1 && finished[0]._tag === "ShutdownFinished" ? finished[0].summary : undefined
}

describe("ExtensionHost: a shutdown during a restart", () => {
  it.effect("cancels the relaunch: no shutdown request, the process ends with its input at once, no 10 s wait", () =>
    Effect.gen(function*() {
      const { crash, seen, spawner } = yield* setup()
      yield* Effect.gen(function*() {
        const extension = yield* crashedAndRelaunching(seen, crash)
        yield* adjust("3 seconds") // well inside the 10 s initialize bound
        const stopping = yield* Effect.forkChild(extension.shutdown("closing"))
        // No clock moves: the stop waits neither for the handshake nor for a `shutdown` answer.
        const summary = Option.getOrThrow(yield* Fiber.join(stopping))
        assert.deepStrictEqual(
          [summary.reason, summary.responded, summary.killed, summary.terminated, summary.exit, summary.elapsedMillis],
          ["closing", false, false, false, { exitCode: 0, signal: null }, 0]
        )
        assert.match(summary.error ?? "", /not asked: it had not answered initialize yet/)
        assert.deepStrictEqual(seen, ["initialize"], "never sent shutdown")
        assert.strictEqual(yield* extension.status, "Stopped")
        const history = yield* extension.history
        assert.isFalse(history.some((e) => e._tag === "InitializeFailed" || e._tag === "Failed"))
        const exits = history.filter((e) => e._tag === "Exited")
        assert.deepStrictEqual(exits.map((e) => e._tag === "Exited" && [e.generation, e.expected]), [[1, false], [
          2,
          true
        ]])
        // Cancelled for good: no third start, and the next shutdown has nothing to do.
        yield* adjust("20 seconds")
        assert.strictEqual((yield* spawner.spawned).length, 2)
        assert.isTrue(Option.isNone(yield* extension.shutdown("closing")))
      }).pipe(Effect.scoped, provide(spawner))
    }))

  it.effect("a relaunch that ignores the end of its input and SIGTERM is killed within 5 s; disabled ends Disabled", () =>
    Effect.gen(function*() {
      const { crash, seen, spawner } = yield* setup(Effect.uninterruptible(Effect.never))
      yield* Effect.gen(function*() {
        const extension = yield* crashedAndRelaunching(seen, crash)
        const stopping = yield* Effect.forkChild(extension.shutdown("disabled"))
        yield* adjust("1999 millis")
        assert.isTrue(Option.isNone(yield* poll(stopping)), "exitGrace (2 s) before SIGTERM")
        yield* adjust("1 millis") // SIGTERM, ignored
        yield* adjust("999 millis")
        assert.isTrue(Option.isNone(yield* poll(stopping)), "killGrace (1 s) before SIGKILL")
        yield* adjust("1 millis")
        const summary = Option.getOrThrow(yield* Fiber.join(stopping))
        assert.deepStrictEqual(
          [summary.reason, summary.responded, summary.terminated, summary.killed, summary.exit, summary.elapsedMillis],
          ["disabled", false, true, true, { exitCode: null, signal: "SIGKILL" }, 3000]
        )
        assert.isAtMost(summary.elapsedMillis, 5000)
        assert.deepStrictEqual(seen, ["initialize"])
        assert.strictEqual(yield* extension.status, "Disabled")
      }).pipe(Effect.scoped, provide(spawner))
    }))

  it.effect("a second signal forces it at once: SIGKILL, no grace", () =>
    Effect.gen(function*() {
      const registry = yield* GracefulShutdown.make
      const { crash, seen, spawner } = yield* setup(Effect.uninterruptible(Effect.never))
      yield* Effect.gen(function*() {
        const extension = yield* crashedAndRelaunching(seen, crash)
        const stopping = yield* Effect.forkChild(registry.stop)
        yield* adjust("500 millis")
        assert.isTrue(Option.isNone(yield* poll(stopping)))
        // No clock moves from here on.
        yield* registry.force
        yield* Fiber.join(stopping)
        const summary = summaryOf(yield* extension.history)
        assert.deepStrictEqual(summary && [summary.killed, summary.terminated, summary.exit, summary.elapsedMillis], [
          true,
          false,
          { exitCode: null, signal: "SIGKILL" },
          500
        ])
        assert.deepStrictEqual(seen, ["initialize"])
        assert.strictEqual(yield* extension.status, "Stopped")
      }).pipe(
        Effect.scoped,
        Effect.provideService(GracefulShutdown.GracefulShutdown, registry),
        provide(spawner)
      )
    }))

  it.effect("a shutdown during the crash's handling, before the relaunch is spawned: it is never spawned", () =>
    Effect.gen(function*() {
      const lose = yield* Queue.unbounded<void>()
      // Generation 1 closes its stdout and lives on: a lost connection, whose exit the host waits 100 ms for.
      const spawner = yield* TestSpawner.make(() =>
        Effect.scoped(Effect.flatMap(Transport.Transport, (transport) =>
          Effect.gen(function*() {
            const raw: Raw = yield* makeRaw(transport)
            const init = yield* raw.next
            yield* raw.send({ jsonrpc: "2.0", id: init.id, result: info })
            yield* Queue.take(lose)
            yield* transport.end
            return yield* Effect.never
          })))
      )
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        yield* Queue.offer(lose, void 0)
        yield* adjust("50 millis") // inside the 100 ms the host gives a lost process to exit
        const stopping = yield* Effect.forkChild(extension.shutdown("closing"))
        yield* adjust("50 millis") // then SIGKILL, and the restart: cancelled before its spawn
        assert.isTrue(Option.isNone(yield* Fiber.join(stopping)), "nothing was running to shut down")
        assert.strictEqual(yield* extension.status, "Stopped")
        assert.strictEqual((yield* spawner.spawned).length, 1)
        const history = (yield* extension.history).map((e) => e._tag)
        assert.deepStrictEqual(history.filter((tag) => tag === "Spawned" || tag === "Initializing"), [
          "Spawned",
          "Initializing"
        ])
        assert.include(history, "Restarting")
        yield* adjust("20 seconds")
        assert.strictEqual((yield* spawner.spawned).length, 1)
      }).pipe(Effect.scoped, provide(spawner))
    }))

  it.effect("a relaunch already up is shut down at once, with a shutdown request, as any running extension", () =>
    Effect.gen(function*() {
      const crashes = yield* Queue.unbounded<void>()
      const spawner = yield* TestSpawner.make(() => crashingFirst(crashes))
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        yield* Queue.offer(crashes, void 0)
        yield* eventually(Effect.map(spawner.spawned, (s) => s.length === 2), "relaunched")
        yield* extension.awaitStatus((s) => s === "Ready")
        const summary = Option.getOrThrow(yield* extension.shutdown("closing"))
        assert.deepStrictEqual([summary.responded, summary.success, summary.killed], [true, true, false])
        assert.strictEqual(yield* extension.status, "Stopped")
      }).pipe(Effect.scoped, provide(spawner))
    }))
})
