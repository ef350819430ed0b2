import { assert, describe, it } from "@effect/vitest"
import { Journal, JournalError, ProcessRecord } from "@lifeline/journal"
import { Framing } from "@lifeline/jsonrpc"
import { Connection, GracefulShutdown, Method, Protocol, ShutdownPolicy } from "@lifeline/kernel"
import type { NodeChildProcess } from "@lifeline/node"
import {
  Clock,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  Logger,
  Option,
  Queue,
  References,
  Schema,
  Scope,
  Stream
} from "effect"
import type { Cause } from "effect"
import { TestClock } from "effect/testing"
import * as internal from "../src/internal/childProcess.js"
import { LineSplitter, Tail } from "../src/internal/lines.js"

interface Sent {
  readonly signal: NodeJS.Signals
  readonly at: number
}

interface Behaviour {
  /** What the fake process does when its stdin ends. */
  readonly onEndOfInput?: "exit" | "ignore"
  /** The signals the fake process dies of; the others it ignores. Default: SIGTERM and SIGKILL. */
  readonly diesOf?: ReadonlyArray<NodeJS.Signals>
  /** A descendant in the process group that dies only of these signals. */
  readonly descendantDiesOf?: ReadonlyArray<NodeJS.Signals>
}

/** A child process that exists only in memory, with the reactions a test asks for, on the TestClock. */
const makeFake = (behaviour: Behaviour = {}) =>
  Effect.gen(function*() {
    const clock = yield* Clock.Clock
    const exited = yield* Deferred.make<NodeChildProcess.ExitStatus>()
    const stdout = yield* Queue.make<Uint8Array, Cause.Done>()
    const stderr = yield* Queue.make<Uint8Array, Cause.Done>()
    const written: Array<Uint8Array> = []
    const signals: Array<Sent> = []
    let status: NodeChildProcess.ExitStatus | undefined
    let inputEnded = false
    let descendantAlive = behaviour.descendantDiesOf !== undefined

    const exit = (exitStatus: NodeChildProcess.ExitStatus) => {
      if (status !== undefined) return
      status = exitStatus
      Queue.endUnsafe(stdout)
      Queue.endUnsafe(stderr)
      Deferred.doneUnsafe(exited, Exit.succeed(exitStatus))
    }
    const diesOf = behaviour.diesOf ?? ["SIGTERM", "SIGKILL"]

    const handle: internal.Handle = {
      pid: 4242,
      stdout: Stream.fromQueue(stdout),
      stderr: Stream.fromQueue(stderr),
      stdin: {
        write: (chunks) =>
          Effect.suspend(() => {
            if (inputEnded) return Effect.fail({ _tag: "Closed" } as const)
            written.push(...chunks)
            return Effect.void
          }),
        end: Effect.sync(() => {
          if (inputEnded) return
          inputEnded = true
          if ((behaviour.onEndOfInput ?? "exit") === "exit") exit({ exitCode: 0, signal: null })
        }),
        flushed: Effect.void,
        onBroken: () => () => {},
        unsafeFailure: () => undefined
      },
      exit: Deferred.await(exited),
      unsafeExitStatus: () => status,
      unsafeSignal: (signal) => {
        signals.push({ signal, at: clock.currentTimeMillisUnsafe() })
        if (status === undefined && diesOf.includes(signal)) exit({ exitCode: null, signal })
        if (descendantAlive && behaviour.descendantDiesOf!.includes(signal)) descendantAlive = false
      },
      unsafeGroupAlive: () => status === undefined || descendantAlive
    }
    return {
      handle,
      signals,
      written,
      exit,
      writeStdout: (text: string) => Queue.offerUnsafe(stdout, new TextEncoder().encode(text)),
      writeStderr: (text: string) => Queue.offerUnsafe(stderr, new TextEncoder().encode(text)),
      inputEnded: () => inputEnded
    }
  })

const settings = (
  overrides: Partial<internal.Settings> & { readonly stopOptions?: NodeChildProcess.StopOptions } = {}
): internal.Settings => ({
  name: "fake",
  stderrTailLines: 3,
  maxStderrLineLength: 100,
  stderrLogLevel: "None",
  stderrInfoLines: 20,
  stop: overrides.stopOptions ?? {},
  shutdown: undefined,
  forced: undefined,
  ...overrides
})

/** Starts the stop sequence in a fiber and lets it run up to its first wait. */
const startStop = (child: NodeChildProcess.Child) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(child.stop)
    yield* settle
    return fiber
  })

const settle = Effect.repeat(Effect.yieldNow, { times: 50 })

const signalsOf = (sent: ReadonlyArray<Sent>) => sent.map(({ at, signal }) => `${signal}@${at}`)

describe("NodeChildProcess stop sequence", () => {
  it.effect("a child that exits when its stdin ends gets no signal", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const self = yield* internal.make(fake.handle, settings())
      const report = yield* self.child.stop
      assert.deepStrictEqual(signalsOf(fake.signals), [])
      assert.strictEqual(report.endedBy, "EndOfInput")
      assert.strictEqual(report.shutdown, "Skipped")
      assert.strictEqual(report.descendants, "None")
      assert.deepStrictEqual(report.exit, { exitCode: 0, signal: null })
      assert.strictEqual(report.elapsedMillis, 0)
    }))

  it.effect("a child that ignores the end of its input gets SIGTERM after exitTimeout, not before", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake({ onEndOfInput: "ignore" })
      const self = yield* internal.make(fake.handle, settings())
      const stopping = yield* startStop(self.child)
      assert.isTrue(fake.inputEnded())
      yield* TestClock.adjust("999 millis")
      assert.deepStrictEqual(signalsOf(fake.signals), [])
      yield* TestClock.adjust("1 millis")
      const report = yield* Fiber.join(stopping)
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGTERM@1000"])
      assert.strictEqual(report.endedBy, "Terminate")
      assert.deepStrictEqual(report.exit, { exitCode: null, signal: "SIGTERM" })
      assert.strictEqual(report.elapsedMillis, 1000)
    }))

  it.effect("a child that ignores SIGTERM gets SIGKILL terminateTimeout later, not before", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: ["SIGKILL"] })
      const self = yield* internal.make(fake.handle, settings({ stopOptions: { terminateTimeout: "2 seconds" } }))
      const stopping = yield* startStop(self.child)
      yield* TestClock.adjust("2999 millis")
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGTERM@1000"])
      yield* TestClock.adjust("1 millis")
      const report = yield* Fiber.join(stopping)
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGTERM@1000", "SIGKILL@3000"])
      assert.strictEqual(report.endedBy, "Kill")
      assert.strictEqual(report.elapsedMillis, 3000)
    }))

  it.effect("a child that survives SIGKILL is reported Unkillable after killTimeout: the stop still ends", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: [] })
      const self = yield* internal.make(fake.handle, settings())
      const stopping = yield* startStop(self.child)
      yield* TestClock.adjust("3 seconds")
      const report = yield* Fiber.join(stopping)
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGTERM@1000", "SIGKILL@2000"])
      assert.strictEqual(report.endedBy, "Unkillable")
      assert.isUndefined(report.exit)
      assert.strictEqual(report.elapsedMillis, 3000)
      assert.strictEqual(report.descendants, "Survived")
    }))

  it.effect("an answered protocol shutdown comes first, then the end of input", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const shutdown = Effect.andThen(Effect.sleep("300 millis"), Effect.sync(() => assert.isFalse(fake.inputEnded())))
      const self = yield* internal.make(fake.handle, settings({ shutdown }))
      const stopping = yield* startStop(self.child)
      yield* TestClock.adjust("300 millis")
      const report = yield* Fiber.join(stopping)
      assert.strictEqual(report.shutdown, "Completed")
      assert.strictEqual(report.endedBy, "EndOfInput")
      assert.strictEqual(report.elapsedMillis, 300)
      assert.deepStrictEqual(signalsOf(fake.signals), [])
    }))

  it.effect("no answer to the protocol shutdown within 5 s: SIGKILL at once (Hermes), no SIGTERM", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake({ onEndOfInput: "ignore" })
      const self = yield* internal.make(fake.handle, settings({ shutdown: Effect.never }))
      const stopping = yield* startStop(self.child)
      yield* TestClock.adjust("4999 millis")
      assert.deepStrictEqual(signalsOf(fake.signals), [])
      yield* TestClock.adjust("1 millis")
      const report = yield* Fiber.join(stopping)
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGKILL@5000"])
      assert.strictEqual(report.shutdown, "TimedOut")
      assert.strictEqual(report.endedBy, "Kill")
      assert.isTrue(fake.inputEnded())
    }))

  it.effect("with killOnShutdownTimeout false, a shutdown timeout goes on to end of input and SIGTERM", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake({ onEndOfInput: "ignore" })
      const self = yield* internal.make(
        fake.handle,
        settings({
          shutdown: Effect.never,
          stopOptions: { shutdownTimeout: "2 seconds", killOnShutdownTimeout: false }
        })
      )
      const stopping = yield* startStop(self.child)
      yield* TestClock.adjust("3 seconds")
      const report = yield* Fiber.join(stopping)
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGTERM@3000"])
      assert.strictEqual(report.endedBy, "Terminate")
    }))

  it.effect("a failed protocol shutdown is reported and the sequence goes on", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const self = yield* internal.make(fake.handle, settings({ shutdown: Effect.fail("no") }))
      const report = yield* self.child.stop
      assert.strictEqual(report.shutdown, "Failed")
      assert.strictEqual(report.endedBy, "EndOfInput")
    }))

  it.effect("a child that exits during the protocol shutdown ends it there", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const shutdown = Effect.andThen(
        Effect.sleep("100 millis"),
        Effect.sync(() => fake.exit({ exitCode: 0, signal: null }))
      ).pipe(Effect.andThen(Effect.never))
      const self = yield* internal.make(fake.handle, settings({ shutdown }))
      const stopping = yield* startStop(self.child)
      yield* TestClock.adjust("100 millis")
      const report = yield* Fiber.join(stopping)
      assert.strictEqual(report.endedBy, "Shutdown")
      assert.strictEqual(report.shutdown, "Failed")
      assert.strictEqual(report.elapsedMillis, 100)
    }))

  it.effect("descendants left in the process group after the child exited get SIGTERM, then SIGKILL", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake({ descendantDiesOf: ["SIGKILL"] })
      const self = yield* internal.make(fake.handle, settings())
      const stopping = yield* startStop(self.child)
      yield* TestClock.adjust("999 millis")
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGTERM@0"])
      yield* TestClock.adjust("1 second")
      const report = yield* Fiber.join(stopping)
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGTERM@0", "SIGKILL@1000"])
      assert.strictEqual(report.endedBy, "EndOfInput")
      assert.strictEqual(report.descendants, "Killed")
    }))

  it.effect("a descendant that dies of SIGTERM is reported Terminated", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake({ descendantDiesOf: ["SIGTERM", "SIGKILL"] })
      const self = yield* internal.make(fake.handle, settings())
      const stopping = yield* startStop(self.child)
      yield* TestClock.adjust("20 millis")
      const report = yield* Fiber.join(stopping)
      assert.strictEqual(report.descendants, "Terminated")
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGTERM@0"])
    }))

  it.effect("a child that had already exited is not signalled", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const self = yield* internal.make(fake.handle, settings({ shutdown: Effect.never }))
      fake.exit({ exitCode: 3, signal: null })
      const report = yield* self.child.stop
      assert.strictEqual(report.endedBy, "Exited")
      assert.strictEqual(report.shutdown, "Skipped")
      assert.deepStrictEqual(signalsOf(fake.signals), [])
    }))

  it.effect("a second signal in the host (forced) cuts the wait short and goes straight to SIGKILL", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake({ onEndOfInput: "ignore" })
      const forced = yield* Deferred.make<void>()
      const self = yield* internal.make(
        fake.handle,
        settings({ shutdown: Effect.never, forced: Deferred.await(forced) })
      )
      const stopping = yield* startStop(self.child)
      yield* TestClock.adjust("1 second")
      yield* Deferred.succeed(forced, void 0)
      const report = yield* Fiber.join(stopping)
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGKILL@1000"])
      assert.strictEqual(report.endedBy, "Kill")
      assert.strictEqual(report.elapsedMillis, 1000)
    }))

  it.effect("closing the Scope runs the stop sequence once; stop returns the same report", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const fake = yield* makeFake({ onEndOfInput: "ignore" })
      const self = yield* internal.make(fake.handle, settings()).pipe(Scope.provide(scope))
      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* settle
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(closing)
      const report = yield* self.child.stop
      assert.strictEqual(report.endedBy, "Terminate")
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGTERM@1000"])
    }))
})

describe("NodeChildProcess stop sequence in an interrupted fiber", () => {
  // SIGTERM interrupts the main fiber: the stop then runs as a finalizer of a fiber whose interruption is pending.
  // Its bounded waits must still wait, and must still be bounded.
  it.effect("the waits and the escalation are the same as in a clean close", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: ["SIGKILL"] })
      const started = yield* Deferred.make<void>()
      const main = yield* Effect.forkChild(
        Effect.gen(function*() {
          yield* internal.make(
            fake.handle,
            settings({
              shutdown: Effect.never,
              stopOptions: { shutdownTimeout: "2 seconds", killOnShutdownTimeout: false }
            })
          )
          yield* Deferred.succeed(started, void 0)
          return yield* Effect.never
        }).pipe(Effect.scoped)
      )
      yield* Deferred.await(started)
      const interrupting = yield* Effect.forkChild(Fiber.interrupt(main))
      yield* settle
      yield* TestClock.adjust("1999 millis")
      assert.deepStrictEqual(signalsOf(fake.signals), [], "the shutdown step waits its full bound")
      yield* TestClock.adjust("1 millis")
      yield* settle
      assert.isTrue(fake.inputEnded())
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGTERM@3000"])
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(interrupting)
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGTERM@3000", "SIGKILL@4000"])
    }))
})

const Echo = Method.request("echo", { params: Schema.Struct({ text: Schema.String }), result: Schema.String })
const Client = Protocol.make({ calls: [Echo] })

describe("NodeChildProcess exit", () => {
  it.effect("when the child exits, pending calls fail at once with PeerExited: code, signal, stderr tail", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const self = yield* internal.make(fake.handle, settings())
      const peer = yield* internal.attachPeer(
        self,
        { protocol: Client, handlers: {}, transport: self.child.transport, requestTimeout: "1 hour" },
        undefined
      )
      const call = yield* Effect.forkChild(Effect.flip(peer.call(Echo, { text: "hi" })))
      yield* settle
      assert.strictEqual(fake.written.length, 1)
      fake.writeStderr("first\nsecond\r\nthird\nfourth")
      fake.exit({ exitCode: 3, signal: null })
      const error = yield* Fiber.join(call)
      assert.strictEqual(error._tag, "PeerExited")
      if (error._tag !== "PeerExited") return
      assert.strictEqual(error.exitCode, 3)
      assert.isNull(error.signal)
      // The tail keeps the last three lines; the last line had no newline and is kept too.
      assert.deepStrictEqual(error.stderrTail, ["second", "third", "fourth"])
      const refused = yield* Effect.flip(peer.call(Echo, { text: "again" }))
      assert.strictEqual(refused._tag, "PeerExited")
      assert.strictEqual((yield* peer.closed)._tag, "PeerExited")
      assert.deepStrictEqual(yield* self.child.exitStatus, Option.some({ exitCode: 3, signal: null }))
    }))

  it.effect("a child killed by a signal reports the signal", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const self = yield* internal.make(fake.handle, settings())
      yield* self.child.kill("SIGTERM")
      const error = yield* self.child.exited
      assert.isNull(error.exitCode)
      assert.strictEqual(error.signal, "SIGTERM")
    }))

  it.effect("answers still arrive through the transport before the exit", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const self = yield* internal.make(fake.handle, settings())
      const peer = yield* internal.attachPeer(
        self,
        { protocol: Client, handlers: {}, transport: self.child.transport },
        undefined
      )
      const call = yield* Effect.forkChild(peer.call(Echo, { text: "hi" }))
      yield* settle
      fake.writeStdout(
        new TextDecoder().decode(Framing.contentLength.encodeString(`{"jsonrpc":"2.0","id":1,"result":"hi"}`))
      )
      assert.strictEqual(yield* Fiber.join(call), "hi")
    }))

  it.effect("stopping a child with a peer: the shutdown step gets the peer, pending calls end with ShutdownError", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const self = yield* internal.make(fake.handle, settings())
      const shutdownSent = yield* Deferred.make<number>()
      const peer = yield* internal.attachPeer(
        self,
        { protocol: Client, handlers: {}, transport: self.child.transport, requestTimeout: "1 hour" },
        (peer) =>
          Effect.andThen(
            Effect.flatMap(Clock.currentTimeMillis, (now) => Deferred.succeed(shutdownSent, now)),
            Effect.ignore(peer.call(Echo, { text: "shutdown" }, { timeout: Duration.seconds(1) }))
          )
      )
      const pending = yield* Effect.forkChild(Effect.flip(peer.call(Echo, { text: "pending" })))
      yield* settle
      const stopping = yield* startStop(self.child)
      yield* TestClock.adjust("1 second")
      const report = yield* Fiber.join(stopping)
      assert.strictEqual(yield* Deferred.await(shutdownSent), 0)
      assert.strictEqual(report.shutdown, "Completed")
      assert.strictEqual(report.endedBy, "EndOfInput")
      const error = yield* Fiber.join(pending)
      assert.strictEqual(error._tag, "ShutdownError")
      assert.isTrue(yield* peer.isClosed)
    }))
})

describe("stderr lines", () => {
  it("splits LF and CRLF, across chunks and multi-byte characters", () => {
    const splitter = new LineSplitter(100)
    const bytes = new TextEncoder().encode("a\r\nb")
    assert.deepStrictEqual(splitter.push(bytes.subarray(0, 2)), [])
    assert.deepStrictEqual(splitter.push(bytes.subarray(2)), ["a"])
    const euro = new TextEncoder().encode("€\n")
    assert.deepStrictEqual(splitter.push(euro.subarray(0, 1)), [])
    assert.deepStrictEqual(splitter.push(euro.subarray(1)), ["b€"])
    assert.deepStrictEqual(splitter.push(new TextEncoder().encode("\n")), [""])
    assert.deepStrictEqual(splitter.push(new TextEncoder().encode("tail")), [])
    assert.deepStrictEqual(splitter.end(), ["tail"])
  })

  it("cuts a line longer than the limit, so an endless line costs bounded memory", () => {
    const splitter = new LineSplitter(4)
    assert.deepStrictEqual(splitter.push(new TextEncoder().encode("abcdefghij")), ["abcd", "efgh"])
    assert.deepStrictEqual(splitter.push(new TextEncoder().encode("k\n")), ["ijk"])
    assert.deepStrictEqual(splitter.push(new TextEncoder().encode("123456789\n")), ["1234", "5678", "9"])
  })

  it("keeps the last N lines, oldest first", () => {
    const tail = new Tail<number>(3)
    assert.deepStrictEqual(tail.toArray(), [])
    for (let i = 1; i <= 7; i++) tail.push(i)
    assert.deepStrictEqual(tail.toArray(), [5, 6, 7])
    const none = new Tail<number>(0)
    none.push(1)
    assert.deepStrictEqual(none.toArray(), [])
  })

  it.effect("stderr lines go to the tail and to the log, annotated with the child's name and pid", () => {
    const logged: Array<{ readonly message: unknown; readonly child: unknown; readonly pid: unknown }> = []
    const capture = Logger.make(({ fiber, message }) => {
      const annotations = fiber.getRef(References.CurrentLogAnnotations)
      logged.push({
        message: Array.isArray(message) ? message[0] : message,
        child: annotations.child,
        pid: annotations.pid
      })
    })
    return Effect.gen(function*() {
      const fake = yield* makeFake()
      const self = yield* internal.make(fake.handle, settings({ stderrLogLevel: "Info" }))
      fake.writeStderr("hello\nworld\n")
      fake.exit({ exitCode: 0, signal: null })
      yield* self.child.exited
      assert.deepStrictEqual(yield* self.child.stderrTail, ["hello", "world"])
      const lines = logged.filter(({ message }) => message === "hello" || message === "world")
      assert.deepStrictEqual(lines, [
        { message: "hello", child: "fake", pid: 4242 },
        { message: "world", child: "fake", pid: 4242 }
      ])
    }).pipe(Effect.provide(Logger.layer([capture])))
  })

  const captureEntries = () => {
    const logged: Array<{ level: string; message: unknown; annotations: Record<string, unknown> }> = []
    const capture = Logger.make(({ fiber, logLevel, message }) => {
      logged.push({
        level: logLevel,
        message: Array.isArray(message) ? message[0] : message,
        annotations: { ...fiber.getRef(References.CurrentLogAnnotations) }
      })
    })
    return { logged, layer: Logger.layer([capture]) }
  }

  it.effect("without a level: the first stderrInfoLines lines at Info, the rest at Debug", () => {
    const { logged, layer } = captureEntries()
    return Effect.gen(function*() {
      const fake = yield* makeFake()
      const self = yield* internal.make(fake.handle, settings({ stderrLogLevel: undefined, stderrInfoLines: 2 }))
      fake.writeStderr("one\ntwo\nthree\n")
      fake.exit({ exitCode: 0, signal: null })
      yield* self.child.exited
      const lines = logged.filter(({ annotations }) => annotations.stream === "stderr")
      assert.deepStrictEqual(lines.map(({ level, message }) => [level, message]), [
        ["Info", "one"],
        ["Info", "two"],
        ["Debug", "three"]
      ])
    }).pipe(Effect.provide(layer), Effect.provideService(References.MinimumLogLevel, "All"))
  })

  it.effect("a logfmt line of a Lifeline child is its own entry: its message, its fields as child.*, its level", () => {
    const { logged, layer } = captureEntries()
    return Effect.gen(function*() {
      const fake = yield* makeFake()
      const self = yield* internal.make(fake.handle, settings({ stderrLogLevel: "Info" }))
      fake.writeStderr(
        "timestamp=2026-11-28T21:00:00.000Z level=INFO fiber=#7 message=\"ready on \\\"stdio\\\"\" extension=hl7\n" +
          "timestamp=2026-11-28T21:00:01.000Z level=ERROR fiber=#7 message=boom\n" +
          "level=INFO message=\"unterminated\n" +
          "level=INFO message=forged \u001b[2J=x\n"
      )
      fake.exit({ exitCode: 0, signal: null })
      yield* self.child.exited
      const lines = logged.filter(({ annotations }) => annotations.stream === "stderr")
      assert.deepStrictEqual(lines.map(({ level, message }) => [level, message]), [
        ["Info", "ready on \"stdio\""],
        ["Error", "boom"], // the child's own level, higher than Info
        ["Info", "level=INFO message=\"unterminated"], // not a logfmt line: logged as it is
        ["Info", "level=INFO message=forged \u001b[2J=x"] // a key that is no plain name: logged as it is
      ])
      assert.strictEqual(lines[0].annotations["child.extension"], "hl7")
      assert.strictEqual(lines[0].annotations["child.fiber"], "#7")
      assert.strictEqual(lines[0].annotations["child.level"], "Info")
      assert.strictEqual(lines[0].annotations.child, "fake")
      // The tail keeps the last 3 lines as the child wrote them (for PeerExited.stderrTail).
      assert.strictEqual(
        (yield* self.child.stderrTail)[0],
        "timestamp=2026-11-28T21:00:01.000Z level=ERROR fiber=#7 message=boom"
      )
    }).pipe(Effect.provide(layer))
  })
})

describe("NodeChildProcess recorded in a journal", () => {
  const command = ["node", "worker.js"]

  /** The unfinished process entries: the recorded children that have not exited. */
  const processEntries = (journal: Journal.Journal.Service) =>
    Effect.map(journal.unfinished(), (entries) => entries.filter((entry) => entry.kind === ProcessRecord.kind))

  it.effect("the spawn is recorded InFlight at once; an exit on its own is recorded with its status", () =>
    Effect.gen(function*() {
      const journal = yield* Journal.makeMemory
      const scope = yield* Scope.make()
      const fake = yield* makeFake()
      yield* internal.record(fake.handle, journal, command).pipe(Scope.provide(scope))
      yield* internal.make(fake.handle, settings()).pipe(Scope.provide(scope))
      const [entry] = yield* processEntries(journal)
      assert.deepStrictEqual([entry.status, entry.payload], ["InFlight", { pid: 4242, startedAt: 0, command }])
      assert.deepStrictEqual(yield* journal.running, [entry.key])
      fake.exit({ exitCode: 3, signal: null })
      yield* settle
      const ended = Option.getOrThrow(yield* journal.get(entry.key))
      assert.deepStrictEqual([ended.status, ended.result], ["Completed", { exitCode: 3, signal: null }])
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(yield* journal.running, [])
      assert.deepStrictEqual(yield* journal.unfinished(), [])
    }))

  it.effect("a child the stop sequence kills when the Scope closes is recorded with the signal", () =>
    Effect.gen(function*() {
      const journal = yield* Journal.makeMemory
      const scope = yield* Scope.make()
      const fake = yield* makeFake({ onEndOfInput: "ignore" })
      yield* internal.record(fake.handle, journal, command).pipe(Scope.provide(scope))
      yield* internal.make(fake.handle, settings()).pipe(Scope.provide(scope))
      const [entry] = yield* processEntries(journal)
      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* settle
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(closing)
      const ended = Option.getOrThrow(yield* journal.get(entry.key))
      assert.deepStrictEqual([ended.status, ended.result], ["Completed", { exitCode: null, signal: "SIGTERM" }])
      assert.deepStrictEqual(yield* journal.running, [])
    }))

  it.effect("a child that survives SIGKILL stays InFlight for the next start's reaper", () =>
    Effect.gen(function*() {
      const journal = yield* Journal.makeMemory
      const scope = yield* Scope.make()
      const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: [] })
      yield* internal.record(fake.handle, journal, command).pipe(Scope.provide(scope))
      yield* internal.make(fake.handle, settings()).pipe(Scope.provide(scope))
      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* settle
      yield* TestClock.adjust("3 seconds")
      yield* Fiber.join(closing)
      const [entry] = yield* processEntries(journal)
      assert.strictEqual(entry.status, "InFlight")
      assert.deepStrictEqual(yield* journal.running, [], "not run by this process any more: a reaper may take it")
    }))

  it.effect("a leader that exits leaving descendants in its group stays InFlight until the group is gone", () =>
    Effect.gen(function*() {
      const journal = yield* Journal.makeMemory
      const scope = yield* Scope.make()
      const fake = yield* makeFake({ descendantDiesOf: ["SIGTERM"] })
      yield* internal.record(fake.handle, journal, command).pipe(Scope.provide(scope))
      yield* internal.make(fake.handle, settings()).pipe(Scope.provide(scope))
      const [entry] = yield* processEntries(journal)
      fake.exit({ exitCode: 0, signal: null })
      yield* settle
      yield* TestClock.adjust("1 second")
      // If the host crashed now, the reaper must still find the group: its members are ours.
      assert.strictEqual(Option.getOrThrow(yield* journal.get(entry.key)).status, "InFlight")
      fake.handle.unsafeSignal("SIGTERM")
      yield* TestClock.adjust("100 millis")
      yield* settle
      const ended = Option.getOrThrow(yield* journal.get(entry.key))
      assert.deepStrictEqual([ended.status, ended.result], ["Completed", { exitCode: 0, signal: null }])
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("descendants that survive the stop's sweep leave the record InFlight for the reaper", () =>
    Effect.gen(function*() {
      const journal = yield* Journal.makeMemory
      const scope = yield* Scope.make()
      const fake = yield* makeFake({ descendantDiesOf: [] })
      yield* internal.record(fake.handle, journal, command).pipe(Scope.provide(scope))
      yield* internal.make(fake.handle, settings()).pipe(Scope.provide(scope))
      const [entry] = yield* processEntries(journal)
      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* settle
      yield* TestClock.adjust("3 seconds")
      yield* Fiber.join(closing)
      assert.strictEqual(Option.getOrThrow(yield* journal.get(entry.key)).status, "InFlight")
      assert.deepStrictEqual(yield* journal.running, [])
    }))

  it.effect("a spawn the journal cannot record kills the child at once and fails", () =>
    Effect.gen(function*() {
      const memory = yield* Journal.makeMemory
      const journal: Journal.Journal.Service = {
        ...memory,
        begin: () => Effect.fail(new JournalError.JournalError({ reason: "Storage", detail: "disk full" }))
      }
      const fake = yield* makeFake()
      const error = yield* Effect.flip(internal.record(fake.handle, journal, command))
      assert.strictEqual(error.reason, "Storage")
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGKILL@0"])
    }))
})

const Work = Method.request("work", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })
const WorkClient = Protocol.make({ calls: [Work] })

/** A connection on a fake child, stopped the way `makeConnection` stops it: the connection first, then the ladder. */
const attachConnection = (
  self: internal.Internal,
  policy: ShutdownPolicy.Policy
) =>
  internal.attach(
    self,
    Connection.make({
      protocol: WorkClient,
      transport: self.child.transport,
      handlers: {},
      policy,
      requestTimeout: "1 hour",
      gracefulShutdown: false
    }),
    (connection) => connection.peer,
    undefined,
    internal.closingOf(self),
    undefined
  )

const answer = (id: number, result: unknown) =>
  new TextDecoder().decode(
    Framing.contentLength.encodeString(JSON.stringify({ jsonrpc: "2.0", id, result }))
  )

describe("NodeChildProcess: one stop, the connection under its policy first", () => {
  it.effect("a 10 s drain drains 10 s: the answer at 8 s arrives, and stdin ends only after it", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      // The old shutdownTimeout no longer caps the drain: the close step's bound derives from the policy.
      const self = yield* internal.make(fake.handle, settings({ stopOptions: { shutdownTimeout: "5 seconds" } }))
      const connection = yield* attachConnection(self, ShutdownPolicy.drain("10 seconds"))
      const call = yield* Effect.forkChild(connection.peer.call(Work, { ms: 8000 }))
      yield* settle
      const stopping = yield* startStop(self.child)
      yield* TestClock.adjust("5 seconds")
      yield* settle
      assert.isFalse(fake.inputEnded(), "not cut at 5 s")
      yield* TestClock.adjust("3 seconds")
      fake.writeStdout(answer(1, 8000))
      assert.strictEqual(yield* Fiber.join(call), 8000)
      const report = yield* Fiber.join(stopping)
      assert.strictEqual(report.close, "Completed")
      assert.strictEqual(report.endedBy, "EndOfInput")
      assert.strictEqual(report.elapsedMillis, 8000)
      assert.isTrue((yield* connection.awaitShutdown).drained)
    }))

  it.effect("what the drain did not finish is cut off at exactly 10 s, then stdin ends", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const self = yield* internal.make(fake.handle, settings())
      const connection = yield* attachConnection(self, ShutdownPolicy.drain("10 seconds"))
      const call = yield* Effect.forkChild(Effect.flip(connection.peer.call(Work, { ms: 60_000 })))
      yield* settle
      const stopping = yield* startStop(self.child)
      yield* TestClock.adjust(Duration.millis(9999))
      yield* settle
      assert.isFalse(fake.inputEnded())
      yield* TestClock.adjust(Duration.millis(1))
      const report = yield* Fiber.join(stopping)
      assert.strictEqual(((yield* Fiber.join(call)) as { reason?: string }).reason, "DrainTimeout")
      assert.strictEqual(report.elapsedMillis, 10_000)
      assert.strictEqual(report.endedBy, "EndOfInput")
      assert.deepStrictEqual((yield* connection.awaitShutdown).cutOff.map((c) => c.method), ["work"])
    }))

  it.effect("a child that exits on its own while a handler runs: Failed, and the handler is reported cut off", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const self = yield* internal.make(fake.handle, settings())
      const interrupted = yield* Deferred.make<void>()
      const connection = yield* internal.attach(
        self,
        Connection.make({
          protocol: Protocol.make({ serves: [Work] }),
          transport: self.child.transport,
          handlers: {
            work: ({ ms }) =>
              Effect.as(Effect.sleep(Duration.millis(ms)), ms).pipe(
                Effect.onInterrupt(() => Deferred.succeed(interrupted, void 0))
              )
          },
          policy: ShutdownPolicy.drain("10 seconds"),
          gracefulShutdown: false
        }),
        (connection) => connection.peer,
        undefined,
        (connection) => ({ close: connection.stop(), closeNow: connection.stopNow(), policy: connection.policy }),
        undefined
      )
      fake.writeStdout(
        new TextDecoder().decode(Framing.contentLength.encodeString(
          JSON.stringify({ jsonrpc: "2.0", id: 7, method: "work", params: { ms: 60_000 } })
        ))
      )
      yield* settle
      assert.strictEqual((yield* connection.peer.stats).activeInbound, 1)
      fake.exit({ exitCode: 1, signal: null })
      yield* TestClock.adjust("100 millis")
      const report = yield* connection.awaitShutdown
      assert.strictEqual(report.reason, "Failed")
      assert.deepStrictEqual(report.cutOff, [{ direction: "inbound", id: 7, method: "work" }])
      yield* Deferred.await(interrupted)
      const state = yield* connection.lifecycle.state
      assert.strictEqual(state._tag === "Failed" && state.error._tag, "PeerExited")
    }))

  it.effect("a program's graceful shutdown stops a child with a peer: registered for the life of its Scope", () =>
    Effect.gen(function*() {
      const registry = yield* GracefulShutdown.GracefulShutdown
      const fake = yield* makeFake()
      const scope = yield* Scope.make()
      const self = yield* internal.make(fake.handle, settings()).pipe(Scope.provide(scope))
      assert.strictEqual(yield* registry.size, 0, "a bare child belongs to whoever talks to it")
      yield* internal.register(self).pipe(Scope.provide(scope))
      assert.strictEqual(yield* registry.size, 1)
      yield* registry.stop
      assert.strictEqual((yield* self.child.stop).endedBy, "EndOfInput")
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(yield* registry.size, 0)
    }).pipe(Effect.provide(GracefulShutdown.layer)))

  it.effect("forced by the program (a second signal): SIGKILL at once", () =>
    Effect.gen(function*() {
      const registry = yield* GracefulShutdown.GracefulShutdown
      const fake = yield* makeFake({ onEndOfInput: "ignore" })
      const self = yield* internal.make(fake.handle, settings())
      yield* internal.register(self)
      const stopping = yield* Effect.forkChild(registry.stop)
      yield* settle
      yield* TestClock.adjust("500 millis")
      yield* registry.force
      yield* Fiber.join(stopping)
      const report = yield* self.child.stop
      assert.deepStrictEqual(signalsOf(fake.signals), ["SIGKILL@500"])
      assert.isTrue(report.forced)
    }).pipe(Effect.provide(GracefulShutdown.layer)))
})

describe("NodeChildProcess: the reason a Scope closed with reaches the calls it cuts off", () => {
  // The Scope the child lives in, closed by the test: with `Exit.void` (a plain close) or an interruption (an
  // interrupted `Effect.scoped` fiber). The kernel's own `Connection.make` and `Peer.make` report the same.
  const cases = [
    { kind: "connection", exit: Exit.void, reason: "Stop", phase: "Closing" },
    { kind: "connection", exit: Exit.interrupt(), reason: "Interrupted", phase: "Closing" },
    { kind: "peer", exit: Exit.void, reason: "Stop", phase: "Scope" },
    { kind: "peer", exit: Exit.interrupt(), reason: "Interrupted", phase: "Scope" }
  ] as const
  for (const { exit, kind, phase, reason } of cases) {
    it.effect(`${kind}, Scope closed with ${Exit.isSuccess(exit) ? "Exit.void" : "an interruption"}: ${reason}`, () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const scope = yield* Scope.make()
        const self = yield* internal.make(fake.handle, settings()).pipe(Scope.provide(scope))
        const call: Effect.Effect<unknown, unknown> = kind === "connection"
          ? Effect.flatMap(
            attachConnection(self, ShutdownPolicy.FailFast()),
            (connection) => connection.peer.call(Work, { ms: 60_000 })
          )
          : Effect.flatMap(
            internal.attachPeer(
              self,
              { protocol: WorkClient, handlers: {}, transport: self.child.transport, requestTimeout: "1 hour" },
              undefined
            ),
            (peer) => peer.call(Work, { ms: 60_000 })
          )
        const pending = yield* Effect.forkChild(Effect.flip(call))
        yield* settle
        assert.strictEqual(fake.written.length, 1)
        yield* Scope.close(scope, exit)
        const error = (yield* Fiber.join(pending)) as { _tag: string; reason: string; phase: string }
        assert.deepStrictEqual({ tag: error._tag, reason: error.reason, phase: error.phase }, {
          tag: "ShutdownError",
          reason,
          phase
        })
      }))
  }

  it.effect("a signal to the host (the registered stop) closes a peer with Interrupted too", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake()
      const registry = yield* GracefulShutdown.make
      const self = yield* internal.make(fake.handle, settings())
      const peer = yield* internal.attachPeer(
        self,
        { protocol: WorkClient, handlers: {}, transport: self.child.transport, requestTimeout: "1 hour" },
        undefined
      )
      yield* internal.register(self).pipe(Effect.provideService(GracefulShutdown.GracefulShutdown, registry))
      const pending = yield* Effect.forkChild(Effect.flip(peer.call(Work, { ms: 60_000 })))
      yield* settle
      yield* registry.stop
      const error = (yield* Fiber.join(pending)) as { _tag: string; reason: string }
      assert.deepStrictEqual([error._tag, error.reason], ["ShutdownError", "Interrupted"])
    }))
})
