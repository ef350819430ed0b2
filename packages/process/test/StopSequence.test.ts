import { assert, describe, it } from "@effect/vitest"
import { ShutdownPolicy } from "@lifeline/kernel"
import type { Process } from "@lifeline/process"
import { StopSequence } from "@lifeline/process"
import { Clock, Deferred, Duration, Effect, Exit, Fiber, Logger, Option, References } from "effect"
import { TestClock } from "effect/testing"
import { poll } from "./utils.js"

interface Behaviour {
  /** What the fake process does when its input ends. Default: it exits with code 0. */
  readonly onEndOfInput?: "exit" | "ignore"
  /** The signals it dies of; the others it ignores. Default: SIGTERM and SIGKILL. */
  readonly diesOf?: ReadonlyArray<Process.Signal>
  /** A descendant in its process group that dies only of these signals. */
  readonly descendantDiesOf?: ReadonlyArray<Process.Signal>
  /** Leave `groupAlive` out of the target, as a host without process groups does. */
  readonly noGroups?: boolean
}

/** A process that exists only in memory, on the TestClock, and the log of what the sequence did to it. */
const makeFake = (behaviour: Behaviour = {}) =>
  Effect.gen(function*() {
    const clock = yield* Clock.Clock
    const now = () => clock.currentTimeMillisUnsafe()
    const exited = yield* Deferred.make<Process.ExitStatus>()
    const events: Array<string> = []
    let status: Process.ExitStatus | undefined
    let descendantAlive = behaviour.descendantDiesOf !== undefined
    let inputEnded = false
    const exit = (exitStatus: Process.ExitStatus) => {
      if (status !== undefined) return
      status = exitStatus
      Deferred.doneUnsafe(exited, Exit.succeed(exitStatus))
    }
    const diesOf = behaviour.diesOf ?? ["SIGTERM", "SIGKILL"]
    const target: StopSequence.Target = {
      exit: Deferred.await(exited),
      exitStatus: Effect.sync(() => Option.fromUndefinedOr(status)),
      signal: (signal) =>
        Effect.sync(() => {
          events.push(`${signal}@${now()}`)
          if (status === undefined && diesOf.includes(signal)) exit({ exitCode: null, signal })
          if (descendantAlive && behaviour.descendantDiesOf!.includes(signal)) descendantAlive = false
        }),
      ...(behaviour.noGroups === true ? {} : {
        groupAlive: Effect.sync(() => status === undefined || descendantAlive)
      }),
      endInput: Effect.sync(() => {
        if (inputEnded) return
        inputEnded = true
        events.push(`end@${now()}`)
        if ((behaviour.onEndOfInput ?? "exit") === "exit") exit({ exitCode: 0, signal: null })
      })
    }
    return { target, events, exit, inputEnded: () => inputEnded }
  })

/** A step that records when it starts and ends, and takes `ms` on the Clock (forever when undefined). */
const step = (events: Array<string>, name: string, ms: number | undefined): Effect.Effect<void> =>
  Effect.gen(function*() {
    events.push(`${name}@${yield* Clock.currentTimeMillis}`)
    yield* ms === undefined ? Effect.never : Effect.sleep(Duration.millis(ms))
    events.push(`${name} done@${yield* Clock.currentTimeMillis}`)
  })

/** A shutdown request answered at once with an error. */
const failing = (events: Array<string>, name: string) => Effect.andThen(step(events, name, 0), Effect.fail("error"))

const settle = Effect.repeat(Effect.yieldNow, { times: 50 })

/** A second signal on demand: `forced` is the step the sequence waits on; `force` sends it and lets the fibers run. */
const makeForce = Effect.map(Deferred.make<void>(), (signal) => ({
  forced: Deferred.await(signal),
  force: Effect.andThen(Deferred.succeed(signal, void 0), settle)
}))

/** Starts the sequence in a fiber and lets it run up to its first wait. */
const start = (
  target: StopSequence.Target,
  steps: StopSequence.Steps = {},
  options: StopSequence.Options = {}
) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(StopSequence.run(target, steps, options))
    yield* settle
    return fiber
  })

/** Moves the TestClock by `ms`, letting the fibers run after each step. */
const adjust = (ms: number) => Effect.andThen(TestClock.adjust(Duration.millis(ms)), settle)

describe("StopSequence", () => {
  describe("bounds", () => {
    it("defaults: one table, each bound one option", () => {
      const bounds = StopSequence.bounds()
      assert.deepStrictEqual(
        {
          shutdownTimeout: Duration.toMillis(bounds.shutdownTimeout),
          closeTimeout: Duration.toMillis(bounds.closeTimeout),
          exitGrace: Duration.toMillis(bounds.exitGrace),
          killGrace: Duration.toMillis(bounds.killGrace),
          verifyTimeout: Duration.toMillis(bounds.verifyTimeout),
          killOnShutdownTimeout: bounds.killOnShutdownTimeout
        },
        {
          shutdownTimeout: 5000,
          closeTimeout: 2000, // fail-fast: no drain, 1 s flush, 1 s slack
          exitGrace: 1000,
          killGrace: 1000,
          verifyTimeout: 1000,
          killOnShutdownTimeout: true
        }
      )
    })

    it("the close step's bound derives from the policy: a 10 s drain gets 10 s + flush + 1 s, never 5 s", () => {
      const drain = ShutdownPolicy.drain("10 seconds")
      assert.strictEqual(Duration.toMillis(StopSequence.bounds({ policy: drain }).closeTimeout), 12_000)
      assert.strictEqual(
        Duration.toMillis(StopSequence.bounds({ policy: drain, flushTimeout: "3 seconds" }).closeTimeout),
        14_000
      )
      // A smaller closeTimeout is raised to drain + flush; a larger one is kept.
      assert.strictEqual(
        Duration.toMillis(StopSequence.bounds({ policy: drain, closeTimeout: "5 seconds" }).closeTimeout),
        11_000
      )
      assert.strictEqual(
        Duration.toMillis(StopSequence.bounds({ policy: drain, closeTimeout: "30 seconds" }).closeTimeout),
        30_000
      )
      // The shutdown request's own bound is not what a drain is measured against.
      assert.strictEqual(Duration.toMillis(StopSequence.bounds({ policy: drain }).shutdownTimeout), 5000)
    })

    it("a negative bound is a zero one", () => {
      const bounds = StopSequence.bounds({ exitGrace: Duration.millis(-5), killGrace: "-1 second" })
      assert.strictEqual(Duration.toMillis(bounds.exitGrace), 0)
      assert.strictEqual(Duration.toMillis(bounds.killGrace), 0)
    })
  })

  describe("transitions", () => {
    it.effect("exits at the end of its input: no signal", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const report = yield* StopSequence.run(fake.target, {})
        assert.deepStrictEqual(fake.events, ["end@0"])
        assert.deepStrictEqual(report, {
          endedBy: "EndOfInput",
          shutdown: "Skipped",
          close: "Skipped",
          descendants: "None",
          exit: { exitCode: 0, signal: null },
          signals: [],
          forced: false,
          elapsedMillis: 0
        })
      }))

    it.effect("ignores the end of its input: SIGTERM exactly exitGrace later", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore" })
        const stopping = yield* start(fake.target, {}, { exitGrace: "2 seconds" })
        yield* adjust(1999)
        assert.deepStrictEqual(fake.events, ["end@0"])
        yield* adjust(1)
        const report = yield* Fiber.join(stopping)
        assert.deepStrictEqual(fake.events, ["end@0", "SIGTERM@2000"])
        assert.strictEqual(report.endedBy, "Terminate")
        assert.deepStrictEqual(report.exit, { exitCode: null, signal: "SIGTERM" })
        assert.deepStrictEqual(report.signals, ["SIGTERM"])
        assert.strictEqual(report.elapsedMillis, 2000)
      }))

    it.effect("endOfInput false: SIGTERM at once, no exitGrace; SIGKILL exactly killGrace later", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: ["SIGKILL"] })
        const stopping = yield* start(fake.target, {}, {
          endOfInput: false,
          exitGrace: "5 seconds",
          killGrace: "300 millis"
        })
        yield* adjust(0)
        assert.deepStrictEqual(fake.events, ["SIGTERM@0"])
        yield* adjust(299)
        assert.deepStrictEqual(fake.events, ["SIGTERM@0"])
        yield* adjust(1)
        const report = yield* Fiber.join(stopping)
        assert.deepStrictEqual(fake.events.slice(0, 2), ["SIGTERM@0", "SIGKILL@300"])
        assert.strictEqual(report.endedBy, "Kill")
        assert.strictEqual(report.elapsedMillis, 300)
      }))

    it.effect("endOfInput false: a process that dies of SIGTERM ends the stop as Terminate", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore" })
        const report = yield* StopSequence.run(fake.target, {}, { endOfInput: false })
        assert.deepStrictEqual(fake.events, ["SIGTERM@0", "end@0"]) // the input ends only after the exit, with the conversation
        assert.strictEqual(report.endedBy, "Terminate")
        assert.deepStrictEqual(report.signals, ["SIGTERM"])
      }))

    it.effect("ignores SIGTERM: SIGKILL exactly killGrace after it", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: ["SIGKILL"] })
        const stopping = yield* start(fake.target, {}, { killGrace: "3 seconds" })
        yield* adjust(1000)
        yield* adjust(2999)
        assert.deepStrictEqual(fake.events, ["end@0", "SIGTERM@1000"])
        yield* adjust(1)
        const report = yield* Fiber.join(stopping)
        assert.deepStrictEqual(fake.events, ["end@0", "SIGTERM@1000", "SIGKILL@4000"])
        assert.strictEqual(report.endedBy, "Kill")
        assert.strictEqual(report.elapsedMillis, 4000)
      }))

    it.effect("survives SIGKILL: Unkillable verifyTimeout later, and the group Survived; the stop still ends", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: [] })
        const stopping = yield* start(fake.target, {}, { verifyTimeout: "500 millis" })
        yield* adjust(1000)
        yield* adjust(1000)
        yield* adjust(499)
        assert.isTrue(Option.isNone(yield* poll(stopping)))
        yield* adjust(1)
        const report = yield* Fiber.join(stopping)
        assert.strictEqual(report.endedBy, "Unkillable")
        assert.strictEqual(report.descendants, "Survived")
        assert.isUndefined(report.exit)
        assert.strictEqual(report.elapsedMillis, 2500)
      }))

    it.effect("the protocol shutdown request comes first, then the close step, then the end of input", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const stopping = yield* start(fake.target, {
          shutdown: step(fake.events, "shutdown", 300),
          close: step(fake.events, "close", 200)
        })
        yield* adjust(300)
        yield* adjust(200)
        const report = yield* Fiber.join(stopping)
        assert.deepStrictEqual(fake.events, [
          "shutdown@0",
          "shutdown done@300",
          "close@300",
          "close done@500",
          "end@500"
        ])
        assert.strictEqual(report.shutdown, "Completed")
        assert.strictEqual(report.close, "Completed")
        assert.strictEqual(report.endedBy, "EndOfInput")
        assert.strictEqual(report.elapsedMillis, 500)
      }))

    it.effect("no answer to the shutdown request within shutdownTimeout: SIGKILL at once, then a fail-fast close", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore" })
        const stopping = yield* start(fake.target, {
          shutdown: step(fake.events, "shutdown", undefined),
          close: step(fake.events, "close", 100),
          closeNow: step(fake.events, "closeNow", 0)
        })
        yield* adjust(4999)
        assert.deepStrictEqual(fake.events, ["shutdown@0"])
        yield* adjust(1)
        const report = yield* Fiber.join(stopping)
        assert.deepStrictEqual(fake.events, [
          "shutdown@0",
          "SIGKILL@5000",
          "closeNow@5000",
          "closeNow done@5000",
          "end@5000"
        ])
        assert.strictEqual(report.shutdown, "TimedOut")
        assert.strictEqual(report.endedBy, "Kill")
        assert.strictEqual(report.elapsedMillis, 5000)
      }))

    it.effect("with killOnShutdownTimeout false, a shutdown timeout goes on to the close, the end of input, SIGTERM", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore" })
        const stopping = yield* start(fake.target, { shutdown: Effect.never }, {
          shutdownTimeout: "2 seconds",
          killOnShutdownTimeout: false
        })
        yield* adjust(2000)
        assert.deepStrictEqual(fake.events, ["end@2000"])
        yield* adjust(1000)
        const report = yield* Fiber.join(stopping)
        assert.deepStrictEqual(fake.events, ["end@2000", "SIGTERM@3000"])
        assert.strictEqual(report.endedBy, "Terminate")
      }))

    it.effect("a failed shutdown request is not trusted: killGrace, not exitGrace, before SIGTERM (Hermes)", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore" })
        const stopping = yield* start(fake.target, { shutdown: failing(fake.events, "shutdown") }, {
          exitGrace: "5 seconds",
          killGrace: "1 second"
        })
        yield* adjust(1000)
        const report = yield* Fiber.join(stopping)
        assert.strictEqual(report.shutdown, "Failed")
        assert.deepStrictEqual(fake.events, ["shutdown@0", "shutdown done@0", "end@0", "SIGTERM@1000"])
        assert.strictEqual(report.endedBy, "Terminate")
      }))

    it.effect("exits during the shutdown request: ended there, and the conversation is still closed, fail-fast", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const stopping = yield* start(fake.target, {
          shutdown: Effect.andThen(
            Effect.sleep("100 millis"),
            Effect.sync(() => fake.exit({ exitCode: 0, signal: null }))
          )
            .pipe(Effect.andThen(Effect.never)),
          close: step(fake.events, "close", 5000),
          closeNow: step(fake.events, "closeNow", 0)
        })
        yield* adjust(100)
        const report = yield* Fiber.join(stopping)
        assert.strictEqual(report.endedBy, "Shutdown")
        assert.strictEqual(report.shutdown, "Failed")
        assert.deepStrictEqual(fake.events, ["closeNow@100", "closeNow done@100", "end@100"])
        assert.strictEqual(report.elapsedMillis, 100)
      }))

    it.effect("had exited before the stop: not signalled, no request; the conversation is closed", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        fake.exit({ exitCode: 3, signal: null })
        const report = yield* StopSequence.run(fake.target, {
          shutdown: step(fake.events, "shutdown", undefined),
          close: step(fake.events, "close", 0)
        })
        assert.strictEqual(report.endedBy, "Exited")
        assert.strictEqual(report.shutdown, "Skipped")
        assert.deepStrictEqual(report.signals, [])
        assert.deepStrictEqual(report.exit, { exitCode: 3, signal: null })
        assert.deepStrictEqual(fake.events, ["close@0", "close done@0", "end@0"])
      }))
  })

  describe("the close step under the policy", () => {
    it.effect("a 10 s drain drains 10 s: the input ends after it, not at 5 s", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const stopping = yield* start(fake.target, { close: step(fake.events, "close", 10_000) }, {
          policy: ShutdownPolicy.drain("10 seconds")
        })
        yield* adjust(5000)
        yield* adjust(4999)
        assert.isFalse(fake.inputEnded())
        yield* adjust(1)
        const report = yield* Fiber.join(stopping)
        assert.deepStrictEqual(fake.events, ["close@0", "close done@10000", "end@10000"])
        assert.strictEqual(report.close, "Completed")
        assert.strictEqual(report.endedBy, "EndOfInput")
        assert.deepStrictEqual(report.signals, [])
        assert.strictEqual(report.elapsedMillis, 10_000)
      }))

    it.effect("a close that outlives closeTimeout is left behind: the input ends at the bound", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const stopping = yield* start(fake.target, { close: step(fake.events, "close", undefined) }, {
          policy: ShutdownPolicy.drain("3 seconds")
        })
        yield* adjust(4999) // 3 s + 1 s flush + 1 s
        assert.isFalse(fake.inputEnded())
        yield* adjust(1)
        const report = yield* Fiber.join(stopping)
        assert.strictEqual(report.close, "TimedOut")
        assert.deepStrictEqual(fake.events, ["close@0", "end@5000"])
        assert.strictEqual(report.endedBy, "EndOfInput")
      }))

    it.effect("forced during the close: the fail-fast close runs, SIGKILL at once", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore" })
        const { force, forced } = yield* makeForce
        const stopping = yield* start(fake.target, {
          close: step(fake.events, "close", 10_000),
          closeNow: step(fake.events, "closeNow", 0),
          forced
        }, { policy: ShutdownPolicy.drain("10 seconds") })
        yield* adjust(2000)
        yield* force
        const report = yield* Fiber.join(stopping)
        assert.deepStrictEqual(fake.events, [
          "close@0",
          "closeNow@2000",
          "closeNow done@2000",
          "end@2000",
          "SIGKILL@2000"
        ])
        assert.strictEqual(report.close, "Forced")
        assert.isTrue(report.forced)
        assert.strictEqual(report.endedBy, "Kill")
        assert.strictEqual(report.elapsedMillis, 2000)
      }))

    it.effect("forced during the exit grace: SIGKILL at once, no SIGTERM", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore" })
        const { force, forced } = yield* makeForce
        const stopping = yield* start(fake.target, { forced })
        yield* adjust(300)
        yield* force
        const report = yield* Fiber.join(stopping)
        assert.deepStrictEqual(fake.events, ["end@0", "SIGKILL@300"])
        assert.deepStrictEqual(report.signals, ["SIGKILL"])
        assert.isTrue(report.forced)
      }))

    it.effect("forced before the stop began: no request, SIGKILL at once", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore" })
        const report = yield* StopSequence.run(fake.target, {
          shutdown: step(fake.events, "shutdown", undefined),
          forced: Effect.void
        })
        assert.strictEqual(report.endedBy, "Kill")
        assert.deepStrictEqual(report.signals, ["SIGKILL"])
        assert.strictEqual(report.elapsedMillis, 0)
      }))
  })

  describe("descendants", () => {
    it.effect("left in the group after the leader exited: SIGTERM, then SIGKILL killGrace later", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ descendantDiesOf: ["SIGKILL"] })
        const stopping = yield* start(fake.target)
        yield* adjust(999)
        assert.deepStrictEqual(fake.events, ["end@0", "SIGTERM@0"])
        yield* adjust(1)
        yield* adjust(20)
        const report = yield* Fiber.join(stopping)
        assert.deepStrictEqual(fake.events, ["end@0", "SIGTERM@0", "SIGKILL@1000"])
        assert.strictEqual(report.endedBy, "EndOfInput")
        assert.strictEqual(report.descendants, "Killed")
      }))

    it.effect("one that dies of SIGTERM is Terminated", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ descendantDiesOf: ["SIGTERM", "SIGKILL"] })
        const stopping = yield* start(fake.target)
        yield* adjust(20)
        const report = yield* Fiber.join(stopping)
        assert.strictEqual(report.descendants, "Terminated")
        assert.deepStrictEqual(report.signals, ["SIGTERM"])
      }))

    it.effect("a target without process groups: the process itself is the group", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ noGroups: true })
        const report = yield* StopSequence.run(fake.target, {})
        assert.strictEqual(report.descendants, "None")
        assert.strictEqual(report.endedBy, "EndOfInput")
      }))
  })

  it.effect("in a fiber whose interruption is pending (a finalizer at SIGTERM), every wait still waits its bound", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: ["SIGKILL"] })
      const started = yield* Deferred.make<void>()
      const main = yield* Effect.forkChild(
        Effect.gen(function*() {
          yield* Effect.addFinalizer(() =>
            Effect.asVoid(StopSequence.run(fake.target, { close: step(fake.events, "close", 3000) }, {
              policy: ShutdownPolicy.drain("3 seconds")
            }))
          )
          yield* Deferred.succeed(started, void 0)
          return yield* Effect.never
        }).pipe(Effect.scoped)
      )
      yield* Deferred.await(started)
      const interrupting = yield* Effect.forkChild(Fiber.interrupt(main))
      yield* settle
      yield* adjust(2999)
      assert.deepStrictEqual(fake.events, ["close@0"], "the drain waits its full time")
      yield* adjust(1)
      assert.deepStrictEqual(fake.events, ["close@0", "close done@3000", "end@3000"])
      yield* adjust(1000)
      yield* adjust(1000)
      yield* Fiber.join(interrupting)
      assert.deepStrictEqual(fake.events, ["close@0", "close done@3000", "end@3000", "SIGTERM@4000", "SIGKILL@5000"])
    }))

  describe("a target that bounds its own wait for the exit (exitWithin)", () => {
    const bounding = (target: StopSequence.Target, answer: boolean) => {
      const asked: Array<number> = []
      const bounded: StopSequence.Target = {
        ...target,
        exitWithin: (timeout) =>
          Effect.sync(() => {
            asked.push(Duration.toMillis(timeout))
            return answer
          })
      }
      return { asked, bounded }
    }

    it.effect("serves every wait on the exit, with the bound of each step, and the sequence follows its answers", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: [] })
        const { asked, bounded } = bounding(fake.target, false)
        const report = yield* StopSequence.run(bounded, {}, { exitGrace: "200 millis", verifyTimeout: "500 millis" })
        assert.deepStrictEqual(asked, [200, 1000, 500], "end of input, SIGTERM, SIGKILL")
        assert.deepStrictEqual(fake.events, ["end@0", "SIGTERM@0", "SIGKILL@0"])
        assert.strictEqual(report.endedBy, "Unkillable")
      }))

    it.effect("is not used while a forced stop can cut the wait short: a second signal still SIGKILLs at once", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: [] })
        const { asked, bounded } = bounding(fake.target, false)
        const { force, forced } = yield* makeForce
        const stopping = yield* start(bounded, { forced }, { endOfInput: false })
        yield* adjust(300)
        yield* force
        const report = yield* Fiber.join(stopping)
        assert.deepStrictEqual(fake.events, ["SIGTERM@0", "SIGKILL@300", "end@300"])
        assert.deepStrictEqual(asked, [1000], "only the wait after SIGKILL, which nothing cuts short")
        assert.strictEqual(report.endedBy, "Unkillable")
        assert.isTrue(report.forced)
      }))
  })

  it.effect("in a fiber whose interruption is pending, the waits that time out (after SIGKILL, for descendants) end at their bounds", () =>
    Effect.gen(function*() {
      const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: ["SIGKILL"], descendantDiesOf: [] })
      let report: StopSequence.StopReport | undefined
      const started = yield* Deferred.make<void>()
      const main = yield* Effect.forkChild(
        Effect.gen(function*() {
          yield* Effect.addFinalizer(() =>
            Effect.map(StopSequence.run(fake.target, {}, { verifyTimeout: "500 millis" }), (done) => {
              report = done
            })
          )
          yield* Deferred.succeed(started, void 0)
          return yield* Effect.never
        }).pipe(Effect.scoped)
      )
      yield* Deferred.await(started)
      const interrupting = yield* Effect.forkChild(Fiber.interrupt(main))
      yield* settle
      yield* adjust(1000)
      yield* adjust(1000)
      yield* adjust(499)
      const before = report
      yield* adjust(1)
      yield* Fiber.join(interrupting)
      assert.isUndefined(before, "the group is given its full verifyTimeout")
      assert.deepStrictEqual(fake.events, ["end@0", "SIGTERM@1000", "SIGKILL@2000", "SIGKILL@2000"])
      assert.strictEqual(report?.endedBy, "Kill")
      assert.strictEqual(report?.descendants, "Survived")
      assert.strictEqual(report?.elapsedMillis, 2500)
    }))

  describe("what the sequence logs, step by step (mutation testing)", () => {
    /** Runs `body` with every log line of the sequence collected as `LEVEL message`. */
    const logged = <A, E>(body: (lines: Array<string>) => Effect.Effect<A, E>) => {
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        lines.push(`${logLevel.toUpperCase()} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
      })
      return body(lines).pipe(
        Effect.provide(Logger.layer([logger])),
        Effect.provideService(References.MinimumLogLevel, "Debug")
      )
    }

    it.effect("exits at the end of its input: two Debug lines, nothing louder", () =>
      logged((lines) =>
        Effect.gen(function*() {
          const fake = yield* makeFake()
          yield* StopSequence.run(fake.target, {})
          assert.deepStrictEqual(lines, [
            "DEBUG stop: close under the policy, then end of input",
            "DEBUG stop: done (EndOfInput) in 0 ms"
          ])
        })
      ))

    it.effect("unkillable: each escalation says what it waited for, in its own bound", () =>
      logged((lines) =>
        Effect.gen(function*() {
          const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: [] })
          const stopping = yield* start(fake.target, {}, {
            exitGrace: "2 seconds",
            killGrace: "3 seconds",
            verifyTimeout: "500 millis"
          })
          yield* adjust(2000)
          yield* adjust(3000)
          yield* adjust(500)
          yield* Fiber.join(stopping)
          assert.deepStrictEqual(lines, [
            "DEBUG stop: close under the policy, then end of input",
            "WARN stop: still running 2000 ms after the end of its input: SIGTERM",
            "WARN stop: still running 3000 ms after SIGTERM: SIGKILL",
            "ERROR stop: still running 500 ms after SIGKILL",
            "DEBUG stop: done (Unkillable) in 5500 ms"
          ])
        })
      ))

    it.effect("no answer to the shutdown request: says so, with the bound, before SIGKILL", () =>
      logged((lines) =>
        Effect.gen(function*() {
          const fake = yield* makeFake({ onEndOfInput: "ignore" })
          const stopping = yield* start(fake.target, { shutdown: Effect.never }, { shutdownTimeout: "4 seconds" })
          yield* adjust(4000)
          yield* Fiber.join(stopping)
          assert.deepStrictEqual(lines, [
            "DEBUG stop: protocol shutdown",
            "WARN stop: no answer to shutdown within 4000 ms: SIGKILL",
            "DEBUG stop: done (Kill) in 4000 ms"
          ])
        })
      ))

    it.effect("a close that outlives its bound is named with the bound; a forced stop says it was forced", () =>
      logged((lines) =>
        Effect.gen(function*() {
          const slow = yield* makeFake({ onEndOfInput: "ignore" })
          const closing = yield* start(slow.target, { close: Effect.never }, { closeTimeout: "3 seconds" })
          yield* adjust(3000)
          yield* adjust(1000)
          const report = yield* Fiber.join(closing)
          assert.strictEqual(report.close, "TimedOut")
          assert.deepStrictEqual(lines.filter((line) => !line.startsWith("DEBUG")), [
            "WARN stop: the connection did not close within 3000 ms",
            "WARN stop: still running 1000 ms after the end of its input: SIGTERM"
          ])

          lines.length = 0
          const { force, forced } = yield* makeForce
          const stubborn = yield* makeFake({ onEndOfInput: "ignore" })
          const stopping = yield* start(stubborn.target, { forced })
          yield* force
          assert.isTrue((yield* Fiber.join(stopping)).forced)
          assert.deepStrictEqual(lines.filter((line) => !line.startsWith("DEBUG")), ["WARN stop: forced: SIGKILL"])
        })
      ))

    it.effect("descendants left in the group: SIGTERM at Debug, SIGKILL at Warn", () =>
      logged((lines) =>
        Effect.gen(function*() {
          const fake = yield* makeFake({ descendantDiesOf: ["SIGKILL"] })
          const stopping = yield* start(fake.target, {})
          yield* adjust(1000)
          const report = yield* Fiber.join(stopping)
          assert.strictEqual(report.descendants, "Killed")
          assert.deepStrictEqual(lines, [
            "DEBUG stop: close under the policy, then end of input",
            "DEBUG stop: processes left in the process group: SIGTERM",
            "WARN stop: processes left in the process group: SIGKILL",
            "DEBUG stop: done (EndOfInput) in 1000 ms"
          ])
        })
      ))
  })

  describe("guards (mutation testing)", () => {
    it.effect("a process that exits during the grace after its end of input ended there: no signal", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore" })
        const stopping = yield* start(fake.target)
        yield* adjust(500)
        fake.exit({ exitCode: 0, signal: null })
        yield* settle
        const report = yield* Fiber.join(stopping)
        assert.strictEqual(report.endedBy, "EndOfInput")
        assert.deepStrictEqual(report.signals, [])
        assert.strictEqual(report.elapsedMillis, 500)
      }))

    it.effect("a close that completes is not followed by the fail-fast close", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const stopping = yield* start(fake.target, {
          close: step(fake.events, "close", 100),
          closeNow: step(fake.events, "closeNow", 0)
        })
        yield* adjust(100)
        const report = yield* Fiber.join(stopping)
        assert.strictEqual(report.close, "Completed")
        assert.deepStrictEqual(fake.events, ["close@0", "close done@100", "end@100"])
      }))

    it.effect("a close that outlives its bound is interrupted in the background, not left running", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake()
        const interrupted = yield* Deferred.make<void>()
        const stopping = yield* start(fake.target, {
          close: Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, void 0)))
        }, { closeTimeout: "2 seconds" })
        yield* adjust(2000)
        const report = yield* Fiber.join(stopping)
        assert.strictEqual(report.close, "TimedOut")
        yield* Deferred.await(interrupted)
      }))

    it.effect("elapsedMillis is measured from the start of the stop, not from the epoch", () =>
      Effect.gen(function*() {
        yield* TestClock.adjust("1 hour")
        const fake = yield* makeFake({ onEndOfInput: "ignore" })
        const stopping = yield* start(fake.target)
        yield* adjust(1000)
        assert.strictEqual((yield* Fiber.join(stopping)).elapsedMillis, 1000)
      }))

    it.effect("once SIGKILL was sent, what is left in the group gets SIGKILL again, never a SIGTERM", () =>
      Effect.gen(function*() {
        // No answer to the shutdown request: SIGKILL at once. The descendant would die of a SIGTERM, and only of that.
        const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: ["SIGKILL"], descendantDiesOf: ["SIGTERM"] })
        const stopping = yield* start(fake.target, { shutdown: Effect.never }, { shutdownTimeout: "1 second" })
        yield* adjust(1000)
        yield* adjust(1000)
        const report = yield* Fiber.join(stopping)
        assert.strictEqual(report.endedBy, "Kill")
        assert.deepStrictEqual(report.signals, ["SIGKILL", "SIGKILL"])
        assert.strictEqual(report.descendants, "Survived")
      }))

    it.effect("a forced stop does not SIGTERM what is left in the group either, even when the leader had exited", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ descendantDiesOf: ["SIGKILL"] })
        const { force, forced } = yield* makeForce
        const stopping = yield* start(fake.target, {
          close: Effect.never,
          closeNow: step(fake.events, "closeNow", 0),
          forced
        })
        yield* force
        yield* adjust(20)
        const report = yield* Fiber.join(stopping)
        assert.strictEqual(report.endedBy, "EndOfInput")
        assert.isTrue(report.forced)
        assert.deepStrictEqual(report.signals, ["SIGKILL"])
        assert.strictEqual(report.descendants, "Killed")
      }))

    it.effect("forced during a close that has no fail-fast variant: the input ends at once, SIGKILL", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore" })
        const { force, forced } = yield* makeForce
        const stopping = yield* start(fake.target, {
          close: step(fake.events, "close", 10_000),
          forced
        }, { policy: ShutdownPolicy.drain("10 seconds") })
        yield* adjust(2000)
        yield* force
        const report = yield* Fiber.join(stopping)
        assert.deepStrictEqual(fake.events, ["close@0", "end@2000", "SIGKILL@2000"])
        assert.strictEqual(report.close, "Forced")
        assert.strictEqual(report.endedBy, "Kill")
      }))

    it.effect("descendants that survive SIGKILL too: Survived, verifyTimeout after it", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ descendantDiesOf: [] })
        const stopping = yield* start(fake.target, {}, { killGrace: "1 second", verifyTimeout: "2 seconds" })
        yield* adjust(1000)
        yield* adjust(1999)
        assert.isTrue(Option.isNone(yield* poll(stopping)))
        yield* adjust(1)
        const report = yield* Fiber.join(stopping)
        assert.strictEqual(report.descendants, "Survived")
        assert.deepStrictEqual(report.signals, ["SIGTERM", "SIGKILL"])
        assert.strictEqual(report.elapsedMillis, 3000)
      }))

    it.effect("an unkillable leader whose group is already empty: no descendant is said to have survived", () =>
      Effect.gen(function*() {
        const fake = yield* makeFake({ onEndOfInput: "ignore", diesOf: [] })
        const stopping = yield* start({ ...fake.target, groupAlive: Effect.succeed(false) }, {}, {
          verifyTimeout: "500 millis"
        })
        yield* adjust(1000)
        yield* adjust(1000)
        yield* adjust(500)
        const report = yield* Fiber.join(stopping)
        assert.strictEqual(report.endedBy, "Unkillable")
        assert.strictEqual(report.descendants, "None")
      }))
  })
})
