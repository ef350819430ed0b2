/**
 * The guardian (`NodeGuardian`) of a host that is SIGKILLed and never started again (fixtures/guardian-host.ts): the
 * children NodeSupervisedSpawner started with `guardian: true` are stopped (SIGTERM, SIGKILL `reapGrace` later, their
 * whole groups), and the guardian exits; a pid watched with a start time that is not its process's (a reused pid) and
 * a pid no longer watched are left alone.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as NodeProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Fixtures from "./support/fixtures.js"
import { isAlive } from "./support/processes.js"

const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-guardian-"))
const bundle = Path.join(work, "guardian-host.mjs")
const everyone: Array<number> = []
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const alive = (pids: ReadonlyArray<number>) => pids.filter(isAlive)

beforeAll(async () => {
  // Bundled once: loading the host through tsx takes seconds per process on a busy machine.
  await Fixtures.bundleFixture("guardian-host", bundle)
}, 60_000)

afterAll(() => {
  for (const pid of alive(everyone)) process.kill(pid, "SIGKILL")
  Fs.rmSync(work, { recursive: true, force: true })
})

/** Starts a host; resolves with what it printed, once its children run. */
const startHost = (mode: "spawner" | "watch") =>
  new Promise<{ readonly child: NodeProcess.ChildProcess; readonly report: Record<string, unknown> }>(
    (resolve, reject) => {
      const child = NodeProcess.spawn(process.execPath, [bundle], {
        env: { ...process.env, GUARDIAN_MODE: mode, GUARDIAN_DIR: Path.join(work, "journal") },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let stderr = ""
      child.stderr.on("data", (chunk) => (stderr += String(chunk)))
      let stdout = ""
      child.stdout.on("data", (chunk) => {
        stdout += String(chunk)
        const end = stdout.indexOf("\n")
        if (end < 0) return
        const report = JSON.parse(stdout.slice(0, end)) as Record<string, unknown>
        everyone.push(child.pid!, ...Object.values(report).flat().filter((value) => typeof value === "number"))
        resolve({ child, report })
      })
      child.once("exit", (code) => reject(new Error(`the host exited (${code}): ${stderr}`)))
    }
  )

const killHost = async (child: NodeProcess.ChildProcess) => {
  const exited = new Promise((resolve) => child.once("exit", resolve))
  child.kill("SIGKILL")
  await exited
}

describe("a host SIGKILLed and never started again", () => {
  it(
    "NodeSupervisedSpawner with guardian: its children's groups are stopped within reapGrace, the guardian exits",
    async () => {
      const { child, report } = await startHost("spawner")
      const pids = report.pids as Array<number>
      const guardian = report.guardian as number
      assert.strictEqual(pids.length, 4)
      assert.deepStrictEqual(alive([guardian]), [guardian])
      // Named in `ps`, not shown as `node -e` and its whole script.
      assert.match(Fs.readFileSync(`/proc/${guardian}/cmdline`, "utf8"), /^lifeline-guardian/)
      await killHost(child)
      const start = performance.now()
      while (alive(pids).length > 0 && performance.now() - start < 3000) await sleep(5)
      const gone = performance.now() - start
      process.stderr.write(
        `[guardian measured] 4 processes (3 ignoring SIGTERM, reapGrace 300 ms) gone ${
          gone.toFixed(0)
        } ms after the host's SIGKILL\n`
      )
      assert.deepStrictEqual(alive(pids), [])
      // SIGTERM at once, SIGKILL after 300 ms: not before the grace, well within a second after it.
      assert.isAbove(gone, 250)
      assert.isBelow(gone, 1300)
      while (alive([guardian]).length > 0 && performance.now() - start < 3000) await sleep(10)
      assert.deepStrictEqual(alive([guardian]), [], "the guardian exits once it has swept")
    },
    30_000
  )

  it(
    "NodeGuardian.watch: a reused pid (its start time is not the record's) and an unwatched one are left alone",
    async () => {
      const { child, report } = await startHost("watch")
      const { reused, unwatched, watched } = report as Record<string, number>
      await killHost(child)
      const start = performance.now()
      while (alive([watched]).length > 0 && performance.now() - start < 3000) await sleep(5)
      assert.deepStrictEqual(alive([watched]), [], "the watched process is stopped")
      // The guardian is done (and gone) once the watched one is: whatever it would have done to the others is done.
      while (alive([report.guardian as number]).length > 0 && performance.now() - start < 3000) await sleep(10)
      assert.deepStrictEqual(alive([report.guardian as number]), [])
      assert.deepStrictEqual(alive([reused, unwatched]), [reused, unwatched])
    },
    30_000
  )

  it("NodeGuardian: a guardian killed while the host runs is replaced, and the replacement sweeps", async () => {
    const { child, report } = await startHost("watch")
    const { reused, unwatched, watched } = report as Record<string, number>
    const first = report.guardian as number
    // A guardian that ran less than a second is not replaced at once (no loop of guardians that cannot run).
    await sleep(1100)
    process.kill(first, "SIGKILL")
    const killedAt = performance.now()
    while (alive([first]).length > 0 && performance.now() - killedAt < 2000) await sleep(10)
    // The host sees the exit and starts another, which it tells what is watched now.
    await sleep(300)
    await killHost(child)
    const start = performance.now()
    while (alive([watched]).length > 0 && performance.now() - start < 3000) await sleep(5)
    assert.deepStrictEqual(alive([watched]), [], "the replacement stopped the watched process")
    await sleep(200)
    assert.deepStrictEqual(alive([reused, unwatched]), [reused, unwatched])
  }, 30_000)
})
