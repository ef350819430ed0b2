/**
 * The SDK's shutdown checklist step by step (docs/protocol.md, "shutdown"), on the TestClock: how long each step may
 * take, what each failure says in the answer and in what order, that it runs once, and how the run's ending is logged
 * (mutation testing, issue 20). Extension.test.ts covers the happy paths.
 */
import { assert, describe, it } from "@effect/vitest"
import { Editor, Extension, HostMonitor } from "@lifeline/hermes"
import { GracefulShutdown, ShutdownPolicy, Transport } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import type { Duration, Path } from "effect"
import { ConfigProvider, Effect, Fiber, FileSystem, Layer, Logger, Option, References, Schema } from "effect"
import type { MemoryFs } from "./utils.js"
import { adjust, eventually, makeMemoryFs, makeRaw, poll } from "./utils.js"

const State = Schema.Struct({ runs: Schema.Number })
const stateFile = "/data/extensions/check/state.json"

interface Options {
  readonly policy?: ShutdownPolicy.Policy
  readonly budget?: Duration.Input
  /** What releasing the extension's resources does. */
  readonly release?: Effect.Effect<void>
}

/** An extension whose commands record what happens to them in `events`. */
const checked = (events: Array<string>, options: Options = {}) => {
  const push = (event: string) => Effect.sync(() => void events.push(event))
  return Extension.make({
    name: "check",
    version: "1.0.0",
    policy: options.policy ?? ShutdownPolicy.FailFast(),
    shutdownBudget: options.budget,
    state: { schema: State, initial: { runs: 0 } },
    resources: Effect.acquireRelease(Effect.void, () => options.release ?? push("released")),
    commands: {
      work: {
        title: "Work for two seconds",
        run: () =>
          push("work started").pipe(
            Effect.andThen(Effect.sleep("2 seconds")),
            Effect.andThen(push("work finished")),
            Effect.onInterrupt(() => push("work cancelled"))
          )
      },
      long: {
        title: "Work for an hour",
        run: () =>
          push("long started").pipe(
            Effect.andThen(Effect.sleep("1 hour")),
            Effect.onInterrupt(() => push("long cancelled"))
          )
      },
      stuck: {
        title: "Take two seconds to stop",
        run: () =>
          push("stuck started").pipe(Effect.andThen(Effect.never), Effect.onInterrupt(() => Effect.sleep("2 seconds")))
      },
      window: {
        title: "Open a window and leave",
        run: () =>
          Effect.gen(function*() {
            const window = yield* Editor.openWindow({ url: "http://127.0.0.1:1/report" })
            yield* Effect.forkDetach(Effect.andThen(window.closed, push(`window ${window.windowId} closed`)))
            yield* push("window opened")
          })
      }
    }
  })
}

const start = (
  extension: Extension.Extension<any, any, never>,
  options: {
    readonly fs?: MemoryFs
    readonly layer?: Layer.Layer<FileSystem.FileSystem | Path.Path>
    readonly registry?: GracefulShutdown.GracefulShutdown.Service
    readonly monitor?: HostMonitor.HostMonitor.Service
    readonly hostPid?: number
    /** Whether to answer `initialize` first (default true). */
    readonly initialize?: boolean
  } = {}
) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    const fs = options.fs ?? makeMemoryFs()
    const logs: Array<string> = []
    const annotated: Array<{ readonly line: string; readonly annotations: Record<string, unknown> }> = []
    const logger = Logger.layer([
      Logger.make(({ fiber, message }) => {
        const line = (Array.isArray(message) ? message : [message]).map(String).join(" ")
        logs.push(line)
        annotated.push({ line, annotations: { ...fiber.getRef(References.CurrentLogAnnotations) } })
      })
    ])
    const { registry } = options
    const fiber = yield* Extension.run(extension).pipe(
      Effect.provideService(Transport.Transport, pair.right),
      Effect.provide(options.layer ?? fs.layer),
      Effect.provide(HostMonitor.layer(options.monitor ?? HostMonitor.never)),
      Effect.provide(logger),
      Effect.provideService(References.MinimumLogLevel, "Debug"),
      registry === undefined ? (self) => self : Effect.provideService(GracefulShutdown.GracefulShutdown, registry),
      Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env: {} })),
      Effect.forkChild
    )
    const raw = yield* makeRaw(pair.left)
    if (options.initialize !== false) {
      yield* raw.send({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { dataDir: "/data", hostPid: options.hostPid ?? 0 }
      })
      assert.strictEqual((yield* raw.next).result?.name, "check")
      yield* raw.send({ jsonrpc: "2.0", method: "initialized" })
    }
    const execute = (command: string) => raw.send({ jsonrpc: "2.0", method: "command/execute", params: { command } })
    const shutdown = (id = 2) =>
      Effect.andThen(
        raw.send({ jsonrpc: "2.0", id, method: "shutdown", params: { reason: "closing" } }),
        Effect.forkChild(raw.next)
      )
    /** The annotations of the first line that starts with `prefix`. */
    const annotationsOf = (prefix: string) => annotated.find(({ line }) => line.startsWith(prefix))?.annotations
    return { fiber, raw, fs, logs, pair, execute, shutdown, logger, annotationsOf }
  })

const until = (events: Array<string>, event: string) => eventually(Effect.sync(() => events.includes(event)), event)

/** Moves the clock to just before `millis` (no answer yet), then to it (the answer). */
const answeredAt = <A, E>(answer: Fiber.Fiber<A, E>, millis: number) =>
  Effect.gen(function*() {
    if (millis > 0) {
      yield* adjust(`${millis - 1} millis`)
      assert.isTrue(Option.isNone(yield* poll(answer)), `no answer before ${millis} ms`)
      yield* adjust("1 milli")
    } else {
      yield* adjust("0 millis")
    }
    return yield* Fiber.join(answer)
  })

const failed = (data: string) => ({
  jsonrpc: "2.0",
  id: 2,
  error: { code: -32000, message: "Shutdown failed", data }
})

describe("Extension shutdown checklist", () => {
  describe("the drain", () => {
    it.effect("lasts the policy's timeout when that is shorter than the budget, then cancels", () =>
      Effect.gen(function*() {
        const events: Array<string> = []
        const { execute, fiber, logs, shutdown } = yield* start(
          checked(events, { policy: ShutdownPolicy.drain("1 second") })
        )
        yield* execute("work")
        yield* until(events, "work started")
        const answer = yield* answeredAt(yield* shutdown(), 1000)
        assert.deepStrictEqual(answer, { jsonrpc: "2.0", id: 2, result: { success: true } })
        assert.deepStrictEqual(events, ["work started", "work cancelled", "released"])
        assert.include(logs, "draining 1 command(s) for at most 1s")
        assert.include(logs, "cancelling 1 command(s)")
        assert.strictEqual((yield* Fiber.join(fiber)).cancelled, 1)
      }))

    it.effect("never lasts less than a quarter second, however little of the budget is left", () =>
      Effect.gen(function*() {
        const events: Array<string> = []
        const extension = checked(events, { policy: ShutdownPolicy.drain("30 seconds"), budget: "1100 millis" })
        const { execute, logs, shutdown } = yield* start(extension)
        yield* execute("long")
        yield* until(events, "long started")
        // The budget counts from the shutdown, not from the start of the clock.
        yield* adjust("1 minute")
        assert.deepStrictEqual((yield* answeredAt(yield* shutdown(), 250)).result, { success: true })
        assert.include(events, "long cancelled")
        assert.include(logs, "draining 1 command(s) for at most 250ms")
        assert.include(logs, "cleanup finished in 250 ms")
      }))

    it.effect("does not happen when no command runs: the answer comes at once, nothing is cancelled", () =>
      Effect.gen(function*() {
        const events: Array<string> = []
        const { fiber, logs, shutdown } = yield* start(checked(events, { policy: ShutdownPolicy.drain("30 seconds") }))
        assert.deepStrictEqual((yield* answeredAt(yield* shutdown(), 0)).result, { success: true })
        const steps = ["dropping", "draining", "cancelling"]
        assert.isUndefined(logs.find((line) => steps.some((step) => line.startsWith(step))), logs.join("\n"))
        assert.include(logs, "shutdown requested (reason: closing)")
        assert.include(logs, "state saved to /data/extensions/check/state.json")
        assert.include(logs, "cleanup finished in 0 ms")
        assert.strictEqual((yield* Fiber.join(fiber)).cancelled, 0)
      }))

    it.effect("does not happen after a forced stop (a second signal before the first stop ran)", () =>
      Effect.gen(function*() {
        const events: Array<string> = []
        const registry = yield* GracefulShutdown.make
        const extension = checked(events, { policy: ShutdownPolicy.drain("30 seconds"), budget: "20 seconds" })
        const { execute, fiber } = yield* start(extension, { registry })
        yield* execute("work")
        yield* until(events, "work started")
        // No clock moves: the forced checklist cancels at once.
        yield* registry.force
        assert.deepStrictEqual(events, ["work started", "work cancelled", "released"])
        yield* Fiber.interrupt(fiber)
      }))
  })

  describe("what could not be done is in the answer, in the checklist's order", () => {
    it.effect("a command that takes longer than 500 ms to stop", () =>
      Effect.gen(function*() {
        const events: Array<string> = []
        const { execute, fiber, logs, shutdown } = yield* start(checked(events))
        yield* execute("stuck")
        yield* until(events, "stuck started")
        yield* adjust("1 minute")
        const answer = yield* answeredAt(yield* shutdown(), 500)
        assert.deepStrictEqual(answer, failed("1 command(s) did not stop within 500 ms"))
        assert.include(events, "released")
        assert.include(logs, "cleanup finished in 500 ms with failures: 1 command(s) did not stop within 500 ms")
        yield* adjust("2 seconds")
        const outcome = yield* Fiber.join(fiber)
        assert.deepStrictEqual(outcome.failures, ["1 command(s) did not stop within 500 ms"])
        assert.strictEqual(outcome.cancelled, 1)
      }))

    it.effect("resources that are not released in time: the budget less a quarter second", () =>
      Effect.gen(function*() {
        const { fiber, fs, shutdown } = yield* start(checked([], { release: Effect.never }))
        const answer = yield* answeredAt(yield* shutdown(), 3750)
        assert.deepStrictEqual(answer, failed("Could not release resources in time"))
        // The state is still saved, after the resources.
        assert.deepStrictEqual(JSON.parse(fs.files.get(stateFile)!), { runs: 0 })
        assert.deepStrictEqual((yield* Fiber.join(fiber)).failures, ["Could not release resources in time"])
      }))

    it.effect("resources whose release fails", () =>
      Effect.gen(function*() {
        const { shutdown } = yield* start(checked([], { release: Effect.die(new Error("the port is stuck")) }))
        const answer = yield* answeredAt(yield* shutdown(), 0)
        assert.deepStrictEqual(answer, failed("Could not release resources: the port is stuck"))
      }))

    it.effect("a state write that hangs is cut off when the budget is spent", () =>
      Effect.gen(function*() {
        const fs = makeMemoryFs()
        const hanging = Layer.effect(
          FileSystem.FileSystem,
          Effect.map(Effect.service(FileSystem.FileSystem), (inner): FileSystem.FileSystem => ({
            ...inner,
            rename: () => Effect.never
          }))
        ).pipe(Layer.provideMerge(fs.layer))
        const { shutdown } = yield* start(checked([], { budget: "2 seconds" }), { fs, layer: hanging })
        const answer = yield* answeredAt(yield* shutdown(), 2000)
        assert.deepStrictEqual(answer, failed("Could not save state to disk in time"))
      }))

    it.effect("a state write cut off is interrupted: it does not land after the answer said it failed", () =>
      Effect.gen(function*() {
        const fs = makeMemoryFs()
        const late = Layer.effect(
          FileSystem.FileSystem,
          Effect.map(Effect.service(FileSystem.FileSystem), (inner): FileSystem.FileSystem => ({
            ...inner,
            rename: (from, to) => Effect.andThen(Effect.sleep("3 seconds"), inner.rename(from, to))
          }))
        ).pipe(Layer.provideMerge(fs.layer))
        const { fiber, shutdown } = yield* start(checked([], { budget: "2 seconds" }), { fs, layer: late })
        const answer = yield* answeredAt(yield* shutdown(), 2000)
        assert.deepStrictEqual(answer, failed("Could not save state to disk in time"))
        yield* Fiber.join(fiber)
        yield* adjust("1 minute")
        assert.isFalse(fs.files.has(stateFile))
      }))

    it.effect("a state write that dies", () =>
      Effect.gen(function*() {
        const fs = makeMemoryFs()
        fs.crashMidWrite = true
        const { shutdown } = yield* start(checked([]), { fs })
        const answer = yield* answeredAt(yield* shutdown(), 0)
        assert.deepStrictEqual(answer, failed("Could not save state to disk: the write died: crashed mid-write"))
      }))

    it.effect("several failures, joined in order, then where the unreadable state file went", () =>
      Effect.gen(function*() {
        const events: Array<string> = []
        const fs = makeMemoryFs({ [stateFile]: "{ not json" })
        const extension = checked(events, { release: Effect.die(new Error("the port is stuck")) })
        // The bad file is moved aside while initialize is answered; saving over it later fails.
        const { execute, fiber, logs, shutdown } = yield* start(extension, { fs })
        yield* execute("stuck")
        yield* until(events, "stuck started")
        fs.failRename = true
        const answer = yield* answeredAt(yield* shutdown(), 500)
        const failures = [
          "1 command(s) did not stop within 500 ms",
          "Could not release resources: the port is stuck"
        ]
        assert.strictEqual(answer.error?.code, -32000)
        const data: string = answer.error?.data
        assert.isTrue(data.startsWith(`${failures.join("; ")}; Could not save state to disk: `), data)
        assert.match(data, /PermissionDenied/)
        const line = logs.find((l) => l.startsWith("cleanup finished in 500 ms with failures: "))
        assert.isDefined(line, logs.join("\n"))
        assert.isTrue(line!.includes(`with failures: ${failures.join("; ")}; Could not save state to disk: `), line)
        assert.isTrue(
          data.endsWith(
            `; the state file that could not be read was moved to ${stateFile}.bad-1970-01-01T00-00-00.000Z`
          ),
          data
        )
        yield* adjust("2 seconds")
        const outcome = yield* Fiber.join(fiber)
        assert.deepStrictEqual(outcome.failures.slice(0, 2), failures)
        assert.strictEqual(outcome.failures.length, 3)
      }))
  })

  it.effect("windows still open are closed at shutdown: whoever waits for one is released", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const { execute, raw, shutdown } = yield* start(checked(events))
      yield* execute("window")
      const open = yield* raw.next
      assert.strictEqual(open.method, "ui/openWindow")
      yield* raw.send({ jsonrpc: "2.0", id: open.id, result: { windowId: "w1" } })
      yield* until(events, "window opened")
      yield* adjust("1 minute")
      assert.notInclude(events, "window w1 closed")
      assert.deepStrictEqual((yield* answeredAt(yield* shutdown(), 0)).result, { success: true })
      yield* until(events, "window w1 closed")
    }))

  it.effect("runs once: a second shutdown and the interruption after it wait for the first run's result", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const { execute, fiber, fs, logs, raw, shutdown } = yield* start(
        checked(events, { policy: ShutdownPolicy.drain("3 seconds") })
      )
      yield* execute("work")
      yield* until(events, "work started")
      const first = yield* shutdown(2)
      yield* raw.send({ jsonrpc: "2.0", id: 3, method: "shutdown" })
      const second = yield* Effect.forkChild(raw.next)
      yield* adjust("1999 millis")
      assert.isTrue(Option.isNone(yield* poll(first)))
      assert.isTrue(Option.isNone(yield* poll(second)))
      yield* adjust("1 milli")
      const answers = [yield* Fiber.join(first), yield* Fiber.join(second)].sort((a, b) => a.id - b.id)
      assert.deepStrictEqual(answers.map((a) => a.result), [{ success: true }, { success: true }])
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(events, ["work started", "work finished", "released"])
      assert.strictEqual(fs.log.filter((line) => line.startsWith("rename")).length, 1)
      assert.strictEqual(logs.filter((line) => line.startsWith("cleanup finished")).length, 1)
    }))

  it.effect("commands sent once the shutdown began are ignored, and waiting ones are dropped", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const extension = Extension.make({
        ...checked(events, { policy: ShutdownPolicy.drain("3 seconds") }).options,
        maxConcurrentCommands: 1
      })
      const { execute, fiber, logs, shutdown } = yield* start(extension)
      yield* execute("work")
      yield* until(events, "work started")
      yield* execute("work")
      yield* execute("work")
      const answer = yield* shutdown()
      yield* Effect.yieldNow
      yield* execute("work")
      assert.deepStrictEqual((yield* answeredAt(answer, 2000)).result, { success: true })
      assert.deepStrictEqual(events, ["work started", "work finished", "released"])
      assert.include(logs, "dropping 2 waiting command(s) that never started")
      assert.include(logs, "command \"work\" ignored: shutting down")
      assert.strictEqual((yield* Fiber.join(fiber)).cancelled, 2)
    }))

  it.effect("a shutdown without a reason is logged as unknown", () =>
    Effect.gen(function*() {
      const { logs, raw } = yield* start(checked([]))
      yield* raw.send({ jsonrpc: "2.0", id: 2, method: "shutdown" })
      assert.deepStrictEqual((yield* raw.next).result, { success: true })
      assert.include(logs, "shutdown requested (reason: unknown)")
      assert.notInclude(logs, "reason: none")
    }))

  it.effect("a host that leaves before initialize: nothing to save, nothing failed", () =>
    Effect.gen(function*() {
      const { fiber, fs, pair } = yield* start(checked([]), { initialize: false })
      yield* pair.leftToRight.close
      const outcome = yield* Fiber.join(fiber)
      assert.deepStrictEqual([outcome._tag, outcome.failures], ["EndOfInput", []])
      assert.deepStrictEqual([...fs.files.keys()], [])
    }))

  it.effect("registered for signals under its name; what the checklist logs from a signal names the extension", () =>
    Effect.gen(function*() {
      const inner = yield* GracefulShutdown.make
      const names: Array<string> = []
      const registry: GracefulShutdown.GracefulShutdown.Service = {
        ...inner,
        register: (entry) => Effect.andThen(Effect.sync(() => names.push(entry.name)), inner.register(entry))
      }
      const { annotationsOf, fiber, logger } = yield* start(checked([]), { registry })
      assert.deepStrictEqual(names, ["extension check"])
      yield* registry.stop.pipe(Effect.provide(logger))
      assert.strictEqual(annotationsOf("cleanup finished")?.["hermes.extension"], "check")
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("a forced stop from a signal names the extension too", () =>
    Effect.gen(function*() {
      const registry = yield* GracefulShutdown.make
      const { annotationsOf, fiber, logger } = yield* start(checked([]), { registry })
      yield* registry.force.pipe(Effect.provide(logger))
      assert.strictEqual(annotationsOf("cleanup finished")?.["hermes.extension"], "check")
      yield* Fiber.interrupt(fiber)
    }))

  describe("how the run ended is logged", () => {
    it.effect("the host closed the connection", () =>
      Effect.gen(function*() {
        const { fiber, logs, pair } = yield* start(checked([]))
        yield* pair.leftToRight.close
        assert.strictEqual((yield* Fiber.join(fiber))._tag, "EndOfInput")
        assert.include(logs, "the host closed the connection")
      }))

    it.effect("the connection failed", () =>
      Effect.gen(function*() {
        const { fiber, logs, pair } = yield* start(checked([]))
        yield* pair.leftToRight.injectGarbage("Content-Length: 99999999999\r\n\r\n")
        assert.strictEqual((yield* Fiber.join(fiber))._tag, "Failed")
        assert.include(logs, "the connection failed")
      }))

    it.effect("the host exited while the connection stayed open", () =>
      Effect.gen(function*() {
        const monitor: HostMonitor.HostMonitor.Service = { awaitExit: () => Effect.sleep("1 second") }
        const { fiber, logs } = yield* start(checked([]), { monitor, hostPid: 4242 })
        yield* adjust("1 second")
        assert.strictEqual((yield* Fiber.join(fiber))._tag, "HostExited")
        assert.include(logs, "the host (pid 4242) exited without closing the connection: shutting down")
      }))

    it.effect("the host exited with a call of ours unanswered: stopped at once, the call cut off as a Stop", () =>
      Effect.gen(function*() {
        const events: Array<string> = []
        const monitor: HostMonitor.HostMonitor.Service = { awaitExit: () => Effect.sleep("1 second") }
        const { annotationsOf, execute, fiber, raw } = yield* start(checked(events), { monitor, hostPid: 4242 })
        yield* execute("window")
        assert.strictEqual((yield* raw.next).method, "ui/openWindow")
        yield* adjust("1 second")
        // Nobody answers ui/openWindow, and no more time passes: the run does not wait for the call.
        yield* eventually(Effect.map(poll(fiber), Option.isSome), "the run ended")
        assert.strictEqual((yield* Fiber.join(fiber))._tag, "HostExited")
        assert.strictEqual(annotationsOf("shutdown cut off")?.reason, "Stop")
      }))
  })
})
