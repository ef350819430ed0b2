/**
 * A local fleet of three Lifeline runners on a throwaway Postgres, end to end: starts Postgres (scripts/postgres.sh,
 * or `LIFELINE_PG_URL`), three runners (`examples/fleet/runner.ts`: a host running `ExtensionSession`s whose
 * extension is a real child process), sends 24 operations over 6 sessions, kills with SIGKILL the runner with the
 * most operations in flight, shows the survivors taking its sessions over (each operation answered once; those the
 * dead runner had in flight run again on a new extension), restarts it, shows the shards rebalanced, and stops
 * everything.
 *
 * Usage: `pnpm demo:fleet` (examples/fleet/bin/fleet-demo). Needs Postgres server binaries (initdb, pg_ctl) or
 * `LIFELINE_PG_URL`.
 */
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Harness from "../../examples/fleet/harness.js"

const say = (text: string) => process.stdout.write(`${text}\n`)
const script = Path.join(Harness.root, "scripts/postgres.sh")

const env: Harness.FleetEnv = {
  sharding: Harness.quickSharding,
  workMs: 2000
}

const postgres = Effect.acquireRelease(
  Effect.sync(() => {
    const shared = process.env.LIFELINE_PG_URL
    if (shared !== undefined && shared !== "") return { url: shared, dir: undefined }
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-fleet-demo-pg-"))
    say("starting a throwaway Postgres (scripts/postgres.sh) ...")
    const url = ChildProcess.execFileSync("bash", [script, "start", dir], { encoding: "utf8" }).trim()
    return { url, dir }
  }),
  ({ dir }) =>
    Effect.sync(() => {
      if (dir === undefined) return
      ChildProcess.execFileSync("bash", [script, "stop", dir])
      say("Postgres stopped and its data deleted")
    })
)

const shardsLine = (runners: ReadonlyArray<Harness.Runner>, pids: ReadonlyArray<number>) =>
  runners.map((r, i) => `runner ${pids[i]} (:${r.port}) holds ${r.shards()} shards`).join(", ")

const main = Effect.gen(function*() {
  const { url } = yield* postgres
  const effectsFile = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-fleet-demo-")), "effects")
  const ports = [yield* Harness.freePort, yield* Harness.freePort, yield* Harness.freePort]
  say(`starting three runners at once on ports ${ports.join(", ")} (the first start migrates the cluster's tables)`)
  const runners = yield* Effect.forEach(ports, (port) => Harness.startRunner(url, port, effectsFile, env))
  const pids = yield* Effect.forEach(runners, (r) => r.ready(60_000), { concurrency: "unbounded" })
  yield* Harness.eventually(() => runners.every((r) => r.shards() >= 5), "shards assigned to every runner", 30_000)
  say(shardsLine(runners, pids))

  say("sending 24 operations over 6 sessions (each works 2 s in its session's extension process)")
  const client = yield* Harness.startClient(url, "demo", 24, 6, env)
  yield* Harness.eventually(
    () => [...Harness.inFlight(Harness.readEffects(effectsFile)).values()].some((keys) => keys.size >= 3),
    "three operations in flight on one runner",
    60_000
  ).pipe(Effect.mapError((error) => new Error(`${error.message}; client: ${client.stderr().slice(-2000)}`)))
  const flying = Harness.inFlight(Harness.readEffects(effectsFile))
  for (const [pid, keys] of flying) {
    say(
      `  running in the extensions of runner ${pid} (a snapshot: more may start before the kill): ${
        [...keys].join(" ") || "-"
      }`
    )
  }
  const victimPid = [...flying.entries()].sort((a, b) => b[1].size - a[1].size)[0]![0]
  const index = pids.indexOf(victimPid)
  const victim = runners[index]!
  say(`SIGKILL runner ${victimPid}`)
  victim.child.kill("SIGKILL")
  const killedAt = Date.now()
  yield* Effect.promise(() => victim.exited)

  yield* client.line("finished", 120_000)
  const output = Harness.parseClient(client.lines)
  const effects = Harness.readEffects(effectsFile)
  const dead = Harness.unanswered(effects, output, victimPid, killedAt)
  for (const e of effects) {
    if (e.event === "start" && e.attempt > 1) {
      say(`  ${e.key} started again on runner ${e.runner}, ${e.at - killedAt} ms after the kill (attempt ${e.attempt})`)
    }
  }
  const twice = [...Harness.starts(effects).entries()].filter(([, n]) => n > 1).length
  const last = Math.max(...[...output.replies.values()].map((r) => r[0]!.at))
  say(
    `${output.replies.size} of 24 operations answered, ${output.errors.length} errors; ${dead.size} were started by the dead runner and not answered when it died (running, or finished and not yet recorded: ${
      [...dead].sort().join(" ")
    }), ${twice} ran twice; last reply ${last - killedAt} ms after the kill`
  )

  say(`restarting runner on :${victim.port}`)
  const back = yield* Harness.startRunner(url, victim.port, effectsFile, env)
  runners[index] = back
  pids[index] = yield* back.ready(60_000)
  yield* Harness.eventually(() => runners.every((r) => r.shards() >= 5), "shards rebalanced", 30_000)
  say(shardsLine(runners, pids))
  say("stopping everything")
}).pipe(Effect.scoped)

Effect.runPromise(main).then(
  () => say("done"),
  (error) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(1)
  }
)
