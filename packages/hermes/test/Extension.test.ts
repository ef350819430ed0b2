import { assert, describe, it } from "@effect/vitest"
import { Editor, Extension, HermesProtocol, HostMonitor, MessageStore } from "@lifeline/hermes"
import { RpcError } from "@lifeline/jsonrpc"
import { GracefulShutdown, Peer, ShutdownPolicy, Transport } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import type { Duration, Path } from "effect"
import {
  Cause,
  ConfigProvider,
  Deferred,
  Effect,
  Exit,
  Fiber,
  FileSystem,
  Layer,
  Logger,
  Option,
  PlatformError,
  Ref,
  Schema,
  SubscriptionRef
} from "effect"
import type { MemoryFs } from "./utils.js"
import { adjust, eventually, makeMemoryFs, makeRaw, poll } from "./utils.js"

const sample = "MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|42|P|2.5\rPID|1||123||DOE^JOHN||19800101"
const dataDir = "/data"
const stateFile = "/data/extensions/counter/state.json"

const State = Schema.Struct({ runs: Schema.Number })

/** `initialize` as a host sends it, every field given. */
const fullInitialize = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { hermesVersion: "t", protocolVersion: "1.0", dataDir, hostPid: 1 }
}

interface Probe {
  readonly started: Deferred.Deferred<void>
  readonly finished: Ref.Ref<number>
  readonly cancelled: Ref.Ref<number>
  readonly released: Ref.Ref<Array<string>>
}

const makeProbe = Effect.gen(function*() {
  return {
    started: yield* Deferred.make<void>(),
    finished: yield* Ref.make(0),
    cancelled: yield* Ref.make(0),
    released: yield* Ref.make<Array<string>>([])
  } satisfies Probe
})

/** An extension with a fast command that patches the message, a slow one, and a resource whose release is recorded. */
const counter = (
  probe: Probe,
  options: { readonly policy?: ShutdownPolicy.Policy; readonly budget?: Duration.Input } = {}
) =>
  Extension.make({
    name: "counter",
    version: "1.2.3",
    state: { schema: State, initial: { runs: 0 } },
    policy: options.policy ?? ShutdownPolicy.FailFast(),
    shutdownBudget: options.budget,
    resources: Effect.acquireRelease(
      Effect.succeed({ server: "http://127.0.0.1:1234" }),
      () => Ref.update(probe.released, (r) => [...r, "server"])
    ),
    commands: {
      "counter.mark": {
        title: "Mark the message",
        run: ({ state }) =>
          Effect.gen(function*() {
            const { runs } = yield* SubscriptionRef.updateAndGet(state, (s) => ({ runs: s.runs + 1 }))
            yield* Editor.patchMessage([{ path: "PID-5.1", value: `RUN${runs}` }])
          })
      },
      "counter.slow": {
        title: "Work for two seconds",
        description: "Sleeps on the Clock, then counts",
        run: () =>
          Deferred.succeed(probe.started, void 0).pipe(
            Effect.andThen(Effect.sleep("2 seconds")),
            Effect.andThen(Ref.update(probe.finished, (n) => n + 1)),
            Effect.onInterrupt(() => Ref.update(probe.cancelled, (n) => n + 1))
          )
      }
    }
  })

/** A `HostMonitor` that adds each pid it is asked to watch to `watched`, then reports the exit when `exit` ends. */
const recordingMonitor = (
  watched: Ref.Ref<Array<number>>,
  exit: Effect.Effect<void>
): HostMonitor.HostMonitor.Service => ({
  awaitExit: (pid) => Effect.andThen(Ref.update(watched, (w) => [...w, pid]), exit)
})

/**
 * Runs `extension` on one end of a pair, and a host peer serving `editor/*` from a store on the other. `hostPid` is
 * what `initialize` says (default 1); `monitor`, when given, is provided to the extension as its `HostMonitor`;
 * `layer` replaces `fs.layer` as its file system; `logger` receives the messages it logs.
 */
const harness = <S, Res>(
  extension: Extension.Extension<S, Res, never>,
  fs: MemoryFs = makeMemoryFs(),
  options: {
    readonly hostPid?: number
    readonly monitor?: HostMonitor.HostMonitor.Service
    readonly layer?: Layer.Layer<FileSystem.FileSystem | Path.Path>
    readonly logger?: (message: string) => void
    /** Provided to the extension, as `NodeSignals.runMain` does. */
    readonly registry?: GracefulShutdown.GracefulShutdown.Service
  } = {}
) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    const store = yield* MessageStore.make(sample)
    const { logger } = options
    const fiber = yield* Extension.run(extension).pipe(
      Effect.provideService(Transport.Transport, pair.right),
      Effect.provide(options.layer ?? fs.layer),
      options.monitor === undefined ? (self) => self : Effect.provide(HostMonitor.layer(options.monitor)),
      logger === undefined ? (self) => self : Effect.provide(Logger.layer([
        Logger.make(({ message }) => logger((Array.isArray(message) ? message : [message]).map(String).join(" ")))
      ])),
      options.registry === undefined
        ? (self) => self
        : Effect.provideService(GracefulShutdown.GracefulShutdown, options.registry),
      Effect.forkChild
    )
    const host = yield* Peer.make({
      protocol: HermesProtocol.Host,
      transport: pair.left,
      requestTimeout: "1 hour",
      handlers: {
        "editor/getMessage": (params) =>
          Effect.map(Effect.orDie(store.get(params?.format ?? "raw")), (message) => ({ message })),
        "editor/patchMessage": ({ patches }) =>
          store.patch(patches).pipe(
            Effect.map((applied) => ({ applied })),
            Effect.mapError((e) => RpcError.RpcError.invalidParams({ reason: e.reason, detail: e.detail }))
          ),
        "editor/setMessage": ({ message }) => Effect.as(Effect.orDie(store.set(message)), { success: true }),
        "ui/openWindow": () => Effect.succeed({ windowId: "w1" })
      }
    })
    const initialize = host.call(HermesProtocol.Initialize, {
      hermesVersion: "test",
      protocolVersion: HermesProtocol.PROTOCOL_VERSION,
      dataDir,
      hostPid: options.hostPid ?? 1
    })
    return { pair, store, fiber, host, fs, initialize }
  })

describe("Extension", () => {
  it.effect("answers initialize with its name, version and commands, and loads its state", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const fs = makeMemoryFs({ [stateFile]: JSON.stringify({ runs: 41 }) })
      const { host, initialize, store } = yield* harness(counter(probe), fs)
      const result = yield* initialize
      assert.deepStrictEqual(result, {
        name: "counter",
        version: "1.2.3",
        commands: [
          { id: "counter.mark", title: "Mark the message" },
          { id: "counter.slow", title: "Work for two seconds", description: "Sleeps on the Clock, then counts" }
        ]
      })
      yield* host.notify(HermesProtocol.Initialized, undefined)
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.mark" })
      yield* eventually(Effect.map(store.current, (m) => m.includes("RUN42")), "the state was loaded")
    }))

  it.effect("command/execute is a notification: never answered, and the command works through editor/*", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const { raw } = yield* runRaw(counter(probe), makeMemoryFs())
      yield* raw.send(fullInitialize)
      assert.strictEqual((yield* raw.next).id, 1)
      yield* raw.send({ jsonrpc: "2.0", method: "initialized" })
      yield* raw.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "counter.mark" } })
      // The first thing the extension sends is its own request, not an answer.
      const request = yield* raw.next
      assert.strictEqual(request.method, "editor/patchMessage")
      assert.deepStrictEqual(request.params, { patches: [{ path: "PID-5.1", value: "RUN1" }] })
      yield* raw.send({ jsonrpc: "2.0", id: request.id, result: { applied: 1 } })
      // An unknown command is logged, not answered either.
      yield* raw.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "nope" } })
      yield* raw.send({ jsonrpc: "2.0", id: 2, method: "shutdown", params: { reason: "closing" } })
      const answer = yield* raw.next
      assert.deepStrictEqual(answer, { jsonrpc: "2.0", id: 2, result: { success: true } })
    }))

  it.effect("shutdown: cancels commands (fail-fast), releases resources, persists state atomically, answers, exits", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const { fiber, fs, host, initialize, store } = yield* harness(counter(probe))
      yield* initialize
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.mark" })
      yield* eventually(Effect.map(store.current, (m) => m.includes("RUN1^")), "marked")
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.slow" })
      yield* Deferred.await(probe.started)
      // No clock moves: fail-fast waits for nothing.
      const answer = yield* host.call(HermesProtocol.Shutdown, { reason: "closing" })
      assert.deepStrictEqual(answer, { success: true })
      assert.strictEqual(yield* Ref.get(probe.cancelled), 1)
      assert.deepStrictEqual(yield* Ref.get(probe.released), ["server"])
      assert.deepStrictEqual(JSON.parse(fs.files.get(stateFile)!), { runs: 1 })
      // Written to a temporary file, flushed, then renamed over the old one.
      const writes = fs.log.filter((line) => !line.startsWith("mkdir"))
      assert.strictEqual(writes.length, 3)
      assert.match(writes[0], /^open \/data\/extensions\/counter\/state\.json\..+\.tmp$/)
      assert.strictEqual(writes[1], `sync ${writes[0].slice(5)}`)
      assert.strictEqual(writes[2], `rename ${writes[0].slice(5)} ${stateFile}`)
      const outcome = yield* Fiber.join(fiber)
      assert.deepStrictEqual(outcome, {
        _tag: "Shutdown",
        reason: "closing",
        failures: [],
        cancelled: 1,
        refusedCommands: 0
      })
      // The extension ended its side: the host sees the connection close.
      assert.strictEqual((yield* host.closed)._tag, "PeerClosed")
    }))

  it.effect("shutdown under drain lets a command finish within the policy's timeout", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const { fiber, host, initialize } = yield* harness(counter(probe, { policy: ShutdownPolicy.drain("3 seconds") }))
      yield* initialize
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.slow" })
      yield* Deferred.await(probe.started)
      const answer = yield* Effect.forkChild(host.call(HermesProtocol.Shutdown, { reason: "disabled" }))
      // Let the forked call put `shutdown` on the wire first: a command sent before it is rightly accepted.
      yield* Effect.yieldNow
      // New work is refused while draining.
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.slow" })
      yield* adjust("1999 millis")
      assert.isTrue(Option.isNone(yield* poll(answer)))
      yield* adjust("1 milli")
      assert.deepStrictEqual(yield* Fiber.join(answer), { success: true })
      assert.strictEqual(yield* Ref.get(probe.finished), 1)
      assert.strictEqual(yield* Ref.get(probe.cancelled), 0)
      assert.strictEqual((yield* Fiber.join(fiber)).cancelled, 0)
    }))

  it.effect("every request but shutdown that arrives during the drain is -32003, and the drain goes on", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const { fiber, host, initialize } = yield* harness(counter(probe, { policy: ShutdownPolicy.drain("3 seconds") }))
      yield* initialize
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.slow" })
      yield* Deferred.await(probe.started)
      const answer = yield* Effect.forkChild(host.call(HermesProtocol.Shutdown, { reason: "disabled" }))
      yield* Effect.yieldNow
      yield* adjust("500 millis")
      // Before this change: -32601 for a method the extension does not serve, -32600 for a second `initialize`.
      const refused = yield* Effect.forEach(
        ["no/such/method", "initialize"],
        (method) =>
          Effect.flip(host.callUntyped(method, { hermesVersion: "t", protocolVersion: "1.0", dataDir, hostPid: 1 }))
      )
      assert.deepStrictEqual(refused.map((error) => (error as RpcError.RpcError).code), [-32003, -32003])
      assert.deepStrictEqual(
        refused.map((error) => (error as RpcError.RpcError).message),
        ["Shutting down: no/such/method", "Shutting down: initialize"]
      )
      // A second `shutdown` is not refused: it gets the first one's answer once the drain is over.
      const second = yield* Effect.forkChild(host.call(HermesProtocol.Shutdown, { reason: "disabled" }))
      yield* adjust("1500 millis")
      assert.deepStrictEqual(yield* Fiber.join(answer), { success: true })
      assert.deepStrictEqual(yield* Fiber.join(second), { success: true })
      assert.strictEqual(yield* Ref.get(probe.finished), 1)
      assert.strictEqual((yield* Fiber.join(fiber)).cancelled, 0)
    }))

  it.effect("a drain longer than the shutdown budget is cut short, so the answer is in time", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const extension = counter(probe, { policy: ShutdownPolicy.drain("30 seconds"), budget: "1500 millis" })
      const { host, initialize } = yield* harness(extension)
      yield* initialize
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.slow" })
      yield* Deferred.await(probe.started)
      const answer = yield* Effect.forkChild(host.call(HermesProtocol.Shutdown, { reason: "closing" }))
      // The budget keeps one second for cleanup, but never less than a quarter second for the drain.
      yield* adjust("499 millis")
      assert.isTrue(Option.isNone(yield* poll(answer)))
      yield* adjust("1 milli")
      assert.deepStrictEqual(yield* Fiber.join(answer), { success: true })
      assert.strictEqual(yield* Ref.get(probe.cancelled), 1)
    }))

  it.effect("a cleanup that fails answers -32000 with the reason in data (docs/protocol.md, `shutdown`)", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const fs = makeMemoryFs({ [stateFile]: JSON.stringify({ runs: 7 }) })
      fs.failRename = true
      const { fiber, host, initialize } = yield* harness(counter(probe), fs)
      yield* initialize
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.mark" })
      yield* eventually(Effect.map(host.stats, (s) => s.requestsReceived === 1), "the command ran")
      const error = yield* Effect.flip(host.call(HermesProtocol.Shutdown, { reason: "closing" }))
      assert.strictEqual(error._tag, "RpcError")
      const wire = error as RpcError.RpcError
      assert.strictEqual(wire.code, -32000)
      assert.strictEqual(wire.message, "Shutdown failed")
      assert.match(String(wire.data), /^Could not save state to disk: .*PermissionDenied/)
      // The old state is intact and no temporary file is left behind.
      assert.deepStrictEqual([...fs.files.keys()], [stateFile])
      assert.deepStrictEqual(JSON.parse(fs.files.get(stateFile)!), { runs: 7 })
      const outcome = yield* Fiber.join(fiber)
      assert.strictEqual(outcome.failures.length, 1)
    }))

  it.effect("a crash in the middle of writing the state leaves the previous state intact", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const fs = makeMemoryFs({ [stateFile]: JSON.stringify({ runs: 7 }) })
      fs.crashMidWrite = true
      const { host, initialize } = yield* harness(counter(probe), fs)
      yield* initialize
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.mark" })
      yield* eventually(Effect.map(host.stats, (s) => s.requestsReceived === 1), "the command ran")
      const error = yield* Effect.flip(host.call(HermesProtocol.Shutdown, { reason: "closing" }))
      assert.strictEqual((error as RpcError.RpcError).code, -32000)
      assert.deepStrictEqual(JSON.parse(fs.files.get(stateFile)!), { runs: 7 })
    }))

  it.effect("state is persisted at one run's end and loaded at the next start", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFs()
      for (const expected of [1, 2, 3]) {
        const probe = yield* makeProbe
        const { fiber, host, initialize, store } = yield* harness(counter(probe), fs)
        yield* initialize
        yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.mark" })
        yield* eventually(Effect.map(store.current, (m) => m.includes(`RUN${expected}^`)), `run ${expected}`)
        yield* host.call(HermesProtocol.Shutdown, { reason: "reload" })
        yield* Fiber.join(fiber)
        assert.deepStrictEqual(JSON.parse(fs.files.get(stateFile)!), { runs: expected })
      }
    }))

  it.effect("a state file that does not decode is reported and replaced by the initial state", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const fs = makeMemoryFs({ [stateFile]: "{ not json" })
      const { fiber, host, initialize } = yield* harness(counter(probe), fs)
      yield* initialize
      const answer = yield* host.call(HermesProtocol.Shutdown, undefined)
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(JSON.parse(fs.files.get(stateFile)!), { runs: 0 })
      // Replaced, not overwritten: the old file was moved aside first, and the answer says so.
      assert.strictEqual(fs.files.get(`${stateFile}.bad-1970-01-01T00-00-00.000Z`), "{ not json")
      assert.strictEqual(answer.data?.stateSetAside?.reason, "InvalidJson")
    }))

  it.effect("end of input (the host went away) runs the same checklist", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const { fiber, fs, host, initialize, pair } = yield* harness(counter(probe))
      yield* initialize
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.slow" })
      yield* Deferred.await(probe.started)
      yield* pair.leftToRight.close
      const outcome = yield* Fiber.join(fiber)
      assert.strictEqual(outcome._tag, "EndOfInput")
      assert.strictEqual(outcome.cancelled, 1)
      assert.deepStrictEqual(yield* Ref.get(probe.released), ["server"])
      assert.deepStrictEqual(JSON.parse(fs.files.get(stateFile)!), { runs: 0 })
    }))

  it.effect("the host's exit, reported by the HostMonitor while stdin stays open, runs the same checklist", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const watched = yield* Ref.make<Array<number>>([])
      // The host "dies" one second (TestClock) after the watch starts, while counter.slow still has a second to go.
      const monitor = recordingMonitor(watched, Effect.sleep("1 second"))
      const { fiber, fs, host, initialize, store } = yield* harness(counter(probe), makeMemoryFs(), {
        hostPid: 4242,
        monitor
      })
      yield* initialize
      assert.deepStrictEqual(yield* Ref.get(watched), [4242])
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.mark" })
      yield* eventually(Effect.map(store.current, (m) => m.includes("RUN1")), "the command ran")
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.slow" })
      yield* Deferred.await(probe.started)
      yield* adjust("500 millis")
      assert.isTrue(Option.isNone(yield* poll(fiber)), "the host is still there")
      // Nobody closes the transport: only the monitor can end the run.
      yield* adjust("500 millis")
      const outcome = yield* Fiber.join(fiber)
      assert.deepStrictEqual(outcome, {
        _tag: "HostExited",
        reason: undefined,
        failures: [],
        cancelled: 1,
        refusedCommands: 0
      })
      assert.deepStrictEqual(yield* Ref.get(probe.released), ["server"])
      assert.deepStrictEqual(JSON.parse(fs.files.get(stateFile)!), { runs: 1 })
    }))

  it.effect("hostPid 0 means the host is unknown: the HostMonitor is never asked", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const watched = yield* Ref.make<Array<number>>([])
      const monitor = recordingMonitor(watched, Effect.void)
      const { fiber, host, initialize } = yield* harness(counter(probe), makeMemoryFs(), { hostPid: 0, monitor })
      yield* initialize
      yield* adjust("1 minute")
      assert.isTrue(Option.isNone(yield* poll(fiber)))
      assert.deepStrictEqual(yield* Ref.get(watched), [])
      yield* host.call(HermesProtocol.Shutdown, { reason: "closing" })
      assert.strictEqual((yield* Fiber.join(fiber))._tag, "Shutdown")
    }))

  it.effect("interruption (a signal) runs the checklist as a finalizer", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const { fiber, fs, host, initialize } = yield* harness(counter(probe))
      yield* initialize
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.slow" })
      yield* Deferred.await(probe.started)
      // Effect 4's Fiber.interrupt answers void: the exit is read with Fiber.await.
      yield* Fiber.interrupt(fiber)
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(Exit.hasInterrupts(exit))
      assert.strictEqual(yield* Ref.get(probe.cancelled), 1)
      assert.deepStrictEqual(yield* Ref.get(probe.released), ["server"])
      assert.isTrue(fs.files.has(stateFile))
    }))

  it.effect("a second shutdown gets the same answer", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const { raw } = yield* runRaw(counter(probe), makeMemoryFs())
      yield* raw.send(fullInitialize)
      yield* raw.next
      yield* raw.send({ jsonrpc: "2.0", id: 2, method: "shutdown" })
      yield* raw.send({ jsonrpc: "2.0", id: 3, method: "shutdown" })
      const answers = [yield* raw.next, yield* raw.next].sort((a, b) => a.id - b.id)
      assert.deepStrictEqual(answers, [
        { jsonrpc: "2.0", id: 2, result: { success: true } },
        { jsonrpc: "2.0", id: 3, result: { success: true } }
      ])
    }))

  it.effect("window/closed may arrive while the extension waits for editor/patchMessage (docs/protocol.md)", () =>
    Effect.gen(function*() {
      const closedSeen = yield* Deferred.make<string>()
      const patched = yield* Deferred.make<number>()
      const extension = Extension.make({
        name: "windows",
        version: "1.0.0",
        commands: {
          "report.open": {
            title: "Open a report, then patch",
            run: () =>
              Effect.gen(function*() {
                const window = yield* Editor.openWindow({ url: "http://127.0.0.1:1/report" })
                yield* Effect.forkDetach(Effect.andThen(window.closed, Deferred.succeed(closedSeen, window.windowId)))
                yield* Deferred.succeed(patched, yield* Editor.patchMessage([{ path: "PID-5.1", value: "X" }]))
              })
          }
        }
      })
      const { raw } = yield* runRaw(extension, makeMemoryFs())
      yield* raw.send(fullInitialize)
      yield* raw.next
      yield* raw.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "report.open" } })
      const open = yield* raw.next
      assert.strictEqual(open.method, "ui/openWindow")
      yield* raw.send({ jsonrpc: "2.0", id: open.id, result: { windowId: "w7" } })
      const patch = yield* raw.next
      assert.strictEqual(patch.method, "editor/patchMessage")
      // The notification comes between the request and its answer.
      yield* raw.send({ jsonrpc: "2.0", method: "window/closed", params: { windowId: "w7" } })
      yield* raw.send({ jsonrpc: "2.0", id: patch.id, result: { applied: 1 } })
      assert.strictEqual(yield* Deferred.await(patched), 1)
      assert.strictEqual(yield* Deferred.await(closedSeen), "w7")
    }))

  it.effect("resources that fail to start answer initialize with an error", () =>
    Effect.gen(function*() {
      const extension = Extension.make({
        name: "broken",
        version: "0.0.1",
        resources: Effect.fail("port 8080 is taken"),
        commands: {}
      })
      const { initialize } = yield* harness(extension)
      const error = yield* Effect.flip(initialize)
      assert.strictEqual(error._tag, "RpcError")
      assert.strictEqual((error as RpcError.RpcError).code, -32000)
      assert.include(String((error as RpcError.RpcError).data), "port 8080 is taken")
    }))

  it.effect("a name that is not a plain directory name is a defect", () =>
    Effect.gen(function*() {
      const exit = yield* Extension.run(Extension.make({ name: "../evil", version: "1", commands: {} })).pipe(
        Effect.provideService(Transport.Transport, {} as Transport.Transport.Service),
        Effect.provide(makeMemoryFs().layer),
        Effect.exit
      )
      assert.isTrue(Exit.isFailure(exit))
    }))

  it.effect("a fatal framing error ends the run as Failed, not EndOfInput (NodeExtension.runMain then exits with code 1)", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      const { fiber, fs, host, initialize, pair, store } = yield* harness(counter(probe))
      yield* initialize
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.mark" })
      yield* eventually(Effect.map(store.current, (m) => m.includes("RUN1^")), "marked")
      // A header announcing a body over the frame limit: the decoder cannot go on, the connection fails.
      yield* pair.leftToRight.injectGarbage("Content-Length: 99999999999\r\n\r\n")
      const outcome = yield* Fiber.join(fiber)
      assert.strictEqual(outcome._tag, "Failed")
      assert.isUndefined(outcome.reason)
      // The checklist ran all the same: the state is saved.
      assert.deepStrictEqual(JSON.parse(fs.files.get(stateFile) ?? "null"), { runs: 1 })
    }))

  describe("initialize as hosts send it", () => {
    it.effect("InitializeParams: every field may be left out, and so may the params; decoding fills in the defaults", () =>
      Effect.sync(() => {
        const decode = Schema.decodeUnknownSync(HermesProtocol.InitializeParams)
        const defaults = {
          hermesVersion: HermesProtocol.UNKNOWN_VERSION,
          protocolVersion: HermesProtocol.UNKNOWN_VERSION,
          hostPid: 0
        }
        assert.deepStrictEqual(decode({}), defaults)
        assert.deepStrictEqual(decode(undefined), defaults)
        assert.deepStrictEqual(decode({ dataDir: "/d", hostPid: 7 }), { ...defaults, dataDir: "/d", hostPid: 7 })
        const full = { hermesVersion: "2.1", protocolVersion: "1.0", dataDir: "/d", hostPid: 7 }
        assert.deepStrictEqual(decode(full), full)
        assert.deepStrictEqual(Schema.encodeUnknownSync(HermesProtocol.InitializeParams)(full), full)
        // What is there must still be right.
        assert.throws(() => decode({ hostPid: "7" }))
        assert.throws(() => decode({ hostPid: 1.5 }))
      }))

    it.effect("the protocol's example (params {}) and no params at all: dataDir from HERMES_DATA_DIR, else ~/.hermes", () =>
      Effect.gen(function*() {
        const cases = [
          { params: {}, env: { [HermesProtocol.DATA_DIR_VARIABLE]: "/env-data", HOME: "/home/u" }, dir: "/env-data" },
          { params: undefined, env: { [HermesProtocol.DATA_DIR_VARIABLE]: "/env-data" }, dir: "/env-data" },
          { params: {}, env: { HOME: "/home/u" }, dir: "/home/u/.hermes" },
          {
            params: undefined,
            env: { [HermesProtocol.DATA_DIR_VARIABLE]: "", HOME: "/home/u" },
            dir: "/home/u/.hermes"
          }
        ]
        for (const { dir, env, params } of cases) {
          const probe = yield* makeProbe
          const fs = makeMemoryFs({ [`${dir}/extensions/counter/state.json`]: JSON.stringify({ runs: 4 }) })
          const watched = yield* Ref.make<Array<number>>([])
          const { fiber, raw } = yield* runRaw(counter(probe), fs, {
            env,
            monitor: recordingMonitor(watched, Effect.never)
          })
          yield* raw.send(
            params === undefined
              ? { jsonrpc: "2.0", id: 1, method: "initialize" }
              : { jsonrpc: "2.0", id: 1, method: "initialize", params }
          )
          const answer = yield* raw.next
          assert.deepStrictEqual(answer.result?.name, "counter", JSON.stringify(answer))
          yield* raw.send({ jsonrpc: "2.0", method: "initialized" })
          yield* raw.send({ jsonrpc: "2.0", id: 2, method: "shutdown", params: { reason: "closing" } })
          assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", id: 2, result: { success: true } })
          yield* Fiber.join(fiber)
          // The state was loaded from, and saved to, the default data directory.
          assert.deepStrictEqual(JSON.parse(fs.files.get(`${dir}/extensions/counter/state.json`)!), { runs: 4 })
          assert.deepStrictEqual([...fs.files.keys()], [`${dir}/extensions/counter/state.json`])
          // hostPid left out is 0, unknown: nothing is watched.
          assert.deepStrictEqual(yield* Ref.get(watched), [])
        }
      }))
  })

  describe("shutdown reasons", () => {
    it.effect("an unknown reason is logged escaped and handled as closing: the checklist runs, the state is saved", () =>
      Effect.gen(function*() {
        const probe = yield* makeProbe
        const logs: Array<string> = []
        const fs = makeMemoryFs()
        const { fiber, host, initialize, store } = yield* harness(counter(probe), fs, {
          logger: (line) => logs.push(line)
        })
        yield* initialize
        yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.mark" })
        yield* eventually(Effect.map(store.current, (m) => m.includes("RUN1^")), "marked")
        yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.slow" })
        yield* Deferred.await(probe.started)
        const reason = "upgrade\n\u001b[31mFAKE level=ERROR\u202e" + "x".repeat(300)
        const answer = yield* host.call(HermesProtocol.Shutdown, { reason })
        assert.deepStrictEqual(answer, { success: true })
        assert.strictEqual(yield* Ref.get(probe.cancelled), 1)
        assert.deepStrictEqual(yield* Ref.get(probe.released), ["server"])
        assert.deepStrictEqual(JSON.parse(fs.files.get(stateFile)!), { runs: 1 })
        assert.deepStrictEqual(yield* Fiber.join(fiber), {
          _tag: "Shutdown",
          reason: "closing",
          failures: [],
          cancelled: 1,
          refusedCommands: 0
        })
        const line = logs.find((l) => l.includes("unknown reason"))!
        assert.isDefined(line, logs.join("\n"))
        assert.include(line, String.raw`"upgrade\n\u001b[31mFAKE level=ERROR\u202e`)
        assert.include(line, "(cut, 330 characters)")
        assert.include(line, "handled as closing")
        assert.notMatch(line, /[\n\u001b\u202e]/)
      }))

    it.effect("params {} and no params: a shutdown without a reason", () =>
      Effect.gen(function*() {
        for (const params of [{}, undefined, { reason: "disabled" }]) {
          const probe = yield* makeProbe
          const fs = makeMemoryFs()
          const { fiber, raw } = yield* runRaw(counter(probe), fs)
          yield* raw.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { dataDir, hostPid: 0 } })
          yield* raw.next
          yield* raw.send(
            params === undefined
              ? { jsonrpc: "2.0", id: 2, method: "shutdown" }
              : { jsonrpc: "2.0", id: 2, method: "shutdown", params }
          )
          assert.deepStrictEqual(yield* raw.next, { jsonrpc: "2.0", id: 2, result: { success: true } })
          const outcome = yield* Fiber.join(fiber)
          assert.strictEqual(outcome.reason, params?.reason)
          assert.deepStrictEqual(JSON.parse(fs.files.get(stateFile)!), { runs: 0 })
        }
      }))
  })

  describe("a state file that could not be read is moved aside, never overwritten", () => {
    const badFile = `${stateFile}.bad-1970-01-01T00-00-00.000Z`
    const causes = [
      { name: "truncated", content: "{\"runs\": 4", reason: "InvalidJson" },
      { name: "corrupt", content: "\u0000\u0001\u0002\ufffd garbage", reason: "InvalidJson" },
      { name: "empty", content: "", reason: "InvalidJson" },
      { name: "of another shape", content: "{\"runs\": \"many\"}", reason: "SchemaMismatch" }
    ] as const
    for (const { content, name, reason } of causes) {
      it.effect(`${name}: moved at initialize, the new state saved, the answer says where`, () =>
        Effect.gen(function*() {
          const probe = yield* makeProbe
          const fs = makeMemoryFs({ [stateFile]: content })
          const { fiber, host, initialize, store } = yield* harness(counter(probe), fs)
          yield* initialize
          // Moved before anything could write: while answering initialize.
          assert.deepStrictEqual([...fs.files.keys()], [badFile])
          assert.strictEqual(fs.files.get(badFile), content)
          yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.mark" })
          yield* eventually(Effect.map(store.current, (m) => m.includes("RUN1^")), "marked")
          const answer = yield* host.call(HermesProtocol.Shutdown, { reason: "closing" })
          assert.strictEqual(answer.success, true)
          assert.strictEqual(answer.data?.stateSetAside?.path, badFile)
          assert.strictEqual(answer.data?.stateSetAside?.reason, reason)
          assert.include(answer.data?.stateSetAside?.detail, stateFile)
          assert.deepStrictEqual(JSON.parse(fs.files.get(stateFile)!), { runs: 1 })
          assert.strictEqual(fs.files.get(badFile), content)
          assert.deepStrictEqual((yield* Fiber.join(fiber)).failures, [])
        }))
    }

    it.effect("unreadable (permissions): moved aside as Unreadable", () =>
      Effect.gen(function*() {
        const probe = yield* makeProbe
        const fs = makeMemoryFs({ [stateFile]: "{\"runs\": 9}" })
        const { fiber, host, initialize } = yield* harness(counter(probe), fs, {
          layer: unreadable(fs, stateFile)
        })
        yield* initialize
        assert.deepStrictEqual([...fs.files.keys()], [badFile])
        const answer = yield* host.call(HermesProtocol.Shutdown, { reason: "closing" })
        assert.strictEqual(answer.data?.stateSetAside?.reason, "Unreadable")
        assert.include(answer.data?.stateSetAside?.detail, "PermissionDenied")
        assert.strictEqual(fs.files.get(badFile), "{\"runs\": 9}")
        assert.deepStrictEqual(JSON.parse(fs.files.get(stateFile)!), { runs: 0 })
        yield* Fiber.join(fiber)
      }))

    it.effect("an earlier bad file of the same name is kept: the next one gets a suffix", () =>
      Effect.gen(function*() {
        const probe = yield* makeProbe
        const fs = makeMemoryFs({ [stateFile]: "{", [badFile]: "older" })
        const { host, initialize } = yield* harness(counter(probe), fs)
        yield* initialize
        const answer = yield* host.call(HermesProtocol.Shutdown, { reason: "closing" })
        assert.strictEqual(answer.data?.stateSetAside?.path, `${badFile}-2`)
        assert.strictEqual(fs.files.get(badFile), "older")
        assert.strictEqual(fs.files.get(`${badFile}-2`), "{")
      }))

    it.effect("a file that cannot be moved aside is left as it is: nothing is saved over it, the answer fails", () =>
      Effect.gen(function*() {
        const probe = yield* makeProbe
        const fs = makeMemoryFs({ [stateFile]: "{\"runs\": 4" })
        fs.failRename = true
        const { fiber, host, initialize } = yield* harness(counter(probe), fs)
        yield* initialize
        const error = yield* Effect.flip(host.call(HermesProtocol.Shutdown, { reason: "closing" }))
        const wire = error as RpcError.RpcError
        assert.strictEqual(wire.code, -32000)
        assert.match(String(wire.data), /^Could not save state to disk: .* is not JSON.*not overwritten/)
        assert.deepStrictEqual([...fs.files.keys()], [stateFile])
        assert.strictEqual(fs.files.get(stateFile), "{\"runs\": 4")
        // Not even a temporary file was written.
        assert.isFalse(fs.log.some((line) => line.startsWith("open")))
        assert.strictEqual((yield* Fiber.join(fiber)).failures.length, 1)
      }))
  })
})

describe("Extension: the policy rule, the name rule, bounded commands, signals", () => {
  const initializeRequest = { jsonrpc: "2.0", id: 1, method: "initialize", params: { dataDir } }

  /** An extension that names no policy: the rule decides. */
  const plain = Extension.make({ name: "plain", version: "1.0.0", commands: {} })

  const collect = (logs: Array<string>) =>
    Logger.layer([
      Logger.make(({ message }) => logs.push((Array.isArray(message) ? message : [message]).map(String).join(" ")))
    ])

  it.effect("an invalid shutdown policy in the environment fails the run with the ConfigError naming it, logged first", () =>
    Effect.gen(function*() {
      const cases = [
        [{ [ShutdownPolicy.POLICY_VARIABLE]: "drian" }, ShutdownPolicy.POLICY_VARIABLE],
        [
          { [ShutdownPolicy.POLICY_VARIABLE]: "drain", [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "soon" },
          ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE
        ]
      ] as const
      for (const [env, variable] of cases) {
        const logs: Array<string> = []
        const pair = yield* TestTransport.makePair()
        const error = yield* Extension.run(plain).pipe(
          Effect.provideService(Transport.Transport, pair.right),
          Effect.provide(makeMemoryFs().layer),
          Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env })),
          Effect.provide(collect(logs)),
          Effect.flip
        )
        assert.strictEqual(error._tag, "ConfigError")
        assert.include(error.message, variable)
        const line = logs.find((l) => l.includes("cannot start"))
        assert.isDefined(line, logs.join("\n"))
        assert.include(line, `the shutdown policy in the environment is invalid`)
        assert.include(line, variable)
        assert.notInclude(line, "\n")
      }
    }))

  it.effect("a policy given in code wins over the environment, a valid one is read from it", () =>
    Effect.gen(function*() {
      // In code: the invalid environment is never read.
      const chosen = Extension.make({
        name: "chosen",
        version: "1.0.0",
        policy: ShutdownPolicy.FailFast(),
        commands: {}
      })
      const { fiber, raw } = yield* runRaw(chosen, makeMemoryFs(), {
        env: { [ShutdownPolicy.POLICY_VARIABLE]: "drian" }
      })
      yield* raw.send(initializeRequest)
      assert.strictEqual((yield* raw.next).result?.name, "chosen")
      yield* raw.send({ jsonrpc: "2.0", id: 2, method: "shutdown" })
      assert.deepStrictEqual((yield* raw.next).result, { success: true })
      assert.strictEqual((yield* Fiber.join(fiber))._tag, "Shutdown")

      // From the environment: a drain of 3 s lets a two-second command finish.
      const probe = yield* makeProbe
      const fromEnv = Extension.make({ ...counter(probe).options, policy: undefined })
      const run = yield* runRaw(fromEnv, makeMemoryFs(), {
        env: { [ShutdownPolicy.POLICY_VARIABLE]: "drain", [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "3 seconds" }
      })
      yield* run.raw.send(initializeRequest)
      yield* run.raw.next
      yield* run.raw.send({ jsonrpc: "2.0", method: "initialized" })
      yield* run.raw.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "counter.slow" } })
      yield* Deferred.await(probe.started)
      yield* run.raw.send({ jsonrpc: "2.0", id: 2, method: "shutdown" })
      yield* adjust("2 seconds")
      assert.deepStrictEqual((yield* run.raw.next).result, { success: true })
      assert.strictEqual(yield* Ref.get(probe.finished), 1)
      assert.strictEqual((yield* Fiber.join(run.fiber)).cancelled, 0)
    }))

  it.effect("the SDK accepts exactly the names hosts accept: 1 to 128 of [A-Za-z0-9._-], not dots only", () =>
    Effect.gen(function*() {
      const refused = ["", ".", "..", "...", "../evil", "a/b", "a\\b", "a b", "C:x", "é", "x".repeat(129)]
      for (const name of refused) {
        assert.isFalse(HermesProtocol.isExtensionName(name), name)
        const exit = yield* Extension.run(Extension.make({ name, version: "1", commands: {} })).pipe(
          Effect.provideService(Transport.Transport, {} as Transport.Transport.Service),
          Effect.provide(makeMemoryFs().layer),
          Effect.exit
        )
        assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), name)
        const defect = Exit.isFailure(exit) ? String(Cause.squash(exit.cause)) : ""
        assert.include(defect, "is not an extension name: 1 to 128 letters", name)
      }
      // Names an earlier SDK refused (a leading dot, "..", "-" or "_" first) and hosts accept.
      for (const name of ["a", ".config", "a..b", "-", "_", "_x", "x".repeat(128), "hl7.anonymise_2-b"]) {
        assert.isTrue(HermesProtocol.isExtensionName(name), name)
        const { fiber, raw } = yield* runRaw(Extension.make({ name, version: "1", commands: {} }), makeMemoryFs())
        yield* raw.send(initializeRequest)
        assert.strictEqual((yield* raw.next).result?.name, name)
        yield* raw.send({ jsonrpc: "2.0", id: 2, method: "shutdown" })
        yield* raw.next
        yield* Fiber.join(fiber)
      }
    }))

  /** `jobs.run` counts its starts, works for `work`, then counts its ends. */
  const jobs = (
    counts: { readonly started: Ref.Ref<number>; readonly finished: Ref.Ref<number> },
    options: {
      readonly work: Duration.Input
      readonly maxConcurrentCommands?: number
      readonly maxQueuedCommands?: number
      readonly policy?: ShutdownPolicy.Policy
    }
  ) =>
    Extension.make({
      name: "jobs",
      version: "1.0.0",
      policy: options.policy ?? ShutdownPolicy.FailFast(),
      maxConcurrentCommands: options.maxConcurrentCommands,
      maxQueuedCommands: options.maxQueuedCommands,
      commands: {
        "jobs.run": {
          title: "Run",
          run: () =>
            Ref.update(counts.started, (n) => n + 1).pipe(
              Effect.andThen(Effect.sleep(options.work)),
              Effect.andThen(Ref.update(counts.finished, (n) => n + 1))
            )
        }
      }
    })

  const execute = (raw: { readonly send: (message: unknown) => Effect.Effect<void, unknown> }, command: string) =>
    raw.send({ jsonrpc: "2.0", method: "command/execute", params: { command } })

  it.effect("command/execute is bounded: N run, M wait in order, the rest are refused, counted and logged once", () =>
    Effect.gen(function*() {
      const started = yield* Ref.make(0)
      const finished = yield* Ref.make(0)
      const logs: Array<string> = []
      const pair = yield* TestTransport.makePair()
      const fiber = yield* Extension.run(
        jobs({ started, finished }, { work: "1 second", maxConcurrentCommands: 2, maxQueuedCommands: 3 })
      ).pipe(
        Effect.provideService(Transport.Transport, pair.right),
        Effect.provide(makeMemoryFs().layer),
        Effect.provide(collect(logs)),
        Effect.forkChild
      )
      const raw = yield* makeRaw(pair.left)
      yield* raw.send(initializeRequest)
      yield* raw.next
      yield* raw.send({ jsonrpc: "2.0", method: "initialized" })
      for (let i = 0; i < 10; i++) yield* execute(raw, "jobs.run")
      // An unknown id is logged escaped: it is the host's text.
      yield* execute(raw, "nope\n\u001b[31m")
      yield* eventually(Effect.map(Ref.get(started), (n) => n === 2), "two commands run")
      yield* adjust("999 millis")
      assert.strictEqual(yield* Ref.get(started), 2, "the others wait for a slot")
      yield* adjust("1 milli")
      yield* eventually(Effect.map(Ref.get(started), (n) => n === 4), "the first two waiting took the slots")
      assert.strictEqual(yield* Ref.get(finished), 2)
      yield* adjust("1 second")
      yield* eventually(Effect.map(Ref.get(started), (n) => n === 5), "the third waiting one started")
      yield* adjust("1 second")
      yield* eventually(Effect.map(Ref.get(finished), (n) => n === 5), "every accepted command finished")
      assert.strictEqual(yield* Ref.get(started), 5, "the five refused ones never ran")
      yield* raw.send({ jsonrpc: "2.0", id: 2, method: "shutdown" })
      assert.deepStrictEqual((yield* raw.next).result, { success: true })
      const outcome = yield* Fiber.join(fiber)
      assert.deepStrictEqual(outcome, {
        _tag: "Shutdown",
        reason: undefined,
        failures: [],
        cancelled: 0,
        refusedCommands: 5
      })
      const refusals = logs.filter((l) => l.includes("refused"))
      assert.deepStrictEqual(refusals, [
        "command \"jobs.run\" refused: 2 command(s) run and 3 wait (maxConcurrentCommands, maxQueuedCommands); the " +
        "refusals that follow are counted until one is accepted",
        "5 command(s) refused in all while 2 ran and 3 waited (5 since the start)"
      ])
      assert.include(logs, "unknown command \"nope\\n\\u001b[31m\"")
    }))

  it.effect("commands still waiting when the shutdown begins never start: counted as cancelled", () =>
    Effect.gen(function*() {
      for (const policy of [ShutdownPolicy.FailFast(), ShutdownPolicy.drain("3 seconds")]) {
        const started = yield* Ref.make(0)
        const finished = yield* Ref.make(0)
        const extension = jobs({ started, finished }, {
          work: "1 second",
          maxConcurrentCommands: 1,
          maxQueuedCommands: 2,
          policy
        })
        const { fiber, raw } = yield* runRaw(extension, makeMemoryFs())
        yield* raw.send(initializeRequest)
        yield* raw.next
        yield* raw.send({ jsonrpc: "2.0", method: "initialized" })
        for (let i = 0; i < 3; i++) yield* execute(raw, "jobs.run")
        yield* eventually(Effect.map(Ref.get(started), (n) => n === 1), "one runs")
        yield* raw.send({ jsonrpc: "2.0", id: 2, method: "shutdown" })
        // Under drain the running one finishes; the two waiting never start.
        if (policy._tag === "Drain") yield* adjust("1 second")
        assert.deepStrictEqual((yield* raw.next).result, { success: true })
        const outcome = yield* Fiber.join(fiber)
        assert.strictEqual(yield* Ref.get(started), 1, policy._tag)
        assert.strictEqual(yield* Ref.get(finished), policy._tag === "Drain" ? 1 : 0)
        assert.strictEqual(outcome.cancelled, policy._tag === "Drain" ? 2 : 3)
        assert.strictEqual(outcome.refusedCommands, 0)
      }
    }))

  it.effect("a signal (GracefulShutdown.stop) runs the checklist while the connection is open: a draining command still reaches the host", () =>
    Effect.gen(function*() {
      const registry = yield* GracefulShutdown.make
      const late = Extension.make({
        name: "late",
        version: "1.0.0",
        policy: ShutdownPolicy.drain("3 seconds"),
        state: { schema: State, initial: { runs: 0 } },
        commands: {
          "late.mark": {
            title: "Mark after a second",
            run: ({ state }) =>
              Effect.gen(function*() {
                yield* Effect.sleep("1 second")
                yield* SubscriptionRef.update(state, (s) => ({ runs: s.runs + 1 }))
                yield* Editor.patchMessage([{ path: "PID-5.1", value: "LATE" }])
              })
          }
        }
      })
      const { fiber, fs, host, initialize, store } = yield* harness(late, makeMemoryFs(), { registry })
      yield* initialize
      // The extension's stop is registered; its connection is not (it must outlive the checklist).
      assert.strictEqual(yield* registry.size, 1)
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "late.mark" })
      const stopping = yield* Effect.forkChild(registry.stop)
      yield* adjust("999 millis")
      assert.isTrue(Option.isNone(yield* poll(stopping)), "draining")
      yield* adjust("1 milli")
      yield* Fiber.join(stopping)
      // The command's request was served over the open connection, and the state was saved.
      assert.include(yield* store.current, "LATE")
      assert.deepStrictEqual(JSON.parse(fs.files.get("/data/extensions/late/state.json")!), { runs: 1 })
      // The run itself goes on until it is interrupted, as runMain does next; the checklist does not run again.
      assert.isTrue(Option.isNone(yield* poll(fiber)))
      yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.hasInterrupts(yield* Fiber.await(fiber)))
    }))

  it.effect("a second signal (GracefulShutdown.force) cuts the drain short at once", () =>
    Effect.gen(function*() {
      const registry = yield* GracefulShutdown.make
      const probe = yield* makeProbe
      const extension = counter(probe, { policy: ShutdownPolicy.drain("30 seconds"), budget: "20 seconds" })
      const { host, initialize } = yield* harness(extension, makeMemoryFs(), { registry })
      yield* initialize
      yield* host.notify(HermesProtocol.ExecuteCommand, { command: "counter.slow" })
      yield* Deferred.await(probe.started)
      const stopping = yield* Effect.forkChild(registry.stop)
      yield* adjust("1 second")
      assert.isTrue(Option.isNone(yield* poll(stopping)), "draining")
      // No clock moves from here on.
      yield* registry.force
      yield* Fiber.join(stopping)
      assert.strictEqual(yield* Ref.get(probe.cancelled), 1)
      assert.strictEqual(yield* Ref.get(probe.finished), 0)
    }))
})

/** Runs `extension` over a pair driven by hand, with the environment `env` for its Config. */
const runRaw = <S, Res>(
  extension: Extension.Extension<S, Res, never>,
  fs: MemoryFs,
  options: { readonly env?: Record<string, string>; readonly monitor?: HostMonitor.HostMonitor.Service } = {}
) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    const fiber = yield* Extension.run(extension).pipe(
      Effect.provideService(Transport.Transport, pair.right),
      Effect.provide(fs.layer),
      Effect.provide(HostMonitor.layer(options.monitor ?? HostMonitor.never)),
      Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env: options.env ?? {} })),
      Effect.forkChild
    )
    const raw = yield* makeRaw(pair.left)
    return { fiber, raw }
  })

/** `fs`, except that reading `file` is refused, as for a file whose permissions keep the extension out. */
const unreadable = (fs: MemoryFs, file: string) =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(Effect.service(FileSystem.FileSystem), (inner): FileSystem.FileSystem => ({
      ...inner,
      readFileString: (path, encoding) =>
        path === file
          ? Effect.fail(PlatformError.systemError({
            _tag: "PermissionDenied",
            module: "FileSystem",
            method: "readFileString",
            pathOrDescriptor: path
          }))
          : inner.readFileString(path, encoding)
    }))
  ).pipe(Layer.provideMerge(fs.layer))
