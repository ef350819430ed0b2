/**
 * The orphan reaper against real process groups: a host (`fixtures/orphan-host.ts`) spawns an extension
 * (`fixtures/orphan-extension.mjs`) through NodeChildProcess with a SQLite journal, so the extension is recorded and
 * leads its own process group and session; the extension starts processes of its own; the host is killed with
 * SIGKILL. The next start's `ProcessRecord.reapOrphans(NodeReaper.reapProcess())` must leave nothing of the group
 * running. Linux only: the reaper and these tests read /proc. Runs on the live clock.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Journal, ProcessRecord } from "@lifeline/journal"
import * as NodeReaper from "@lifeline/node/NodeReaper"
import * as SqliteJournal from "@lifeline/sqlite/SqliteJournal"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import { awaitGone, eventually, isAlive, killOnExit, spawnLines } from "./support/processes.js"

const here = Path.dirname(Url.fileURLToPath(import.meta.url))
const root = Path.join(here, "..")
const hostFixture = Path.join(here, "fixtures", "orphan-host.ts")

const hasProc = process.platform === "linux" && Fs.existsSync("/proc/self/stat")

// The host starts through tsx, which takes seconds on a busy machine.
const processTimeout = 120_000
const grace = 1_000

const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-orphan-groups-"))
afterAll(() => Fs.rmSync(directory, { recursive: true, force: true }))
let cases = 0

/** Field 5 (process group) and 6 (session) of `/proc/<pid>/stat`. */
const groupOf = (pid: number): { readonly pgid: number; readonly session: number } => {
  const text = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
  return { pgid: Number(fields[2]), session: Number(fields[3]) }
}

interface Started {
  readonly extension: number
  /** Started by the extension in its group. */
  readonly group: ReadonlyArray<number>
  /** Started by the extension with setsid. */
  readonly escaped: ReadonlyArray<number>
}

/**
 * Runs the host with the extension in `mode`, waits until the extension's processes are up, and kills the host with
 * SIGKILL. Every process started is SIGKILLed when the Scope closes, if still alive.
 */
const crashHost = (mode: "children" | "stubborn" | "setsid") =>
  Effect.gen(function*() {
    const folder = Path.join(directory, `case-${++cases}`)
    Fs.mkdirSync(folder, { recursive: true })
    const filename = Path.join(folder, "journal.db")
    const report = Path.join(folder, "started.json")
    const host = yield* spawnLines(process.execPath, ["--import", "tsx", hostFixture, filename, mode, report], {
      cwd: root
    })
    const extension = yield* host.line(
      (line) => line.startsWith("spawned ") ? Number(line.slice("spawned ".length)) : undefined,
      () => new Error(`the host exited before it spawned the extension: ${host.stderr()}`)
    ).pipe(
      Effect.timeoutOrElse({
        duration: "60 seconds",
        orElse: () => Effect.fail(new Error(`the host did not spawn the extension within 60 s: ${host.stderr()}`))
      })
    )
    yield* killOnExit(extension)
    yield* eventually(() => Fs.existsSync(report), "the extension reports its processes", 20_000)
    const started: Started = JSON.parse(Fs.readFileSync(report, "utf8"))
    for (const pid of [...started.group, ...started.escaped]) yield* killOnExit(pid)
    assert.strictEqual(started.extension, extension)
    assert.deepStrictEqual(groupOf(extension), { pgid: extension, session: extension }, "a detached child leads both")
    for (const pid of started.group) assert.deepStrictEqual(groupOf(pid), { pgid: extension, session: extension })
    for (const pid of started.escaped) assert.deepStrictEqual(groupOf(pid), { pgid: pid, session: pid })
    host.child.kill("SIGKILL")
    assert.strictEqual((yield* host.exited).signal, "SIGKILL")
    return { ...started, journal: yield* SqliteJournal.makeFile({ filename }) }
  })

/** The next start: reaps what the journal recorded; answers the report and how long the reap took. */
const nextStart = (journal: Journal.Journal.Service) =>
  Effect.gen(function*() {
    const start = performance.now()
    const report = yield* ProcessRecord.reapOrphans(NodeReaper.reapProcess({ grace: `${grace} millis` })).pipe(
      Effect.provideService(Journal.Journal, journal)
    )
    return { report, elapsed: performance.now() - start }
  })

describe.runIf(hasProc)("Orphan process groups with real processes", () => {
  it.live(
    "(a) the extension exited on EOF, five children stay in its group: all SIGTERMed and gone, reported Killed",
    () =>
      Effect.gen(function*() {
        const { extension, group, journal } = yield* crashHost("children")
        yield* awaitGone(extension, 10_000) // its stdin ended with the host
        assert.lengthOf(group, 5)
        assert.isTrue(group.every(isAlive), "the children outlived the extension")
        const { elapsed, report } = yield* nextStart(journal)
        assert.deepStrictEqual(report.reaped.map(({ outcome }) => outcome), ["Killed"])
        assert.deepStrictEqual(report.errors, [])
        const entry = report.reaped[0].entry
        assert.strictEqual((entry.payload as ProcessRecord.ProcessInfo).pid, extension)
        assert.deepStrictEqual([entry.status, entry.result], ["Completed", { outcome: "Killed" }])
        assert.deepStrictEqual(group.filter(isAlive), [], "no member of the group is left")
        assert.isBelow(elapsed, grace, "they died of SIGTERM: no grace was waited, no SIGKILL was needed")
        assert.deepStrictEqual(yield* journal.unfinished(), [])
      }).pipe(Effect.scoped),
    processTimeout
  )

  it.live(
    "(b) the extension lingers and its child ignores SIGTERM: SIGKILL to the group after grace, all gone",
    () =>
      Effect.gen(function*() {
        const { extension, group, journal } = yield* crashHost("stubborn")
        yield* Effect.sleep("200 millis")
        assert.isTrue(isAlive(extension), "the extension ignores the end of its stdin")
        const { elapsed, report } = yield* nextStart(journal)
        assert.deepStrictEqual(report.reaped.map(({ outcome }) => outcome), ["Killed"])
        assert.deepStrictEqual(report.errors, [])
        assert.isFalse(isAlive(extension))
        assert.deepStrictEqual(group.filter(isAlive), [], "SIGKILL reached the child that ignored SIGTERM")
        // The extension died of SIGTERM at once; the reaper still waited the grace for its child, then SIGKILLed.
        assert.isAtLeast(elapsed, grace - 50)
        assert.isBelow(elapsed, grace + 5_000)
      }).pipe(Effect.scoped),
    processTimeout
  )

  it.live(
    "a grandchild that called setsid has left the group: it is not reaped (the documented limit); the group is",
    () =>
      Effect.gen(function*() {
        const { escaped, extension, group, journal } = yield* crashHost("setsid")
        yield* awaitGone(extension, 10_000)
        const { report } = yield* nextStart(journal)
        assert.deepStrictEqual(report.reaped.map(({ outcome }) => outcome), ["Killed"])
        assert.deepStrictEqual(group.filter(isAlive), [])
        assert.lengthOf(escaped, 1)
        assert.isTrue(isAlive(escaped[0]), "the reaper does not find a process outside the recorded group")
        // killed by the Scope (killOnExit)
      }).pipe(Effect.scoped),
    processTimeout
  )
})
