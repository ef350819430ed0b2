/**
 * The headless Hermes host (examples/headless-host.ts) against real extension processes: the HL7 example extension
 * built with the SDK, and hand-written ones that misbehave. Every run is a real `hermes-host --json` process.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"

const root = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "..")
const tsx = Path.join(root, "node_modules", ".bin", "tsx")
const host = Path.join(root, "examples", "headless-host.ts")
const misbehaving = (mode: string) => `node ${Path.join(root, "test", "fixtures", "hermes-misbehaving.mjs")} ${mode}`

interface Run {
  readonly code: number | null
  readonly report: any
  readonly stderr: string
  readonly elapsedMs: number
}

const runHost = (args: ReadonlyArray<string>, dataDir: string) =>
  Effect.async<Run>((resume) => {
    const startedAt = Date.now()
    const child = ChildProcess.execFile(
      tsx,
      [host, "--json", "--data-dir", dataDir, ...args],
      { cwd: root, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
      (_error, stdout, stderr) => {
        let report: any = undefined
        try {
          report = JSON.parse(stdout)
        } catch {
          report = { unparsable: stdout }
        }
        resume(Effect.succeed({ code: child.exitCode, report, stderr, elapsedMs: Date.now() - startedAt }))
      }
    )
  })

const tempDir = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "hermes-test-"))
const methods = (report: any): Array<string> => report.requestsServed.map((r: any) => r.method)
const eventTypes = (report: any): Array<string> => report.events.map((e: any) => e.type)

describe("Hermes: the headless host and real extension processes", () => {
  it.live(
    "the demo: the HL7 extension runs every command and shuts down cleanly with reason closing",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        const { code, report, stderr } = yield* runHost([], dataDir)
        assert.strictEqual(report.outcome, "ok", stderr)
        assert.strictEqual(code, 0)
        assert.strictEqual(report.extension.name, "hl7-tools")
        assert.deepStrictEqual(report.extension.commands.map((c: any) => c.id), [
          "hl7.anonymise",
          "hl7.validate",
          "hl7.audit"
        ])
        for (const method of ["editor/getMessage", "editor/patchMessage", "ui/openWindow", "editor/setMessage"]) {
          assert.include(methods(report), method)
        }
        assert.include(report.message.before, "DOE^JOHN^QUINCY")
        assert.include(report.message.after, "ANONYMOUS^PATIENT")
        assert.notInclude(report.message.after, "DOE")
        // The audit finished while the extension drained its commands.
        assert.include(report.message.after, "NTE|1||Audited")
        assert.includeMembers(eventTypes(report), ["WindowOpened", "WindowShown", "WindowClosed"])
        assert.deepStrictEqual(
          { ...report.shutdown, elapsedMs: 0 },
          {
            reason: "closing",
            policy: "drain",
            responded: true,
            success: true,
            error: null,
            killed: false,
            elapsedMs: 0
          }
        )
        assert.isBelow(report.shutdown.elapsedMs, 5000)
        assert.deepStrictEqual(report.exit, { code: 0, signal: null })
        // State written atomically at shutdown: no temporary file is left.
        const dir = Path.join(dataDir, "extensions", "hl7-tools")
        assert.deepStrictEqual(Fs.readdirSync(dir), ["state.json"])
      }),
    { timeout: 60_000 }
  )

  it.live("state written at shutdown is read back at the next start", () =>
    Effect.gen(function*() {
      const dataDir = tempDir()
      const file = Path.join(dataDir, "extensions", "hl7-tools", "state.json")
      for (const expected of [1, 2]) {
        const { report, stderr } = yield* runHost(["--run", "hl7.anonymise", "--reason", "reload"], dataDir)
        assert.strictEqual(report.outcome, "ok", stderr)
        assert.strictEqual(JSON.parse(Fs.readFileSync(file, "utf8")).anonymised, expected)
      }
    }), { timeout: 90_000 })

  it.live(
    "fail-fast: a slow command is cancelled at shutdown, and the message keeps no half-done edit",
    () =>
      Effect.gen(function*() {
        const { report, stderr } = yield* runHost(
          ["--run", "hl7.audit", "--shutdown-policy", "fail-fast", "--settle", "100 millis"],
          tempDir()
        )
        assert.strictEqual(report.outcome, "ok", stderr)
        assert.strictEqual(report.shutdown.policy, "fail-fast")
        assert.isTrue(report.shutdown.success)
        assert.strictEqual(report.message.after, report.message.before)
        assert.notInclude(methods(report), "editor/setMessage")
      }),
    { timeout: 60_000 }
  )

  it.live(
    "an extension that never answers initialize: initialize-timeout after 10 s, process killed",
    () =>
      Effect.gen(function*() {
        const { code, report } = yield* runHost(["--extension", misbehaving("silent")], tempDir())
        assert.strictEqual(report.outcome, "initialize-timeout")
        assert.strictEqual(code, 1)
        assert.deepStrictEqual(report.exit, { code: null, signal: "SIGKILL" })
        const failedAt = report.events.find((e: any) => e.type === "InitializeFailed").atMs
        const initializingAt = report.events.find((e: any) => e.type === "Initializing").atMs
        assert.isAtLeast(failedAt - initializingAt, 10_000)
        assert.isBelow(failedAt - initializingAt, 11_500)
      }),
    { timeout: 60_000 }
  )

  it.live("an error answer to initialize: initialize-error", () =>
    Effect.gen(function*() {
      const { report } = yield* runHost(["--extension", misbehaving("refuse")], tempDir())
      assert.strictEqual(report.outcome, "initialize-error")
    }), { timeout: 60_000 })

  it.live("an extension that ignores shutdown (and SIGTERM): killed after 5 s", () =>
    Effect.gen(function*() {
      const { report } = yield* runHost(["--extension", misbehaving("ignore-shutdown")], tempDir())
      assert.strictEqual(report.outcome, "shutdown-timeout-killed")
      assert.isFalse(report.shutdown.responded)
      assert.isTrue(report.shutdown.killed)
      assert.isAtLeast(report.shutdown.elapsedMs, 5000)
      assert.isBelow(report.shutdown.elapsedMs, 7000)
      assert.deepStrictEqual(report.exit, { code: null, signal: "SIGKILL" })
    }), { timeout: 60_000 })

  it.live("an error answer to shutdown is reported, and the process is still terminated", () =>
    Effect.gen(function*() {
      const { report } = yield* runHost(["--extension", misbehaving("error-shutdown")], tempDir())
      assert.strictEqual(report.outcome, "ok")
      assert.isTrue(report.shutdown.responded)
      assert.isFalse(report.shutdown.success)
      assert.strictEqual(report.shutdown.error, "-32000 Shutdown failed: disk full")
      // It ignores SIGTERM too, so SIGKILL ends it.
      assert.deepStrictEqual(report.exit, { code: null, signal: "SIGKILL" })
    }), { timeout: 60_000 })

  it.live("an extension that crashes mid-command: crashed, with its exit code", () =>
    Effect.gen(function*() {
      const { report } = yield* runHost(["--extension", misbehaving("crash")], tempDir())
      assert.strictEqual(report.outcome, "crashed")
      assert.deepStrictEqual(report.exit, { code: 3, signal: null })
      assert.isNull(report.shutdown)
    }), { timeout: 60_000 })

  it.live("junk on stdout and a flood on stderr do not derail the host", () =>
    Effect.gen(function*() {
      const { report } = yield* runHost(["--extension", misbehaving("junk")], tempDir())
      assert.strictEqual(report.outcome, "ok")
      assert.include(methods(report), "editor/getMessage")
      assert.isTrue(report.shutdown.success)
    }), { timeout: 60_000 })
})
