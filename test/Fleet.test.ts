/**
 * A fleet of three real runners (`examples/fleet/runner.ts`) on loopback and Postgres, each session's extension a
 * real child process: a runner with operations in flight is killed with SIGKILL and its sessions, and their
 * operations, are taken over by the others; it comes back and gets its share of the shards again. Also: three
 * runners started at once on an empty database (the cluster's migrations are serialized).
 *
 * Settings (also what the bounds below rest on): 30 shards, shard-lock expiry 4 s refreshed every 1 s, assignments
 * refreshed every 1 s, runner health checked every 1 s, unprocessed messages polled every 500 ms; the journal claim
 * of a session lasts 4 s too (renewed every 1.33 s); each operation works 1.5 s in the extension.
 */
import { assert, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Harness from "../examples/fleet/harness.js"
import { describePostgres, usePostgres } from "./support/postgres.js"

const pg = usePostgres()

const lockExpiryMs = 4_000
const workMs = 1_500
/**
 * Beyond expiry + one operation: the health check (1 s, then up to five pings 500 ms apart), the assignment refresh
 * (1 s), the claim poll, starting a new extension; on a loaded 2-core machine these took up to 9 s together in the soak.
 */
const marginMs = 10_000
const env: Harness.FleetEnv = {
  sharding: { ...Harness.quickSharding, shardLockExpiration: `${lockExpiryMs} millis` },
  workMs
}
const startupMs = 30_000

const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-fleet-"))
let cases = 0
const freshEffectsFile = () => Path.join(directory, `case-${++cases}.effects`)

const startFleet = (url: string, effectsFile: string) =>
  Effect.gen(function*() {
    const ports = [yield* Harness.freePort, yield* Harness.freePort, yield* Harness.freePort]
    const runners = yield* Effect.forEach(ports, (port) => Harness.startRunner(url, port, effectsFile, env))
    const pids = yield* Effect.forEach(runners, (runner) => runner.ready(startupMs), { concurrency: "unbounded" })
    return { runners, pids }
  })

describePostgres(pg, "Fleet", () => {
  it.live(
    "three runners started at once on an empty database all come up and share the shards",
    () =>
      Effect.gen(function*() {
        const url = yield* Effect.promise(() => pg.freshDatabase())
        const { runners } = yield* startFleet(url, freshEffectsFile())
        yield* Harness.eventually(
          () => runners.every((runner) => runner.shards() > 0) && runners.reduce((n, r) => n + r.shards(), 0) === 30,
          "every runner holds shards, 30 in all",
          15_000
        )
        for (const runner of runners) {
          assert.strictEqual(runner.child.exitCode, null, runner.stderr())
          assert.notInclude(runner.stderr(), "already exists")
        }
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "SIGKILL of the runner with the most in flight: one completion each, restarts bounded, replies within the lock expiry",
    () =>
      Effect.gen(function*() {
        const url = pg.url()
        const effectsFile = freshEffectsFile()
        const { pids, runners } = yield* startFleet(url, effectsFile)
        yield* Harness.eventually(
          () => runners.reduce((n, r) => n + r.shards(), 0) === 30 && runners.every((r) => r.shards() > 0),
          "the shards are assigned",
          15_000
        )
        const operations = 30
        const client = yield* Harness.startClient(url, "t", operations, 6, env)
        // Kill once a runner has several operations in flight.
        yield* Harness.eventually(
          () => [...Harness.inFlight(Harness.readEffects(effectsFile)).values()].some((s) => s.size >= 3),
          "three operations in flight on one runner",
          startupMs
        ).pipe(Effect.mapError((error) => new Error(`${error.message}; client: ${client.stderr().slice(-2000)}`)))
        const before = Harness.inFlight(Harness.readEffects(effectsFile))
        const victimPid = [...before.entries()].filter(([pid]) => pids.includes(pid))
          .sort((a, b) => b[1].size - a[1].size)[0]![0]
        const victim = runners[pids.indexOf(victimPid)]!
        victim.child.kill("SIGKILL")
        const killedAt = Date.now()
        yield* Effect.promise(() => victim.exited)

        yield* client.line("finished", 120_000)
        const output = Harness.parseClient(client.lines)
        const effects = Harness.readEffects(effectsFile)
        // What the dead runner had started and not answered: the only operations that may run twice.
        const deadInFlight = Harness.unanswered(effects, output, victimPid, killedAt)
        const twice = [...Harness.starts(effects).entries()].filter(([, n]) => n > 1).map(([key]) => key)

        assert.deepStrictEqual(output.errors, [])
        for (let i = 0; i < operations; i++) {
          const key = `t/op-${i}`
          assert.strictEqual(output.replies.get(key)?.length, 1, `one reply for ${key}`)
          assert.strictEqual(output.journal.get(key)?.status, "Completed", `${key} completed once in the journal`)
        }
        assert.isAbove(deadInFlight.size, 0)
        assert.isAtMost(twice.length, deadInFlight.size)
        for (const key of twice) {
          assert.isTrue(deadInFlight.has(key), `${key} ran twice but was not in flight on the dead runner`)
          assert.strictEqual(output.journal.get(key)?.attempts, 2)
        }
        // What the dead runner's extensions had not finished cannot have completed: a survivor ran each one again.
        for (const key of Harness.inFlight(effects).get(victimPid) ?? []) {
          assert.isTrue(effects.some((e) => e.key === key && e.event === "done" && e.runner !== victimPid), key)
        }
        const lastReply = Math.max(...[...output.replies.values()].map((r) => r[0]!.at))
        const takeoverMs = lastReply - killedAt
        assert.isAtMost(takeoverMs, lockExpiryMs + workMs + marginMs, `last reply ${takeoverMs} ms after the kill`)
        yield* Effect.logInfo(
          `fleet: killed ${victimPid} with ${deadInFlight.size} in flight; ${twice.length} started twice; last reply ${takeoverMs} ms after the kill`
        )

        // The dead runner comes back on its address and gets a share of the shards again.
        const back = yield* Harness.startRunner(url, victim.port, effectsFile, env)
        yield* back.ready(startupMs)
        const survivors = runners.filter((r) => r !== victim)
        yield* Harness.eventually(
          () => back.shards() >= 5 && survivors.every((r) => r.shards() >= 5 && r.shards() < 30),
          "the shards are rebalanced onto the restarted runner",
          20_000
        )
      }).pipe(Effect.scoped),
    180_000
  )
})
