/**
 * A Postgres outage of 10 s (the server stopped, then started again on the same port) while a fleet of three runners
 * (`examples/fleet/runner.ts`) has operations in flight (3 s each, a `Resume` kind): the runners stop their entities
 * (Effect's preemptive shutdown), the operations in flight finish within the drain and their ends are recorded once
 * Postgres is back, so nothing runs twice and nothing fails. The server is one of this file's own
 * (`scripts/postgres.sh`), so that stopping it disturbs no other test.
 *
 * Not part of `pnpm verify` yet: run alone it passes (about 21 s), but in the full suite it hung twice out of three
 * runs (the client got no reply for 120 s after Postgres was back; not yet explained, see issue 19's note). Run it with
 * `LIFELINE_FLEET_OUTAGE=1 pnpm exec vitest run --project integration test/FleetOutage.test.ts`.
 */
import { assert, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Harness from "../examples/fleet/harness.js"
import { describePostgres, usePostgres } from "./support/postgres.js"

const pg = usePostgres()
const optedIn = process.env.LIFELINE_FLEET_OUTAGE === "1"
if (!optedIn) {
  process.stderr.write(
    "[fleet] SKIPPED test/FleetOutage.test.ts: it hangs intermittently in the full suite (issue 19); " +
      "LIFELINE_FLEET_OUTAGE=1 runs it\n"
  )
}
const script = Path.join(Harness.root, "scripts/postgres.sh")
const bin = (() => {
  try {
    const versions = Fs.readdirSync("/usr/lib/postgresql").sort((a, b) => Number(a) - Number(b))
    return `/usr/lib/postgresql/${versions.at(-1)}/bin`
  } catch {
    return undefined
  }
})()
const asPostgres = (command: string, args: Array<string>) =>
  process.getuid?.() === 0
    ? execFileSync("runuser", ["-u", "postgres", "--", command, ...args], { stdio: "pipe" })
    : execFileSync(command, args, { stdio: "pipe" })

const env: Harness.FleetEnv = {
  sharding: {
    shardsPerGroup: 30,
    shardLockExpiration: "4 seconds",
    shardLockRefreshInterval: "1 second",
    refreshAssignmentsInterval: "1 second",
    runnerHealthCheckInterval: "1 second",
    entityMessagePollInterval: "500 millis"
  },
  workMs: 3_000
}

describePostgres(pg, "Fleet Postgres outage", () => {
  it.live.skipIf(bin === undefined || !optedIn)(
    "a 10 s outage with operations in flight: each answered once, Completed once, run once",
    () =>
      Effect.gen(function*() {
        const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-fleet-outage-"))
        const url = execFileSync(script, ["start", dir], { encoding: "utf8" }).trim()
        yield* Effect.addFinalizer(() => Effect.sync(() => execFileSync(script, ["stop", dir])))
        const port = new URL(url).port
        const effectsFile = Path.join(dir, "outage.effects")
        const ports = [yield* Harness.freePort, yield* Harness.freePort, yield* Harness.freePort]
        const runners = yield* Effect.forEach(ports, (p) => Harness.startRunner(url, p, effectsFile, env))
        yield* Effect.forEach(runners, (runner) => runner.ready(30_000), { concurrency: "unbounded" })
        yield* Harness.eventually(
          () => runners.reduce((n, r) => n + r.shards(), 0) === 30,
          "the shards are assigned",
          15_000
        )
        const operations = 12
        const client = yield* Harness.startClient(url, "o", operations, 6, env)
        yield* Harness.eventually(
          () => [...Harness.inFlight(Harness.readEffects(effectsFile)).values()].reduce((n, s) => n + s.size, 0) >= 3,
          "three operations in flight",
          30_000
        )
        const inFlight = new Set(
          [...Harness.inFlight(Harness.readEffects(effectsFile)).values()].flatMap((s) => [...s])
        )
        asPostgres(`${bin}/pg_ctl`, ["-D", `${dir}/data`, "-m", "fast", "-w", "stop"])
        yield* Effect.sleep("10 seconds")
        asPostgres(`${bin}/pg_ctl`, [
          "-D",
          `${dir}/data`,
          "-l",
          `${dir}/server.log`,
          "-w",
          "-t",
          "30",
          "-o",
          `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c fsync=off -c max_connections=200`,
          "start"
        ])
        yield* client.line("finished", 120_000)
        const output = Harness.parseClient(client.lines)
        const effects = Harness.readEffects(effectsFile)
        const summary = Array.from({ length: operations }, (_, i) => {
          const key = `o/op-${i}`
          const done = effects.filter((e) => e.key === key && e.event === "done").length
          const starts = effects.filter((e) => e.key === key && e.event === "start").length
          const journal = output.journal.get(key)
          return `${key}${inFlight.has(key) ? "*" : ""} replies=${
            output.replies.get(key)?.length ?? 0
          } starts=${starts} done=${done} ${journal?.status}/${journal?.attempts}`
        })
        yield* Effect.logInfo(`outage:\n${summary.join("\n")}\nerrors: ${output.errors.join("\n")}`)
        // Every operation ran once: what was in flight finished within the drain, and its end was recorded once
        // Postgres was back (the record is retried), so no runner resumed it.
        assert.deepStrictEqual(output.errors, [])
        for (let i = 0; i < operations; i++) {
          const key = `o/op-${i}`
          assert.strictEqual(output.replies.get(key)?.length, 1, `one reply for ${key}`)
          assert.deepStrictEqual(output.journal.get(key), { status: "Completed", attempts: 1 }, key)
          assert.strictEqual(effects.filter((e) => e.key === key && e.event === "start").length, 1, `${key} ran once`)
        }
        assert.isAbove(inFlight.size, 0)
      }).pipe(Effect.scoped),
    180_000
  )
})
