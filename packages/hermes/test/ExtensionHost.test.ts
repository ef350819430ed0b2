import { assert, describe, it } from "@effect/vitest"
import {
  Editor,
  Extension,
  ExtensionHost,
  HermesProtocol,
  MessageStore,
  Spawner,
  WindowPresenter
} from "@lifeline/hermes"
import { TestSpawner } from "@lifeline/hermes/testing"
import { GracefulShutdown, ShutdownPolicy, Transport } from "@lifeline/kernel"
import type { Duration } from "effect"
import { Deferred, Effect, Fiber, Option, Queue, Ref, Schema, SubscriptionRef } from "effect"
import type { Raw } from "./utils.js"
import { adjust, eventually, makeMemoryFs, makeRaw, poll } from "./utils.js"

const sample = "MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|42|P|2.5\rPID|1||123||DOE^JOHN||19800101"
const spec: Spawner.Spec = { command: "hl7-extension" }
const options: ExtensionHost.Options = { dataDir: "/data", hermesVersion: "test", hostPid: 1 }

/** A real SDK extension: marks the message, counts runs in its state, opens a window, works slowly if asked. */
const marker = (fs = makeMemoryFs(), policy: ShutdownPolicy.Policy = ShutdownPolicy.FailFast()) =>
  Extension.run(Extension.make({
    name: "marker",
    version: "2.0.0",
    policy,
    state: { schema: Schema.Struct({ runs: Schema.Number }), initial: { runs: 0 } },
    commands: {
      "marker.mark": {
        title: "Mark",
        run: ({ state }) =>
          Effect.gen(function*() {
            const { runs } = yield* SubscriptionRef.updateAndGet(state, (s) => ({ runs: s.runs + 1 }))
            yield* Editor.patchMessage([{ path: "PID-5.1", value: `RUN${runs}` }])
          })
      },
      "marker.bad": {
        title: "Patch a bad path",
        run: () => Effect.ignore(Editor.patchMessage([{ path: "PID5", value: "x" }]))
      },
      "marker.slow": { title: "Work for two seconds", run: () => Effect.sleep("2 seconds") },
      "marker.window": {
        title: "Open a window",
        run: () =>
          Effect.gen(function*() {
            const window = yield* Editor.openWindow({ url: "http://127.0.0.1:9/report", title: "Report" })
            yield* window.closed
            yield* Editor.patchMessage([{ path: "PID-5.2", value: `CLOSED-${window.windowId}` }])
          })
      }
    }
  })).pipe(Effect.provide(fs.layer))

/** A hand-written extension: `script` drives the wire itself. */
const raw = (script: (raw: Raw) => Effect.Effect<unknown, unknown>): TestSpawner.Behaviour =>
  Effect.scoped(Effect.flatMap(Transport.Transport, (transport) => Effect.flatMap(makeRaw(transport), script)))

const rawInfo = { name: "raw", version: "0.0.1", commands: [{ id: "raw.run", title: "Run" }] }

/** Reads the `initialize` request and answers it with `result`. */
const answerInitialize = (raw: Raw, result: unknown = rawInfo) =>
  Effect.flatMap(raw.next, (request) => raw.send({ jsonrpc: "2.0", id: request.id, result }))

/**
 * Answers `initialize` with `info` (default `rawInfo`), hands every later message to `onMessage` (`shutdown` too,
 * before it is answered), ends once it has answered `shutdown`, and crashes when `crash` fails.
 */
const polite = (
  options: {
    readonly info?: unknown
    readonly onMessage?: (message: any) => Effect.Effect<void>
    readonly crash?: Effect.Effect<void, unknown>
  } = {}
) =>
  raw((raw) =>
    Effect.gen(function*() {
      yield* answerInitialize(raw, options.info)
      const serve = Effect.gen(function*() {
        for (;;) {
          const message = yield* raw.next
          if (options.onMessage !== undefined) yield* options.onMessage(message)
          if (message.method === "shutdown") {
            return yield* raw.send({ jsonrpc: "2.0", id: message.id, result: { success: true } })
          }
        }
      })
      yield* Effect.raceFirst(serve, Effect.andThen(options.crash ?? Effect.never, Effect.never))
    })
  )

/** Moves the clock in small steps until `fiber` is done: for sequences whose sleeps start at unknown moments. */
const advanceUntilDone = <A, E>(fiber: Fiber.Fiber<A, E>, step: Duration.Input = "100 millis", max = 200) =>
  Effect.gen(function*() {
    for (let i = 0; i < max && Option.isNone(yield* poll(fiber)); i++) {
      yield* adjust(step)
      yield* eventually(Effect.succeed(true))
    }
    return yield* Fiber.join(fiber)
  })

const layers = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  spawner: TestSpawner.TestSpawner,
  store?: MessageStore.MessageStore.Service
) =>
  Effect.gen(function*() {
    const messages = store ?? (yield* MessageStore.make(sample))
    return yield* self.pipe(
      Effect.provideService(Spawner.Spawner, spawner),
      Effect.provideService(MessageStore.MessageStore, messages),
      Effect.provideService(WindowPresenter.WindowPresenter, {
        present: (window) => Effect.succeed({ skipped: `test: ${window.url}` })
      })
    )
  })

/** `marker()`, completing `reason` with the reason of the shutdown its run ended with. */
const markerTelling = (reason: Deferred.Deferred<string>) =>
  marker().pipe(Effect.tap((outcome) => Deferred.succeed(reason, String(outcome.reason))))

/** An extension that crashes each time `crash` runs; `spawner` starts it, again after each crash. */
const crashing = Effect.gen(function*() {
  const crashes = yield* Queue.unbounded<void>()
  const spawner = yield* TestSpawner.make(() =>
    polite({ crash: Effect.andThen(Queue.take(crashes), Effect.fail("crash")) })
  )
  return { spawner, crash: Queue.offer(crashes, void 0) }
})

/** What `shutdown` (closing) sums up when the extension answered success and exited 0, with its times set to 0. */
const cleanClosing: ExtensionHost.ShutdownSummary = {
  reason: "closing",
  responded: true,
  success: true,
  error: undefined,
  killed: false,
  terminated: false,
  exit: { exitCode: 0, signal: null },
  elapsedMillis: 0,
  elapsedMs: 0
}

const tags = (events: ReadonlyArray<ExtensionHost.Event>) =>
  events.filter((e) => e._tag !== "StatusChanged" && e._tag !== "RequestServed").map((e) => e._tag)

describe("ExtensionHost", () => {
  it.effect("starts, initializes, executes commands, serves editor/*, and shuts down with closing", () =>
    Effect.gen(function*() {
      const spawner = yield* TestSpawner.make(() => marker())
      const store = yield* MessageStore.make(sample)
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        assert.strictEqual(yield* extension.status, "Ready")
        const info = Option.getOrThrow(yield* extension.info)
        assert.strictEqual(info.name, "marker")
        assert.deepStrictEqual(info.commands.map((c) => c.id), [
          "marker.mark",
          "marker.bad",
          "marker.slow",
          "marker.window"
        ])
        yield* extension.execute("marker.mark")
        yield* eventually(Effect.map(store.current, (m) => m.includes("RUN1^JOHN")), "the message was patched")
        yield* extension.awaitQuiet("300 millis").pipe(Effect.forkChild, Effect.tap(adjust("300 millis")))
        const summary = Option.getOrThrow(yield* extension.shutdown("closing"))
        assert.deepStrictEqual({ ...summary, elapsedMillis: 0, elapsedMs: 0 }, cleanClosing)
        assert.strictEqual(yield* extension.status, "Stopped")
        assert.deepStrictEqual(tags(yield* extension.history), [
          "Spawned",
          "Initializing",
          "Ready",
          "CommandSent",
          "ShutdownStarted",
          "ShutdownFinished",
          "Exited"
        ])
        const served = (yield* extension.history).filter((e) => e._tag === "RequestServed")
        assert.deepStrictEqual(served.map((e) => [e.method, e.ok]), [["editor/patchMessage", true]])
        assert.deepStrictEqual((yield* spawner.spawned)[0].env, { [HermesProtocol.DATA_DIR_VARIABLE]: "/data" })
      }).pipe((self) => layers(self, spawner, store))
    }))

  it.effect("initialize timeout: the extension is marked failed and its process killed", () =>
    Effect.gen(function*() {
      const spawner = yield* TestSpawner.make(() => Effect.never)
      yield* Effect.gen(function*() {
        const starting = yield* Effect.forkChild(ExtensionHost.start(spec, options))
        yield* adjust("9999 millis")
        assert.isTrue(Option.isNone(yield* poll(starting)))
        yield* adjust("1 milli")
        const extension = yield* Fiber.join(starting)
        assert.strictEqual(yield* extension.status, "Failed")
        const history = yield* extension.history
        const failed = history.find((e) => e._tag === "InitializeFailed")
        assert.strictEqual(failed?._tag === "InitializeFailed" && failed.reason, "timeout")
        const exited = history.find((e) => e._tag === "Exited")
        assert.deepStrictEqual(exited?._tag === "Exited" && exited.status, { exitCode: null, signal: "SIGKILL" })
        assert.strictEqual((yield* Effect.flip(extension.execute("anything"))).reason, "NotReady")
      }).pipe((self) => layers(self, spawner))
    }))

  it.effect("initialize error and exit before initialize are failures too", () =>
    Effect.gen(function*() {
      const refusing = yield* TestSpawner.make(() =>
        raw((raw) =>
          Effect.flatMap(raw.next, (request) =>
            Effect.andThen(
              raw.send({ jsonrpc: "2.0", id: request.id, error: { code: -32000, message: "no licence" } }),
              Effect.never
            ))
        )
      )
      const crashing = yield* TestSpawner.make(() => Effect.fail("segfault"))
      for (
        const [spawner, reason, detail] of [[refusing, "error", "-32000 no licence"], [crashing, "exited", ""]] as const
      ) {
        yield* Effect.gen(function*() {
          const extension = yield* ExtensionHost.start(spec, options)
          assert.strictEqual(yield* extension.status, "Failed")
          const failed = (yield* extension.history).find((e) => e._tag === "InitializeFailed")
          assert.strictEqual(failed?._tag === "InitializeFailed" && failed.reason, reason)
          if (detail !== "") assert.strictEqual(failed?._tag === "InitializeFailed" && failed.detail, detail)
        }).pipe((self) => layers(self, spawner))
      }
    }))

  it.effect("an initialize result whose name is not a directory name fails the extension with initialize-error", () =>
    Effect.gen(function*() {
      // The name becomes <dataDir>/extensions/<name>: a separator, dots only, or anything outside the protocol's
      // characters would put it elsewhere. The name is shown escaped and cut: it comes from the extension.
      const rule = `1 to 128 letters, digits, ".", "_" or "-", not dots only (it names the extension's data directory)`
      const notAName = (shown: string) => `initialize: ${shown} is not an extension name: ${rule}`
      const refused: ReadonlyArray<readonly [string, string]> = [
        ["../../x", notAName(`"../../x"`)],
        ["..", notAName(`".."`)],
        [".", notAName(`"."`)],
        ["...", notAName(`"..."`)],
        ["a/b", notAName(`"a/b"`)],
        ["a\\b", notAName(`"a\\\\b"`)],
        ["/etc", notAName(`"/etc"`)],
        ["C:x", notAName(`"C:x"`)],
        ["a b", notAName(`"a b"`)],
        ["x\n\u001b[31m\u202eé😀", notAName(`"x\\n\\u001b[31m\\u202e\\u00e9\\ud83d\\ude00"`)],
        ["x".repeat(129), notAName(`"${"x".repeat(64)}"… (65 more characters)`)],
        // The Schema itself refuses an empty name.
        [
          "",
          "initialize: the result does not match its Schema: Expected a value with a length of at least 1\n  at [\"name\"]"
        ]
      ]
      for (const [name, detail] of refused) {
        const seen = yield* Queue.unbounded<any>()
        const spawner = yield* TestSpawner.make(() =>
          polite({ info: { name, version: "1.0.0", commands: [] }, onMessage: (message) => Queue.offer(seen, message) })
        )
        yield* Effect.gen(function*() {
          const extension = yield* ExtensionHost.start(spec, options)
          assert.strictEqual(yield* extension.status, "Failed")
          assert.isTrue(Option.isNone(yield* extension.info))
          const history = yield* extension.history
          const failed = history.find((e) => e._tag === "InitializeFailed")
          assert.deepStrictEqual(failed?._tag === "InitializeFailed" && [failed.reason, failed.detail], [
            "error",
            `-32603 Internal error: ${detail}`
          ])
          assert.isFalse(history.some((e) => e._tag === "Ready"))
          // It never hears `initialized`, and its process is stopped.
          assert.deepStrictEqual(yield* Queue.clear(seen), [])
          const exited = history.find((e) => e._tag === "Exited")
          assert.deepStrictEqual(exited?._tag === "Exited" && exited.status, { exitCode: null, signal: "SIGKILL" })
        }).pipe((self) => layers(self, spawner))
      }
      // The protocol's characters, up to 128 of them, are accepted, dots included where they are not all there is.
      for (const name of ["a", "hl7.anonymise_2-b", ".config", "a..b", "-", "_", "x".repeat(128)]) {
        const spawner = yield* TestSpawner.make(() => polite({ info: { name, version: "1.0.0", commands: [] } }))
        yield* Effect.gen(function*() {
          const extension = yield* ExtensionHost.start(spec, options)
          assert.strictEqual(yield* extension.status, "Ready", name)
          assert.strictEqual(Option.getOrThrow(yield* extension.info).name, name)
        }).pipe(Effect.scoped, (self) => layers(self, spawner))
      }
    }))

  it.effect("shutdown within 5 s: a draining extension finishes its command, answers success and exits", () =>
    Effect.gen(function*() {
      const spawner = yield* TestSpawner.make(() => marker(makeMemoryFs(), ShutdownPolicy.drain("3 seconds")))
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        yield* extension.execute("marker.slow")
        const stopping = yield* Effect.forkChild(extension.shutdown("disabled"))
        yield* adjust("2 seconds")
        const summary = Option.getOrThrow(yield* Fiber.join(stopping))
        assert.isTrue(summary.responded && summary.success && !summary.killed)
        assert.strictEqual(summary.elapsedMillis, 2000)
        assert.strictEqual(yield* extension.status, "Disabled")
        assert.strictEqual((yield* Effect.flip(extension.execute("marker.mark"))).reason, "NotReady")
      }).pipe((self) => layers(self, spawner))
    }))

  it.effect("shutdown timeout: no answer within 5 s, the process is killed", () =>
    Effect.gen(function*() {
      const spawner = yield* TestSpawner.make(() => raw((raw) => Effect.andThen(answerInitialize(raw), Effect.never)))
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        const stopping = yield* Effect.forkChild(extension.shutdown())
        yield* adjust("4999 millis")
        assert.isTrue(Option.isNone(yield* poll(stopping)))
        yield* adjust("1 milli")
        const summary = Option.getOrThrow(yield* Fiber.join(stopping))
        assert.isFalse(summary.responded)
        assert.isTrue(summary.killed)
        assert.deepStrictEqual(summary.exit, { exitCode: null, signal: "SIGKILL" })
        assert.strictEqual(summary.elapsedMillis, 5000)
        assert.strictEqual(summary.error, "no answer within 5s")
        assert.strictEqual(yield* extension.status, "Stopped")
      }).pipe((self) => layers(self, spawner))
    }))

  it.effect("an error answer to shutdown is logged and the process still terminated", () =>
    Effect.gen(function*() {
      // One that exits by itself after answering the error (the SDK), one that stays and must be signalled.
      const fs = makeMemoryFs()
      fs.failRename = true
      const sdk = yield* TestSpawner.make(() => marker(fs))
      const stubborn = yield* TestSpawner.make(() =>
        raw((raw) =>
          Effect.gen(function*() {
            yield* answerInitialize(raw)
            for (;;) {
              const message = yield* raw.next
              if (message.method === "shutdown") {
                yield* raw.send({
                  jsonrpc: "2.0",
                  id: message.id,
                  error: { code: -32000, message: "Shutdown failed", data: "Could not save state to disk" }
                })
              }
            }
          })
        )
      )
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        const summary = Option.getOrThrow(yield* extension.shutdown())
        assert.isTrue(summary.responded)
        assert.isFalse(summary.success)
        assert.match(summary.error!, /^-32000 Shutdown failed: Could not save state to disk: /)
        assert.deepStrictEqual(summary.exit, { exitCode: 0, signal: null })
      }).pipe((self) => layers(self, sdk))
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        const summary = Option.getOrThrow(yield* advanceUntilDone(yield* Effect.forkChild(extension.shutdown())))
        assert.strictEqual(summary.error, "-32000 Shutdown failed: Could not save state to disk")
        assert.isTrue(summary.terminated)
        assert.isFalse(summary.killed)
        assert.deepStrictEqual(summary.exit, { exitCode: null, signal: "SIGTERM" })
      }).pipe((self) => layers(self, stubborn))
    }))

  it.effect("command/execute goes out as a notification: no id, never answered", () =>
    Effect.gen(function*() {
      const seen = yield* Queue.unbounded<any>()
      const spawner = yield* TestSpawner.make(() => polite({ onMessage: (m) => Queue.offer(seen, m) }))
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        assert.deepStrictEqual(yield* Queue.take(seen), { jsonrpc: "2.0", method: "initialized" })
        yield* extension.execute("raw.run", [1, "two"])
        assert.deepStrictEqual(yield* Queue.take(seen), {
          jsonrpc: "2.0",
          method: "command/execute",
          params: { command: "raw.run", arguments: [1, "two"] }
        })
        assert.strictEqual((yield* Effect.flip(extension.execute("raw.other"))).reason, "UnknownCommand")
      }).pipe((self) => layers(self, spawner))
    }))

  it.effect("a bad patch path gets -32602 with the reason; the message is unchanged", () =>
    Effect.gen(function*() {
      const spawner = yield* TestSpawner.make(() => marker())
      const store = yield* MessageStore.make(sample)
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        yield* extension.execute("marker.bad")
        yield* eventually(
          Effect.map(extension.history, (h) => h.some((e) => e._tag === "RequestServed")),
          "the patch was served"
        )
        const served = (yield* extension.history).find((e) => e._tag === "RequestServed")
        assert.isTrue(served?._tag === "RequestServed" && !served.ok)
        assert.match(served?._tag === "RequestServed" ? served.detail! : "", /^-32602 Invalid params: .*InvalidPath/)
        assert.strictEqual(yield* store.current, sample)
      }).pipe((self) => layers(self, spawner, store))
    }))

  it.effect("ui/openWindow: recorded, presented, closed, and window/closed sent to the extension", () =>
    Effect.gen(function*() {
      const spawner = yield* TestSpawner.make(() => marker())
      const store = yield* MessageStore.make(sample)
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        yield* extension.execute("marker.window")
        yield* eventually(Effect.map(store.current, (m) => m.includes("CLOSED-window-1")), "the window closed")
        const history = yield* extension.history
        assert.deepStrictEqual(tags(history).slice(3), ["CommandSent", "WindowOpened", "WindowShown", "WindowClosed"])
        const shown = history.find((e) => e._tag === "WindowShown")
        assert.deepStrictEqual(shown?._tag === "WindowShown" && shown.presentation, {
          skipped: "test: http://127.0.0.1:9/report"
        })
      }).pipe((self) => layers(self, spawner, store))
    }))

  it.effect("a crash is followed by a restart; when the restart budget is exhausted it stays failed", () =>
    Effect.gen(function*() {
      const { crash, spawner } = yield* crashing
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, {
          ...options,
          restart: { maxRestarts: 2, within: "1 minute" }
        })
        for (const generation of [2, 3]) {
          yield* crash
          yield* eventually(Effect.map(spawner.spawned, (s) => s.length === generation), "restarted")
          yield* extension.awaitStatus((s) => s === "Ready")
          const ready = (yield* extension.history).filter((e) => e._tag === "Ready")
          assert.strictEqual(ready[ready.length - 1]._tag === "Ready" && ready[ready.length - 1].generation, generation)
        }
        yield* crash
        assert.strictEqual(yield* extension.awaitStatus((s) => s === "Failed"), "Failed")
        const history = yield* extension.history
        const crashes = history.filter((e) => e._tag === "Exited" && !e.expected)
        assert.strictEqual(crashes.length, 3)
        const failed = history[history.length - 2]
        assert.isTrue(failed._tag === "Failed" && failed.reason.includes("restart budget (2) is exhausted"))
        assert.strictEqual((yield* spawner.spawned).length, 3)
        assert.isTrue(Option.isNone(yield* extension.shutdown()))
      }).pipe((self) => layers(self, spawner))
    }))

  it.effect("crashes further apart than the window never exhaust the budget", () =>
    Effect.gen(function*() {
      const { crash, spawner } = yield* crashing
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, {
          ...options,
          restart: { maxRestarts: 1, within: "1 minute" }
        })
        for (let i = 0; i < 3; i++) {
          yield* crash
          yield* eventually(Effect.map(spawner.spawned, (s) => s.length === i + 2), "restarted")
          yield* extension.awaitStatus((s) => s === "Ready")
          yield* adjust("61 seconds")
        }
        assert.strictEqual((yield* spawner.spawned).length, 4)
      }).pipe((self) => layers(self, spawner))
    }))

  it.effect("reload shuts down with reason reload and starts again; state carries over", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFs()
      const reasons = yield* Ref.make<Array<string>>([])
      const spawner = yield* TestSpawner.make(() =>
        marker(fs).pipe(Effect.tap((outcome) => Ref.update(reasons, (r) => [...r, String(outcome.reason)])))
      )
      const store = yield* MessageStore.make(sample)
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        yield* extension.execute("marker.mark")
        yield* eventually(Effect.map(store.current, (m) => m.includes("RUN1^")), "first run")
        assert.strictEqual(yield* extension.reload, "Ready")
        yield* extension.execute("marker.mark")
        yield* eventually(Effect.map(store.current, (m) => m.includes("RUN2^")), "second run, state reloaded")
        assert.deepStrictEqual(yield* Ref.get(reasons), ["reload"])
        const started = (yield* extension.history).filter((e) => e._tag === "ShutdownStarted")
        assert.deepStrictEqual(started.map((e) => e._tag === "ShutdownStarted" && e.reason), ["reload"])
        assert.strictEqual((yield* spawner.spawned).length, 2)
      }).pipe((self) => layers(self, spawner, store))
    }))

  it.effect("each shutdown reason reaches the extension and ends in the matching status", () =>
    Effect.gen(function*() {
      const expected = { closing: "Stopped", disabled: "Disabled", reload: "Stopped", error: "Stopped" } as const
      for (const reason of HermesProtocol.ShutdownReason.literals) {
        const received = yield* Deferred.make<string>()
        const spawner = yield* TestSpawner.make(() => markerTelling(received))
        yield* Effect.gen(function*() {
          const extension = yield* ExtensionHost.start(spec, options)
          const summary = Option.getOrThrow(yield* extension.shutdown(reason))
          assert.strictEqual(summary.reason, reason)
          assert.isTrue(summary.success)
          assert.strictEqual(yield* Deferred.await(received), reason)
          assert.strictEqual(yield* extension.status, expected[reason])
        }).pipe(Effect.scoped, (self) => layers(self, spawner))
      }
    }))

  it.effect("closing the host's scope shuts the extension down with reason closing", () =>
    Effect.gen(function*() {
      const reason = yield* Deferred.make<string>()
      const spawner = yield* TestSpawner.make(() => markerTelling(reason))
      yield* Effect.scoped(ExtensionHost.start(spec, options)).pipe((self) => layers(self, spawner))
      assert.strictEqual(yield* Deferred.await(reason), "closing")
    }))

  it.effect("under GracefulShutdown (NodeSignals.runMain), a stop sends shutdown (closing) and runs the ladder", () =>
    Effect.gen(function*() {
      const registry = yield* GracefulShutdown.make
      // The extension runs in this process: it gets a registry of its own, as a process of its own would.
      const itsOwn = yield* GracefulShutdown.make
      const reason = yield* Deferred.make<string>()
      const spawner = yield* TestSpawner.make(() =>
        markerTelling(reason).pipe(Effect.provideService(GracefulShutdown.GracefulShutdown, itsOwn))
      )
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        // The host's stop is registered; the extension's connection is not: it must carry `shutdown` first.
        assert.strictEqual(yield* registry.size, 1)
        yield* registry.stop
        assert.strictEqual(yield* Deferred.await(reason), "closing")
        assert.strictEqual(yield* extension.status, "Stopped")
        const finished = (yield* extension.history).find((e) => e._tag === "ShutdownFinished")
        assert.deepStrictEqual(
          finished?._tag === "ShutdownFinished" && { ...finished.summary, elapsedMillis: 0, elapsedMs: 0 },
          cleanClosing
        )
        // Closing the Scope afterwards finds it stopped: nothing runs twice.
        assert.isTrue(Option.isNone(yield* extension.shutdown()))
      }).pipe(
        Effect.scoped,
        Effect.provideService(GracefulShutdown.GracefulShutdown, registry),
        (self) => layers(self, spawner)
      )
      assert.strictEqual(yield* registry.size, 0)
    }))

  it.effect("a forced stop (a second signal) cuts the wait for the answer short: SIGKILL at once", () =>
    Effect.gen(function*() {
      const registry = yield* GracefulShutdown.make
      const spawner = yield* TestSpawner.make(() => raw((raw) => Effect.andThen(answerInitialize(raw), Effect.never)))
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        assert.strictEqual(yield* registry.size, 1)
        const stopping = yield* Effect.forkChild(registry.stop)
        yield* adjust("1 second")
        assert.isTrue(Option.isNone(yield* poll(stopping)), "waiting for the answer")
        // No clock moves from here on.
        yield* registry.force
        yield* Fiber.join(stopping)
        const finished = (yield* extension.history).find((e) => e._tag === "ShutdownFinished")
        const summary = finished?._tag === "ShutdownFinished" ? finished.summary : undefined
        assert.deepStrictEqual(summary && [summary.responded, summary.killed, summary.terminated, summary.exit], [
          false,
          true,
          false,
          { exitCode: null, signal: "SIGKILL" }
        ])
        assert.strictEqual(summary?.error, "no answer before the stop was forced")
        assert.strictEqual(summary?.elapsedMillis, 1000)
        assert.strictEqual(yield* extension.status, "Stopped")
      }).pipe(
        Effect.scoped,
        Effect.provideService(GracefulShutdown.GracefulShutdown, registry),
        (self) => layers(self, spawner)
      )
    }))
})
