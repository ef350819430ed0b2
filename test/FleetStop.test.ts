/**
 * A graceful stop (SIGTERM) of a fleet runner (`examples/fleet/runner.ts`, three runners on loopback and Postgres)
 * while its sessions have operations in flight and queued (each session runs one operation at a time): the stopping
 * runner starts nothing new, lets what is in flight finish within its drain (`drainTimeout`), leaves what is still
 * running after it unfinished in the journal, and leaves the rest to the survivors. A rolling restart loses nothing:
 * every operation (a `Resume` kind) is answered once, `Completed` once, and finished by an extension exactly once.
 */
import { assert, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Harness from "../examples/fleet/harness.js"
import { describePostgres, usePostgres } from "./support/postgres.js"

const pg = usePostgres()

const sharding = Harness.quickSharding

const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-fleet-stop-"))

/** Sets environment variables the fixture processes inherit, for the test's Scope. */
const withEnv = (vars: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const previous = Object.fromEntries(Object.keys(vars).map((name) => [name, process.env[name]]))
      Object.assign(process.env, vars)
      return previous
    }),
    (previous) =>
      Effect.sync(() => {
        for (const [name, value] of Object.entries(previous)) {
          if (value === undefined) delete process.env[name]
          else process.env[name] = value
        }
      })
  )

/**
 * Three runners, 24 operations over 6 sessions (one at a time per session: 3 queued behind each session's first),
 * SIGTERM of the runner with the most in flight once it has two. Checks that nothing is lost or finished twice.
 */
const stopOneRunner = (name: string, workMs: number) =>
  Effect.gen(function*() {
    const env: Harness.FleetEnv = { sharding, workMs }
    const url = pg.url()
    const effectsFile = Path.join(directory, `${name}.effects`)
    const ports = [yield* Harness.freePort, yield* Harness.freePort, yield* Harness.freePort]
    const runners = yield* Effect.forEach(ports, (port) => Harness.startRunner(url, port, effectsFile, env))
    const pids = yield* Effect.forEach(runners, (runner) => runner.ready(30_000), { concurrency: "unbounded" })
    yield* Harness.eventually(
      () => runners.reduce((n, r) => n + r.shards(), 0) === 30 && runners.every((r) => r.shards() > 0),
      "the shards are assigned",
      15_000
    )
    const operations = 24
    const client = yield* Harness.startClient(url, name, operations, 6, env)
    yield* Harness.eventually(
      () => [...Harness.inFlight(Harness.readEffects(effectsFile)).values()].some((s) => s.size >= 2),
      "two operations in flight on one runner",
      30_000
    ).pipe(Effect.mapError((error) => new Error(`${error.message}; client: ${client.stderr().slice(-2000)}`)))
    const before = Harness.inFlight(Harness.readEffects(effectsFile))
    const victimPid = [...before.entries()].filter(([pid]) => pids.includes(pid))
      .sort((a, b) => b[1].size - a[1].size)[0]![0]
    const victim = runners[pids.indexOf(victimPid)]!
    const inFlightAtStop = new Set(before.get(victimPid))
    victim.child.kill("SIGTERM")
    const stoppedAt = Date.now()
    yield* Effect.promise(() => victim.exited)
    const stopMs = Date.now() - stoppedAt

    yield* client.line("finished", 120_000)
    const output = Harness.parseClient(client.lines)
    const effects = Harness.readEffects(effectsFile)
    assert.deepStrictEqual(output.errors, [], victim.stderr().slice(-3000))
    for (let i = 0; i < operations; i++) {
      const key = `${name}/op-${i}`
      assert.strictEqual(output.replies.get(key)?.length, 1, `one reply for ${key}`)
      assert.strictEqual(output.journal.get(key)?.status, "Completed", `${key} completed in the journal`)
      const done = effects.filter((e) => e.key === key && e.event === "done")
      assert.strictEqual(done.length, 1, `${key} finished once in an extension`)
    }
    // The stopping runner started nothing after the signal (what its extensions started just then had been sent
    // before it: 200 ms of slack).
    const startedAfter = effects.filter((e) =>
      e.event === "start" && e.runner === victimPid && e.at > stoppedAt + 200 && !inFlightAtStop.has(e.key)
    )
    assert.deepStrictEqual(startedAfter.map((e) => e.key), [], "the stopping runner started new operations")
    assert.isTrue(
      [...output.replies.values()].some((r) => r[0]!.runner !== victimPid && r[0]!.at > stoppedAt),
      "the survivors ran what was left"
    )
    return { victimPid, inFlightAtStop, effects, output, stopMs }
  }).pipe(Effect.scoped)

describePostgres(pg, "Fleet graceful stop", () => {
  it.live(
    "SIGTERM with work in flight and queued: what is in flight finishes within the drain, the survivors run the rest",
    () =>
      Effect.gen(function*() {
        yield* withEnv({ FLEET_SESSION_CONCURRENCY: "1" })
        const { effects, inFlightAtStop, stopMs, victimPid } = yield* stopOneRunner("g", 1_500)
        for (const key of inFlightAtStop) {
          const done = effects.find((e) => e.key === key && e.event === "done")
          assert.strictEqual(done?.runner, victimPid, `${key} finished on the stopping runner, within its drain`)
        }
        assert.isAtMost(stopMs, 15_000, `the runner took ${stopMs} ms to stop`)
        yield* Effect.logInfo(`fleet stop: ${inFlightAtStop.size} in flight at SIGTERM; stopped in ${stopMs} ms`)
      }).pipe(Effect.scoped),
    180_000
  )

  it.live(
    "SIGTERM with operations longer than the drain: they are left unfinished, resumed once by the survivors",
    () =>
      Effect.gen(function*() {
        yield* withEnv({ FLEET_SESSION_CONCURRENCY: "1", FLEET_DRAIN_TIMEOUT: "500 millis" })
        const { effects, inFlightAtStop, output, stopMs, victimPid } = yield* stopOneRunner("h", 4_000)
        for (const key of inFlightAtStop) {
          const done = effects.find((e) => e.key === key && e.event === "done")
          assert.notStrictEqual(done?.runner, victimPid, `${key} was cut by the drain and finished elsewhere`)
          assert.strictEqual(output.journal.get(key)?.attempts, 2, `${key} resumed once`)
        }
        assert.isAtMost(stopMs, 8_000, `the runner took ${stopMs} ms to stop`)
        yield* Effect.logInfo(`fleet stop (cut drain): ${inFlightAtStop.size} resumed; stopped in ${stopMs} ms`)
      }).pipe(Effect.scoped),
    180_000
  )
})
