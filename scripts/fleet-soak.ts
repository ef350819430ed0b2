/**
 * A seeded random-kill soak of the fleet fixture (not in CI): three runners on loopback and Postgres; each round a
 * client sends operations over several sessions, a runner chosen by the seed is killed with SIGKILL at a moment
 * chosen by the seed while it has operations in flight, and the round checks that every operation got exactly one
 * reply and one `Completed` entry, and that only operations in flight on the dead runner were started twice. Then
 * the dead runner restarts and the shards rebalance before the next round. Prints, per round and in the end, the
 * takeover time: from the SIGKILL to the first (and the last) operation of the dead runner started again on a
 * survivor, and to the last reply.
 *
 * Usage: `node scripts/run-bundled.mjs scripts/fleet-soak.ts [--seed N] [--rounds N] [--operations N] [--sessions N]
 * [--work-ms N] [--expiry-ms N]` (the shard-lock expiry: 4000 ms, or 30000 with `--throughput`). Uses
 * `LIFELINE_PG_URL` when set, else a throwaway server (scripts/postgres.sh).
 * Also `--throughput [--repeat N] [--cold]`: operations per second through the fleet for a trivial operation (work
 * 0 ms), no kills, on sessions whose extensions already run (`--cold`: on new sessions, spawning their extensions);
 * `--sharding JSON` overrides `ShardingConfig` fields.
 */
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Harness from "../examples/fleet/harness.js"

const flag = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? Number(process.argv[i + 1]) : fallback
}
const seed = flag("seed", 1)
const rounds = flag("rounds", 8)
const operations = flag("operations", 30)
const sessions = flag("sessions", 6)
const workMs = flag("work-ms", 1500)
const throughput = process.argv.includes("--throughput")
// The kill rounds shorten the shard-lock expiry to bound a frozen runner's takeover; the throughput rounds keep it
// long: a lock refresh must finish within a third of it, and a runner busy with a burst that misses it releases all
// its shards and restarts every session it held (docs/fleet.md, "Operations per second").
const expiryMs = flag("expiry-ms", throughput ? 30_000 : 4000)
const cold = process.argv.includes("--cold")
const repeat = flag("repeat", 1)
/** `--sharding '{"entityMessagePollInterval":"100 millis"}'`: `ShardingConfig` fields over the soak's own. */
const shardingOverrides = (() => {
  const i = process.argv.indexOf("--sharding")
  return i >= 0 ? JSON.parse(process.argv[i + 1]!) as Record<string, unknown> : {}
})()

/** mulberry32: a small seeded generator, so a failing round can be replayed. */
const random = (() => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
})()

const log = (text: string) => process.stdout.write(`${text}\n`)
const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted.length === 0 ? NaN : sorted[Math.floor((sorted.length - 1) / 2)]!
}

const postgres = Effect.acquireRelease(
  Effect.sync(() => {
    const shared = process.env.LIFELINE_PG_URL
    if (shared !== undefined && shared !== "") return { url: shared, dir: undefined }
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-soak-pg-"))
    const url = ChildProcess.execFileSync("bash", [Path.join(Harness.root, "scripts/postgres.sh"), "start", dir], {
      encoding: "utf8"
    }).trim()
    return { url, dir }
  }),
  ({ dir }) =>
    Effect.sync(() => {
      if (dir !== undefined) {
        ChildProcess.execFileSync("bash", [Path.join(Harness.root, "scripts/postgres.sh"), "stop", dir])
      }
    })
)

const env: Harness.FleetEnv = {
  sharding: {
    ...Harness.quickSharding,
    shardLockExpiration: `${expiryMs} millis`,
    shardLockRefreshInterval: `${Math.min(throughput ? 5000 : 1000, Math.floor(expiryMs / 3))} millis`,
    ...shardingOverrides
  },
  workMs: throughput ? 0 : workMs
}

const main = Effect.gen(function*() {
  const { url } = yield* postgres
  const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-soak-"))
  const effectsFile = Path.join(directory, "effects")
  const ports = [yield* Harness.freePort, yield* Harness.freePort, yield* Harness.freePort]
  const runners = yield* Effect.forEach(ports, (port) => Harness.startRunner(url, port, effectsFile, env))
  const pids = yield* Effect.forEach(runners, (r) => r.ready(60_000), { concurrency: "unbounded" })
  if (throughput) {
    // The runners' logs, for the record (a lost shard lock shows there), however the run ends.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() =>
        runners.forEach((runner, i) =>
          Fs.writeFileSync(Path.join(directory, `runner-${pids[i]}.stderr`), runner.stderr())
        )
      )
    )
  }
  yield* Harness.eventually(() => runners.reduce((n, r) => n + r.shards(), 0) === 30, "shards assigned", 30_000)
  log(`fleet up: runners ${pids.join(", ")}; seed ${seed}; ${operations} operations over ${sessions} sessions a round`)

  if (throughput) {
    // Warm-up: spawns the sessions' extensions and leaves them running (`--cold`: measure on new sessions, so that
    // the figure includes spawning one extension per session, as the first figures of docs/fleet.md did).
    const prefix = `tp${Date.now()}`
    if (!cold) {
      yield* (yield* Harness.startClient(url, `${prefix}-warm`, sessions, sessions, env, {
        sessionPrefix: prefix,
        keepSessions: true
      })).line("finished", 120_000)
    }
    for (let round = 1; round <= repeat; round++) {
      const runId = `${prefix}-r${round}`
      // The last round closes the sessions: their keep-alive would otherwise restart them with every new fleet
      // on this database.
      const client = yield* Harness.startClient(url, runId, operations, sessions, env, {
        sessionPrefix: cold ? runId : prefix,
        keepSessions: !cold && round < repeat
      })
      yield* client.line("finished", 600_000)
      const started = Number((yield* client.line("sending ", 0)).split(" ")[1])
      const output = Harness.parseClient(client.lines)
      const last = Math.max(...[...output.replies.values()].map((r) => r[0]!.at))
      Fs.writeFileSync(Path.join(directory, `client-${runId}`), client.lines.join("\n") + "\n")
      log(
        `throughput ${runId}: ${operations} operations over ${sessions} ${cold ? "new" : "running"} sessions in ${
          last - started
        } ms from the first send to the last reply = ${
          (operations * 1000 / (last - started)).toFixed(1)
        } ops/s; errors ${output.errors.length}; load ${
          Os.loadavg()[0]!.toFixed(1)
        }; effects and client lines in ${directory}`
      )
    }
    // A graceful stop (SIGTERM), so that a runner started with `--cpu-prof` in NODE_OPTIONS writes its profile.
    yield* Effect.forEach(runners, (runner) =>
      Effect.promise(() => {
        runner.child.kill("SIGTERM")
        return Promise.race([runner.exited, new Promise((resolve) => setTimeout(resolve, 15_000))])
      }), { concurrency: "unbounded", discard: true })
    return
  }

  const takeovers: Array<number> = []
  const takeoversLast: Array<number> = []
  const lastReplies: Array<number> = []
  let failures = 0
  for (let round = 1; round <= rounds; round++) {
    const runId = `soak${seed}-${round}`
    const before = Harness.readEffects(effectsFile).length
    const client = yield* Harness.startClient(url, runId, operations, sessions, env)
    yield* Harness.eventually(
      () => Harness.readEffects(effectsFile).slice(before).some((e) => e.event === "start"),
      "work started",
      60_000
    )
    yield* Effect.sleep(`${Math.floor(200 + random() * workMs)} millis`)
    const flying = Harness.inFlight(Harness.readEffects(effectsFile).slice(before))
    const candidates = runners.filter((r) => (flying.get(pids[runners.indexOf(r)]!)?.size ?? 0) > 0)
    const victim = candidates.length > 0
      ? candidates[Math.floor(random() * candidates.length)]!
      : runners[Math.floor(random() * runners.length)]!
    const index = runners.indexOf(victim)
    const victimPid = pids[index]!
    victim.child.kill("SIGKILL")
    const killedAt = Date.now()
    yield* Effect.promise(() => victim.exited)
    yield* client.line("finished", 120_000)

    const effects = Harness.readEffects(effectsFile).slice(before)
    const output = Harness.parseClient(client.lines)
    const dead = Harness.unanswered(effects, output, victimPid, killedAt)
    const unfinished = Harness.inFlight(effects).get(victimPid)?.size ?? 0
    const twice = [...Harness.starts(effects).entries()].filter(([, n]) => n > 1).map(([key]) => key)
    const problems: Array<string> = []
    if (output.errors.length > 0) problems.push(`${output.errors.length} errors: ${output.errors[0]}`)
    for (let i = 0; i < operations; i++) {
      const key = `${runId}/op-${i}`
      if (output.replies.get(key)?.length !== 1) {
        problems.push(`${key}: ${output.replies.get(key)?.length ?? 0} replies`)
      }
      if (output.journal.get(key)?.status !== "Completed") problems.push(`${key}: ${output.journal.get(key)?.status}`)
    }
    for (const key of twice) if (!dead.has(key)) problems.push(`${key} started twice, not in flight on the dead runner`)
    // Takeover: the first start, on a survivor, of an operation the dead runner had in flight (after the kill).
    const restarts = Harness.readEffects(effectsFile).slice(before).filter((e) =>
      e.event === "start" && e.runner !== victimPid && dead.has(e.key)
    )
    const lastReply = Math.max(...[...output.replies.values()].map((r) => r[0]!.at))
    const takeover = restarts.length === 0 ? NaN : Math.min(...restarts.map((e) => e.at)) - killedAt
    const takeoverLast = restarts.length === 0 ? NaN : Math.max(...restarts.map((e) => e.at)) - killedAt
    if (!Number.isNaN(takeover)) takeovers.push(takeover)
    if (!Number.isNaN(takeoverLast)) takeoversLast.push(takeoverLast)
    lastReplies.push(lastReply - killedAt)
    failures += problems.length === 0 ? 0 : 1
    log(
      `round ${round}: killed ${victimPid} with ${dead.size} in flight (${unfinished} unfinished in its extensions); ${twice.length} started twice (${restarts.length} restarts); takeover ${takeover}–${takeoverLast} ms; last reply ${
        lastReply - killedAt
      } ms after the kill; ${problems.length === 0 ? "ok" : `FAILED: ${problems.slice(0, 5).join("; ")}`}`
    )

    const back = yield* Harness.startRunner(url, victim.port, effectsFile, env)
    runners[index] = back
    pids[index] = yield* back.ready(60_000)
    yield* Harness.eventually(
      () => runners.every((r) => r.shards() >= 5) && runners.reduce((n, r) => n + r.shards(), 0) === 30,
      "shards rebalanced",
      30_000
    )
  }
  log(
    `soak seed ${seed}: ${rounds} rounds, ${failures} failed; takeover (kill → first operation of the dead runner started again on a survivor) median ${
      median(takeovers)
    } ms, max ${Math.max(...takeovers)} ms (all of them restarted: median ${median(takeoversLast)}, max ${
      Math.max(...takeoversLast)
    } ms); last reply after the kill median ${median(lastReplies)} ms, max ${Math.max(...lastReplies)} ms`
  )
  if (failures > 0) process.exitCode = 1
}).pipe(Effect.scoped)

Effect.runPromise(main).catch((error) => {
  process.stderr.write(`${String(error)}\n`)
  process.exit(1)
})
