import { assert, describe, it } from "@effect/vitest"
import { Journal, ProcessRecord } from "@lifeline/journal"
import { Clock, Effect, Fiber, Option } from "effect"
import type { Duration } from "effect"
import { TestClock } from "effect/testing"
import * as orphans from "../src/internal/reaper.js"

const pid = 4242
const startedAt = 1_700_000_000_000
const info: ProcessRecord.ProcessInfo = { pid, startedAt, command: ["node", "extension.js"] }

interface Spec {
  readonly pid: number
  /** Default: `pid`, the recorded leader's group, and its session. */
  readonly pgid?: number
  readonly session?: number
  /** Default: the recorded start time plus `pid - 4242` seconds (a member starts after its leader). */
  readonly startedAt?: number
  /** The signals it dies of; it ignores the others. Default: SIGTERM and SIGKILL. */
  readonly diesOf?: ReadonlyArray<NodeJS.Signals>
  /** At the start: running, a zombie (exited, not reaped: its pid is still taken), or reaped (its pid is free). */
  readonly state?: "Running" | "Zombie" | "Reaped"
}

interface Sent {
  /** A negative number is a process group, as for kill(2). */
  readonly target: number
  readonly signal: NodeJS.Signals
  readonly at: number
}

/**
 * An operating system that exists only in memory: processes with a group, a session and a start time, which die of
 * the signals they are told to, and stay zombies (their parent, the crashed host, reaps nothing). With `proc: false`
 * it lists no group members and reads no /proc, as on macOS, where launchd reaps the dead at once.
 */
const makeOs = (specs: ReadonlyArray<Spec>, options?: { readonly proc?: boolean }) => {
  const proc = options?.proc ?? true
  const table = new Map(specs.map((spec) => [spec.pid, { spec, state: spec.state ?? "Running" }]))
  const sent: Array<Sent> = []
  const present = (p: number) => {
    const entry = table.get(p)
    return entry !== undefined && entry.state !== "Reaped" ? entry : undefined
  }
  const pgidOf = (spec: Spec) => spec.pgid ?? pid
  const startOf = (spec: Spec) => spec.startedAt ?? startedAt + (spec.pid - pid) * 1000
  const deliver = (target: number, name: NodeJS.Signals) =>
    Effect.map(Clock.currentTimeMillis, (at) => {
      sent.push({ target, signal: name, at })
      for (const entry of table.values()) {
        const hit = target < 0 ? pgidOf(entry.spec) === -target : entry.spec.pid === target
        if (hit && entry.state === "Running" && (entry.spec.diesOf ?? ["SIGTERM", "SIGKILL"]).includes(name)) {
          entry.state = proc ? "Zombie" : "Reaped"
        }
      }
    })
  const system: orphans.System = {
    probe: (p) => present(p) !== undefined ? "Alive" : "Gone",
    readProcStat: (p) => {
      const entry = present(p)
      return Effect.succeed(
        proc && entry !== undefined
          ? Option.some({
            state: entry.state === "Zombie" ? "Z" : "S",
            processGroup: pgidOf(entry.spec),
            session: entry.spec.session ?? pid,
            startedAt: startOf(entry.spec)
          })
          : Option.none()
      )
    },
    psStart: (p) => {
      const entry = present(p)
      return Effect.succeed(!proc && entry !== undefined ? Option.some(startOf(entry.spec)) : Option.none())
    },
    groupMembers: (pgid) =>
      Effect.succeed(
        proc
          ? Option.some(
            [...table.values()].filter((entry) => entry.state === "Running" && pgidOf(entry.spec) === pgid).map((
              { spec }
            ) => ({
              pid: spec.pid,
              state: "S",
              processGroup: pgidOf(spec),
              session: spec.session ?? pid,
              startedAt: startOf(spec)
            }))
          )
          : Option.none()
      ),
    probeGroup: (pgid) =>
      [...table.values()].some((entry) => entry.state !== "Reaped" && pgidOf(entry.spec) === pgid) ? "Alive" : "Gone",
    signalGroup: (pgid, name) => deliver(-pgid, name),
    signalProcess: (p, name) => deliver(p, name)
  }
  const running = () => [...table.values()].filter((entry) => entry.state === "Running").map(({ spec }) => spec.pid)
  return { system, sent, running }
}

const five = [4243, 4244, 4245, 4246, 4247]

const reap = (system: orphans.System, grace: Duration.Input = "1 second") =>
  Effect.forkChild(orphans.makeReaper(system, { grace })(info))

describe("NodeReaper.reapProcess", () => {
  it.effect("an orphan that ignores SIGTERM is SIGKILLed after grace, and Killed once it is gone", () =>
    Effect.gen(function*() {
      const { sent, system } = makeOs([{ pid, diesOf: ["SIGKILL"] }])
      const fiber = yield* reap(system)
      yield* TestClock.adjust("1 second")
      yield* TestClock.adjust("100 millis")
      assert.strictEqual(yield* Fiber.join(fiber), "Killed")
      assert.deepStrictEqual(sent, [
        { target: -pid, signal: "SIGTERM", at: 0 },
        { target: -pid, signal: "SIGKILL", at: 1000 }
      ])
    }))

  it.effect("an orphan still there after SIGKILL and grace is not reported Killed: the reap fails with Survived", () =>
    Effect.gen(function*() {
      const { sent, system } = makeOs([{ pid, diesOf: [] }])
      const fiber = yield* Effect.forkChild(Effect.flip(orphans.makeReaper(system, { grace: "1 second" })(info)))
      yield* TestClock.adjust("1 second")
      assert.isTrue(fiber.pollUnsafe() === undefined, "waits for the exit after SIGKILL")
      yield* TestClock.adjust("1 second")
      const error = yield* Fiber.join(fiber)
      assert.instanceOf(error, orphans.ReapError)
      assert.strictEqual(error._tag, "ReapError")
      assert.strictEqual(error.reason, "Survived")
      assert.strictEqual(error.pid, pid)
      assert.deepStrictEqual(sent.map(({ signal }) => signal), ["SIGTERM", "SIGKILL"])
    }))

  it.effect("recovery records a survivor as Failed with the ReapError and lists it in errors, not in reaped", () =>
    Effect.gen(function*() {
      // recordProcess stamps the entry with the TestClock's time, 0
      const { system } = makeOs([{ pid, diesOf: [], startedAt: 0 }])
      const key = yield* ProcessRecord.record({ pid, command: info.command })
      const journal = yield* Journal.Journal
      yield* journal.release(key) // as if a crashed run had recorded it
      const fiber = yield* Effect.forkChild(
        Effect.scoped(ProcessRecord.reapOrphans(orphans.makeReaper(system, { grace: "1 second" })))
      )
      // SIGTERM, 1 s, SIGKILL, 1 s: moved on in steps, since recovery takes a few steps before it reaps
      for (let step = 0; step < 8 && fiber.pollUnsafe() === undefined; step++) {
        yield* TestClock.adjust("500 millis")
      }
      const report = yield* Fiber.join(fiber)
      assert.deepStrictEqual(report.reaped, [])
      assert.deepStrictEqual(report.errors.map((e) => [e.key, (e.error as orphans.ReapError).reason]), [[
        key,
        "Survived"
      ]])
      const entry = Option.getOrThrow(yield* journal.get(key))
      assert.strictEqual(entry.status, "Failed")
      assert.deepInclude(entry.error, { _tag: "ReapError", reason: "Survived", pid })
    }).pipe(Effect.provide(Journal.layerMemory)))

  describe("the process group", () => {
    it.effect("leader reaped, five members running: SIGTERM to the group, Killed at once, no SIGKILL", () =>
      Effect.gen(function*() {
        const { running, sent, system } = makeOs([
          { pid, state: "Reaped" },
          ...five.map((p) => ({ pid: p }))
        ])
        const outcome = yield* Fiber.join(yield* reap(system))
        assert.strictEqual(outcome, "Killed")
        assert.deepStrictEqual(sent, [{ target: -pid, signal: "SIGTERM", at: 0 }])
        assert.deepStrictEqual(running(), [])
      }))

    it.effect("leader a zombie that started when recorded (it holds the group's id), members running: Killed", () =>
      Effect.gen(function*() {
        const { running, sent, system } = makeOs([{ pid, state: "Zombie" }, ...five.map((p) => ({ pid: p }))])
        assert.strictEqual(yield* Fiber.join(yield* reap(system)), "Killed")
        assert.deepStrictEqual(sent, [{ target: -pid, signal: "SIGTERM", at: 0 }])
        assert.deepStrictEqual(running(), [])
      }))

    it.effect("leader lingers and dies of SIGTERM, a grandchild ignores it: SIGKILL to the group exactly at grace", () =>
      Effect.gen(function*() {
        const { running, sent, system } = makeOs([{ pid }, { pid: 4250, diesOf: ["SIGKILL"] }])
        const fiber = yield* reap(system)
        yield* TestClock.adjust("999 millis")
        assert.deepStrictEqual(sent, [{ target: -pid, signal: "SIGTERM", at: 0 }])
        assert.deepStrictEqual(running(), [4250], "the leader is gone, the grandchild is not")
        assert.isTrue(fiber.pollUnsafe() === undefined, "a leader gone within grace does not end the reap")
        yield* TestClock.adjust("1 millis")
        assert.strictEqual(yield* Fiber.join(fiber), "Killed")
        assert.deepStrictEqual(sent, [
          { target: -pid, signal: "SIGTERM", at: 0 },
          { target: -pid, signal: "SIGKILL", at: 1000 }
        ])
        assert.deepStrictEqual(running(), [])
      }))

    it.effect("leader gone, a member survives SIGKILL: Survived after grace twice, naming the member", () =>
      Effect.gen(function*() {
        const { sent, system } = makeOs([{ pid, state: "Reaped" }, { pid: 4243 }, { pid: 4244, diesOf: [] }])
        const fiber = yield* Effect.forkChild(Effect.flip(orphans.makeReaper(system, { grace: "1 second" })(info)))
        yield* TestClock.adjust("1 second")
        assert.isTrue(fiber.pollUnsafe() === undefined)
        yield* TestClock.adjust("1 second")
        const error = yield* Fiber.join(fiber)
        assert.instanceOf(error, orphans.ReapError)
        assert.strictEqual(error.reason, "Survived")
        assert.strictEqual(error.pid, pid)
        assert.strictEqual(error.detail, "4244 still running 1s after SIGKILL")
        assert.deepStrictEqual(sent, [
          { target: -pid, signal: "SIGTERM", at: 0 },
          { target: -pid, signal: "SIGKILL", at: 1000 }
        ])
      }))

    it.effect("leader gone, a member that started before the recorded spawn: the group is Reused, not signalled", () =>
      Effect.gen(function*() {
        const { running, sent, system } = makeOs([
          { pid, state: "Reaped" },
          { pid: 4243 },
          { pid: 4244, startedAt: startedAt - 60_000 }
        ])
        assert.strictEqual(yield* Fiber.join(yield* reap(system)), "Reused")
        assert.deepStrictEqual(sent, [])
        assert.deepStrictEqual(running(), [4243, 4244])
      }))

    it.effect("leader gone, members in another session (a group made with setpgid by a later owner of the pid): Reused", () =>
      Effect.gen(function*() {
        const { sent, system } = makeOs([{ pid, state: "Reaped" }, ...five.map((p) => ({ pid: p, session: 100 }))])
        assert.strictEqual(yield* Fiber.join(yield* reap(system)), "Reused")
        assert.deepStrictEqual(sent, [])
      }))

    it.effect("leader a zombie of ours (its pid was never freed): its group is ours whatever the members' session", () =>
      Effect.gen(function*() {
        const { running, sent, system } = makeOs([{ pid, state: "Zombie" }, { pid: 4243, session: 100 }])
        assert.strictEqual(yield* Fiber.join(yield* reap(system)), "Killed")
        assert.deepStrictEqual(sent, [{ target: -pid, signal: "SIGTERM", at: 0 }])
        assert.deepStrictEqual(running(), [])
      }))

    it.effect("leader gone and the group has only zombies: Gone, nothing signalled", () =>
      Effect.gen(function*() {
        const { sent, system } = makeOs([{ pid, state: "Reaped" }, { pid: 4243, state: "Zombie" }])
        assert.strictEqual(yield* Fiber.join(yield* reap(system)), "Gone")
        assert.deepStrictEqual(sent, [])
      }))

    it.effect("the pid names a later process: Reused, and neither it nor its group is signalled", () =>
      Effect.gen(function*() {
        const { sent, system } = makeOs([{ pid, startedAt: startedAt + 3_600_000 }, ...five.map((p) => ({ pid: p }))])
        assert.strictEqual(yield* Fiber.join(yield* reap(system)), "Reused")
        assert.deepStrictEqual(sent, [])
      }))

    it.effect("a leader running in the host's group (spawned without detached): only the process is signalled", () =>
      Effect.gen(function*() {
        const host = 100
        const { sent, system } = makeOs([
          { pid, pgid: host, session: host, diesOf: ["SIGKILL"] },
          { pid: 4243, pgid: host, session: host, startedAt: startedAt - 60_000 }
        ])
        const fiber = yield* reap(system)
        yield* TestClock.adjust("1 second")
        assert.strictEqual(yield* Fiber.join(fiber), "Killed")
        assert.deepStrictEqual(sent, [
          { target: pid, signal: "SIGTERM", at: 0 },
          { target: pid, signal: "SIGKILL", at: 1000 }
        ])
      }))

    it.effect("a running leader whose group has a member older than the record: the leader alone is signalled", () =>
      Effect.gen(function*() {
        const { running, sent, system } = makeOs([{ pid }, { pid: 4243, startedAt: startedAt - 60_000 }])
        assert.strictEqual(yield* Fiber.join(yield* reap(system)), "Killed")
        assert.deepStrictEqual(sent, [{ target: pid, signal: "SIGTERM", at: 0 }])
        assert.deepStrictEqual(running(), [4243])
      }))
  })

  describe("without /proc (members cannot be listed)", () => {
    it.effect("leader gone while its group still answers: Unverified, nothing signalled", () =>
      Effect.gen(function*() {
        const { sent, system } = makeOs([{ pid, state: "Reaped" }, ...five.map((p) => ({ pid: p }))], { proc: false })
        assert.strictEqual(yield* Fiber.join(yield* reap(system)), "Unverified")
        assert.deepStrictEqual(sent, [])
      }))

    it.effect("leader gone and no group: Gone", () =>
      Effect.gen(function*() {
        const { sent, system } = makeOs([{ pid, state: "Reaped" }], { proc: false })
        assert.strictEqual(yield* Fiber.join(yield* reap(system)), "Gone")
        assert.deepStrictEqual(sent, [])
      }))

    it.effect("leader running (start time from ps): the group and the leader get SIGTERM, then SIGKILL at grace", () =>
      Effect.gen(function*() {
        const { running, sent, system } = makeOs([{ pid }, { pid: 4243, diesOf: ["SIGKILL"] }], { proc: false })
        const fiber = yield* reap(system)
        yield* TestClock.adjust("1 second")
        assert.strictEqual(yield* Fiber.join(fiber), "Killed")
        assert.deepStrictEqual(sent, [
          { target: -pid, signal: "SIGTERM", at: 0 },
          { target: pid, signal: "SIGTERM", at: 0 },
          { target: -pid, signal: "SIGKILL", at: 1000 },
          { target: pid, signal: "SIGKILL", at: 1000 }
        ])
        assert.deepStrictEqual(running(), [])
      }))
  })
})
