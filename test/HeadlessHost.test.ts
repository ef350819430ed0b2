/**
 * The headless host's command line as a user runs it: `examples/headless-host/bin/hermes-host`, a real process, against
 * real extension processes (test/fixtures/hermes-hostile.mjs, hermes-misbehaving.mjs, hermes-flood.mjs and the HL7
 * example). Bad arguments, the outcomes and exit codes, durations typed the way people type them, `--max-duration`
 * against an extension that never stops asking, terminal escapes in everything the extension chooses, and signals:
 * SIGTERM with `--json`, SIGKILL to the pid the user sees (no process left), SIGHUP to its process group (the
 * extension is shut down and its state saved). Every run is bounded in time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type * as Scope from "effect/Scope"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Sqlite from "node:sqlite"
import * as Url from "node:url"
import { sampleMessage } from "../packages/hermes-node/src/internal/hermesHostSettings.js"
import { awaitGone, eventually, isAlive } from "./support/processes.js"

const root = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "..")
const bin = Path.join(root, "examples", "headless-host", "bin", "hermes-host")
// The extensions' command lines name this test's Node: a bare `node` would be whichever one PATH finds first.
const fixture = (name: string, ...args: ReadonlyArray<string>) =>
  [process.execPath, Path.join(root, "test", "fixtures", name), ...args].join(" ")
const hostile = (mode: string) => fixture("hermes-hostile.mjs", mode)
const tempDir = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "hermes-host-"))

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly elapsedMs: number
}

/** `hermes-host ARGS` to its end (killed after `timeoutMs`). */
const runHost = (args: ReadonlyArray<string>, timeoutMs = 60_000) =>
  Effect.callback<Run>((resume) => {
    const startedAt = Date.now()
    const child = ChildProcess.execFile(
      bin,
      args,
      { cwd: root, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, encoding: "utf8" },
      (_error, stdout, stderr) =>
        resume(Effect.succeed({ code: child.exitCode, stdout, stderr, elapsedMs: Date.now() - startedAt }))
    )
  })

/** `hermes-host --json --data-dir DIR ARGS` and its report. */
const runJson = (args: ReadonlyArray<string>, dataDir = tempDir(), timeoutMs?: number) =>
  Effect.map(runHost(["--json", "--data-dir", dataDir, ...args], timeoutMs), (run) => {
    let report: any
    try {
      report = JSON.parse(run.stdout)
    } catch {
      assert.fail(`not a JSON report (exit code ${run.code}):\n${run.stdout}\nstderr:\n${run.stderr}`)
    }
    return { ...run, report, dataDir }
  })

interface Started {
  readonly child: ChildProcess.ChildProcess
  readonly pid: number
  readonly stdout: () => string
  readonly stderr: () => string
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
}

/**
 * `hermes-host ARGS` started in a process group of its own (as a shell job is), its output collected; the Scope kills
 * the group if it still runs.
 */
const startHost = (args: ReadonlyArray<string>): Effect.Effect<Started, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync((): Started => {
      const child = ChildProcess.spawn(bin, args, { cwd: root, detached: true, stdio: ["ignore", "pipe", "pipe"] })
      let stdout = ""
      let stderr = ""
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.once("exit", (code, signal) => resolve({ code, signal }))
      )
      return { child, pid: child.pid!, stdout: () => stdout, stderr: () => stderr, exited }
    }),
    ({ child }) =>
      Effect.sync(() => {
        if (child.exitCode === null && child.signalCode === null) {
          try {
            process.kill(-child.pid!, "SIGKILL")
          } catch {
            // already gone
          }
        }
      })
  )

const awaitExit = (started: Started, timeoutMs: number) =>
  Effect.promise(() => started.exited).pipe(
    Effect.timeoutOrElse({
      duration: timeoutMs,
      orElse: () => Effect.die(new Error(`no exit within ${timeoutMs} ms:\n${started.stdout()}\n${started.stderr()}`))
    })
  )

/** Every live process whose parent is `pid`, and theirs, from /proc. */
const descendants = (pid: number): Array<number> => {
  const children = new Map<number, Array<number>>()
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = Fs.readFileSync(`/proc/${entry}/stat`, "latin1")
      const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)])
    } catch {
      // gone meanwhile
    }
  }
  const found: Array<number> = []
  const visit = (parent: number) => {
    for (const child of children.get(parent) ?? []) {
      if (!isAlive(child)) continue
      found.push(child)
      visit(child)
    }
  }
  visit(pid)
  return found
}

const commandLineOf = (pid: number) => Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ")

/** What the host sent the hostile fixture, one method a line. */
const received = (dataDir: string): Array<string> => {
  const file = Path.join(dataDir, "hostile.log")
  return Fs.existsSync(file) ? Fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "") : []
}

/** Bytes a terminal would obey: ESC, BEL, a C1 control (U+0080–U+009F), DEL, a bidi override or isolate. */
const terminalControls = /[\x07\x1b\x7f\u0080-\u009f\u202a-\u202e\u2066-\u2069]/

describe("hermes-host: the command line", () => {
  it.live(
    "bad arguments and missing files: one line on stderr, nothing on stdout, exit code 2, no stack trace",
    () =>
      Effect.gen(function*() {
        const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
          [["--bogus"], "Unknown option '--bogus'"],
          [["--settle"], "argument missing"],
          [["--settle", "4x"], `--settle: not a duration: "4x"`],
          [["--max-duration", "-1s"], "--max-duration"],
          [["--max-duration=-1s"], "negative"],
          [["--drain-timeout", "soon"], `--drain-timeout: not a duration: "soon"`],
          [["--reason", "bored"], "--reason must be one of"],
          [["--message", "/nonexistent/message.hl7"], "--message: cannot read /nonexistent/message.hl7: ENOENT"],
          [["--extension", "/nonexistent/extension"], "--extension: /nonexistent/extension is not an executable file"],
          [["--extension", "lifeline-no-such-program"], "--extension: lifeline-no-such-program is not on PATH"],
          [["extra"], "Unexpected argument 'extra'"]
        ]
        for (const [args, expected] of cases) {
          const { code, stderr, stdout } = yield* runHost(args, 20_000)
          const what = `${args.join(" ")} → ${code}: ${stderr}`
          assert.strictEqual(code, 2, what)
          assert.strictEqual(stdout, "", what)
          assert.include(stderr, expected, what)
          assert.strictEqual(stderr.trimEnd().split("\n").length, 1, what)
          assert.match(stderr, /^hermes-host: /, what)
          assert.notMatch(stderr, /\n\s+at /, what)
        }
      }),
    { timeout: 120_000 }
  )

  it.live(
    "the package's bin names no defaults: --extension is required (host and kit), the message is the built-in sample",
    () =>
      Effect.gen(function*() {
        // The bin of @lifeline/hermes-node from its source, bundled as examples/headless-host/bin does with the demo.
        const packageBin = (args: ReadonlyArray<string>) =>
          Effect.callback<Run>((resume) => {
            const startedAt = Date.now()
            const child = ChildProcess.execFile(
              process.execPath,
              [
                Path.join(root, "scripts", "run-bundled.mjs"),
                Path.join(root, "packages", "hermes-node", "src", "bin", "hermes-host.ts"),
                ...args
              ],
              { cwd: root, timeout: 30_000, maxBuffer: 16 * 1024 * 1024, encoding: "utf8" },
              (_error, stdout, stderr) =>
                resume(Effect.succeed({ code: child.exitCode, stdout, stderr, elapsedMs: Date.now() - startedAt }))
            )
          })
        for (const args of [[], ["--conformance"], ["--json"]]) {
          const { code, stderr, stdout } = yield* packageBin(args)
          const what = `${args.join(" ")} → ${code}: ${stderr}`
          assert.strictEqual(code, 2, what)
          assert.strictEqual(stdout, "", what)
          assert.match(stderr, /^hermes-host: --extension is required \(hermes-host --help shows the usage\)\n$/, what)
        }
        const { code, stderr, stdout } = yield* packageBin([
          "--json",
          "--data-dir",
          tempDir(),
          "--extension",
          hostile("plain")
        ])
        const report = JSON.parse(stdout)
        assert.strictEqual(code, 0, stderr)
        assert.strictEqual(report.outcome, "ok", stderr)
        assert.strictEqual(report.message.before, sampleMessage)
        assert.match(report.message.before, /^MSH\|\^~\\&\|.*\rPID\|/s)
      }),
    { timeout: 120_000 }
  )

  it.live(
    "durations as people type them: 150ms, 1.5s, \"2 minutes\"",
    () =>
      Effect.gen(function*() {
        const { code, report, stderr } = yield* runJson([
          "--extension",
          hostile("plain"),
          "--settle",
          "150ms",
          "--drain-timeout",
          "1.5s",
          "--max-duration",
          "2 minutes"
        ])
        assert.strictEqual(report.outcome, "ok", stderr)
        assert.strictEqual(code, 0)
        assert.strictEqual(report.ended, "settled")
        assert.deepStrictEqual(report.settings, { settleMs: 150, maxDurationMs: 120_000, drainTimeoutMs: 1500 })
      }),
    { timeout: 60_000 }
  )

  it.live(
    "a shutdown answered with an error is not ok: outcome shutdown-error, exit code 1",
    () =>
      Effect.gen(function*() {
        const { code, report, stderr } = yield* runJson([
          "--extension",
          fixture("hermes-misbehaving.mjs", "error-shutdown"),
          "--settle",
          "100ms"
        ])
        assert.strictEqual(report.outcome, "shutdown-error", stderr)
        assert.strictEqual(code, 1)
        assert.isTrue(report.shutdown.responded)
        assert.isFalse(report.shutdown.success)
        assert.strictEqual(report.shutdown.error, "-32000 Shutdown failed: disk full")
        assert.strictEqual(report.detail, "-32000 Shutdown failed: disk full")
      }),
    { timeout: 60_000 }
  )

  it.live(
    "an extension whose name breaks the protocol's pattern (../../x) is refused: no command runs, exit code 1",
    () =>
      Effect.gen(function*() {
        const { code, dataDir, report, stderr } = yield* runJson(["--extension", hostile("bad-name")])
        // ExtensionHost refuses the answer to initialize itself; the command line checks again, should it not.
        assert.include(["initialize-error", "invalid-name"], report.outcome, stderr)
        assert.strictEqual(code, 1)
        assert.include(report.detail, `"../../x"`)
        assert.notInclude(received(dataDir), "command/execute")
      }),
    { timeout: 60_000 }
  )

  it.live(
    "--max-duration: an extension that never stops sending requests is shut down in time, as did-not-settle",
    () =>
      Effect.gen(function*() {
        const { code, elapsedMs, report, stderr } = yield* runJson(
          ["--extension", hostile("endless"), "--settle", "300ms", "--max-duration", "2s"],
          tempDir(),
          30_000
        )
        assert.strictEqual(report.outcome, "did-not-settle", stderr)
        assert.strictEqual(report.ended, "max-duration")
        assert.strictEqual(code, 1)
        assert.isAbove(report.requests.served, 20)
        assert.isTrue(report.shutdown.success)
        assert.isAtLeast(report.elapsedMs, 2000)
        assert.isBelow(report.elapsedMs, 7000)
        assert.isBelow(elapsedMs, 15_000)
      }),
    { timeout: 60_000 }
  )

  it.live(
    "a flood (30,000 requests, 2,000 windows, oversized patches): the host settles, exits, and prints a bounded timeline",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        // Port 9 (discard) on loopback: nothing listens, every window fetch fails at once.
        const { code, elapsedMs, stderr, stdout } = yield* runHost(
          [
            "--data-dir",
            dataDir,
            "--extension",
            fixture("hermes-flood.mjs", "http://127.0.0.1:9"),
            "--max-duration",
            "10s"
          ],
          60_000
        )
        const lines = stdout.split("\n")
        assert.match(stdout, /more than 1000 requests, commands and windows: counted, not shown/)
        assert.match(stdout, /\d+ request\(s\) served, \d+ refused; \d+ event\(s\) not shown/)
        assert.match(stdout, /[✔✘] (ok|did-not-settle) in \d+ ms/, stderr)
        assert.include([0, 1], code)
        assert.isBelow(lines.length, 1200)
        assert.match(stdout, /shutdown {3}← \{ success: true \}/)
        assert.isBelow(elapsedMs, 30_000)
      }),
    { timeout: 90_000 }
  )
})

describe("hermes-host: a journal that cannot be opened is reported with SQLite's own reason", () => {
  it.live(
    "a file that is not a database, and a database another process holds locked",
    () =>
      Effect.gen(function*() {
        const garbage = tempDir()
        Fs.mkdirSync(Path.join(garbage, "lifeline"))
        Fs.writeFileSync(Path.join(garbage, "lifeline", "journal.db"), Buffer.alloc(4096, "not sqlite "))
        const notADatabase = yield* runJson(["--extension", hostile("plain"), "--settle", "100ms"], garbage)
        assert.strictEqual(notADatabase.report.outcome, "ok", notADatabase.stderr)
        assert.isFalse(notADatabase.report.journal.recording)
        assert.include(notADatabase.report.journal.warning, "file is not a database")
        assert.include(notADatabase.stderr, "file is not a database")

        const locked = tempDir()
        Fs.mkdirSync(Path.join(locked, "lifeline"))
        const holder = new Sqlite.DatabaseSync(Path.join(locked, "lifeline", "journal.db"))
        try {
          holder.exec("CREATE TABLE held (x); BEGIN EXCLUSIVE; INSERT INTO held VALUES (1)")
          // The journal waits 5 s (its busy timeout) for the lock, then gives up and the host runs without it.
          const lockedOut = yield* runJson(["--extension", hostile("plain"), "--settle", "100ms"], locked)
          assert.strictEqual(lockedOut.report.outcome, "ok", lockedOut.stderr)
          assert.isFalse(lockedOut.report.journal.recording)
          assert.include(lockedOut.report.journal.warning, "database is locked")
        } finally {
          holder.close()
        }
      }),
    { timeout: 60_000 }
  )
})

describe("hermes-host: terminal escapes from the extension are shown, never obeyed", () => {
  it.live(
    "name, version, command titles, window title and URL, message text and stderr: no control reaches stdout",
    () =>
      Effect.gen(function*() {
        const timeline = yield* runHost([
          "--data-dir",
          tempDir(),
          "--settle",
          "200ms",
          "--extension",
          hostile("escapes")
        ])
        assert.strictEqual(timeline.code, 1, timeline.stderr)
        assert.notMatch(timeline.stdout, terminalControls)
        // Each was there, made visible: the version (OSC 0), a title (OSC 8, CSI 2J), the window URL (OSC 52), the
        // message text, and the stderr tail printed for the crash.
        assert.include(timeline.stdout, "1.0␛]0;pwned␇\\u009b31m")
        assert.include(timeline.stdout, "Run ␛]8;;http://evil.example/␛\\click")
        assert.include(timeline.stdout, "http://127.0.0.1:9/␛]52;c;aGVsbG8=␇")
        assert.include(timeline.stdout, "+ MSH|^~\\&|␛]0;pwned␇|HOSP")
        assert.include(timeline.stdout, "stderr: more ␛[2J␛[H")
        assert.include(timeline.stdout, "\\u202egnp.exe")
        assert.include(timeline.stdout, "✘ crashed")

        const json = yield* runJson(["--settle", "200ms", "--extension", hostile("escapes")])
        assert.notMatch(json.stdout, terminalControls)
        assert.strictEqual(json.report.outcome, "crashed")
        // The JSON says the same as before: a parser gets the extension's very bytes back.
        assert.strictEqual(json.report.extension.version, "1.0\x1b]0;pwned\x07\u009b31m")
        assert.include(json.report.message.after, "\u202egnp.exe")
      }),
    { timeout: 60_000 }
  )

  it.live(
    "a name with escapes is refused, and the refusal is printed with them made visible",
    () =>
      Effect.gen(function*() {
        const { code, stdout } = yield* runHost(["--data-dir", tempDir(), "--extension", hostile("escape-name")])
        assert.strictEqual(code, 1)
        assert.notMatch(stdout, terminalControls)
        assert.match(stdout, /✘ (initialize-error|invalid-name)/)
      }),
    { timeout: 60_000 }
  )
})

describe("hermes-host: signals", () => {
  it.live(
    "SIGTERM with --json: the extension is shut down (shutdown sent), the report printed, exit code 143",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        const host = yield* startHost([
          "--json",
          "--data-dir",
          dataDir,
          "--settle",
          "1m",
          "--extension",
          hostile("plain")
        ])
        yield* eventually(() => received(dataDir).includes("command/execute"), "the command was sent", 20_000)
        process.kill(host.pid, "SIGTERM")
        const exit = yield* awaitExit(host, 15_000)
        assert.deepStrictEqual(exit, { code: 143, signal: null }, host.stderr())
        const report = JSON.parse(host.stdout())
        assert.strictEqual(report.outcome, "ok")
        assert.strictEqual(report.ended, "signal")
        assert.strictEqual(report.stoppedBy, "SIGTERM")
        assert.deepStrictEqual(
          [report.shutdown.reason, report.shutdown.responded, report.shutdown.success],
          ["closing", true, true]
        )
        assert.include(received(dataDir), "shutdown")
        assert.deepStrictEqual(report.exit, { code: 0, signal: null })
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )

  it.live(
    "a second SIGTERM forces the stop: an extension that ignores shutdown gets SIGKILL at once, exit code 2",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        const host = yield* startHost([
          "--data-dir",
          dataDir,
          "--settle",
          "1m",
          "--extension",
          fixture("hermes-misbehaving.mjs", "ignore-shutdown")
        ])
        yield* eventually(() => host.stdout().includes("← editor/getMessage ✔"), "the command ran", 20_000)
        const extension = Number(/spawn {6}pid (\d+)/.exec(host.stdout())?.[1])
        assert.isTrue(isAlive(extension))
        process.kill(host.pid, "SIGTERM")
        yield* eventually(() => host.stdout().includes("→ shutdown"), "the shutdown request", 10_000)
        process.kill(host.pid, "SIGTERM")
        const exit = yield* awaitExit(host, 5000)
        assert.deepStrictEqual(exit, { code: 2, signal: null }, `${host.stdout()}\n${host.stderr()}`)
        yield* awaitGone(extension, 2000)
        // One stop, cut short: the forced stop joins the one under way instead of asking a second time.
        assert.strictEqual(host.stdout().split("→ shutdown").length - 1, 1, host.stdout())
        // Forced before or after the request went out, depending on when the second signal lands.
        assert.match(host.stdout(), /no answer before the stop was forced|not asked: the stop was forced/)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )

  it.live(
    "SIGINT (Ctrl-C), outcome ok: the extension is shut down, exit code 130 (docs/hosting.md, Exit codes)",
    () =>
      Effect.gen(function*() {
        const host = yield* startHost([
          "--data-dir",
          tempDir(),
          "--settle",
          "1m",
          "--extension",
          fixture("hermes-misbehaving.mjs", "behave")
        ])
        yield* eventually(() => host.stdout().includes("← editor/getMessage ✔"), "the command ran", 20_000)
        process.kill(host.pid, "SIGINT")
        const exit = yield* awaitExit(host, 15_000)
        assert.deepStrictEqual(exit, { code: 130, signal: null }, `${host.stdout()}\n${host.stderr()}`)
        assert.include(host.stdout(), "SIGINT: shutting the extension down")
      }).pipe(Effect.scoped),
    { timeout: 40_000 }
  )

  it.live(
    "SIGTERM, then no answer to shutdown: SIGKILL after 5 s, outcome shutdown-timeout-killed, exit code 1, not 143",
    () =>
      Effect.gen(function*() {
        const host = yield* startHost([
          "--data-dir",
          tempDir(),
          "--settle",
          "1m",
          "--extension",
          fixture("hermes-misbehaving.mjs", "ignore-shutdown")
        ])
        yield* eventually(() => host.stdout().includes("← editor/getMessage ✔"), "the command ran", 20_000)
        process.kill(host.pid, "SIGTERM")
        const exit = yield* awaitExit(host, 15_000)
        assert.deepStrictEqual(exit, { code: 1, signal: null }, `${host.stdout()}\n${host.stderr()}`)
        assert.include(host.stdout(), "✘ shutdown-timeout-killed")
        assert.include(host.stdout(), "SIGTERM: shutting the extension down")
      }).pipe(Effect.scoped),
    { timeout: 40_000 }
  )

  it.live(
    "the pid the user sees is the host itself: SIGKILL to it leaves no process behind (the extension exits on EOF)",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        const host = yield* startHost(["--data-dir", dataDir, "--settle", "1m", "--extension", hostile("plain")])
        yield* eventually(() => received(dataDir).includes("command/execute"), "the command was sent", 20_000)
        // No launcher between: this pid runs the host's program, and the extension is its own child.
        assert.include(commandLineOf(host.pid), "run-bundled.mjs")
        assert.include(commandLineOf(host.pid), "headless-host.ts")
        const extension = Number(Fs.readFileSync(Path.join(dataDir, "hostile.pid"), "utf8"))
        const family = descendants(host.pid)
        assert.include(family, extension)
        for (const pid of family) assert.notInclude(commandLineOf(pid), "headless-host.ts", `pid ${pid}`)

        process.kill(host.pid, "SIGKILL")
        yield* awaitExit(host, 5000)
        for (const pid of family) yield* awaitGone(pid, 3000)
        assert.isFalse(isAlive(extension))
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )

  it.live(
    "SIGHUP to the host's process group (a closed terminal): the SDK extension is shut down, its state saved, exit 129",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        // The HL7 example extension (SDK): hl7.anonymise counts its runs in <dataDir>/extensions/hl7-tools/state.json.
        const host = yield* startHost(["--data-dir", dataDir, "--settle", "1m", "--run", "hl7.anonymise"])
        yield* eventually(() => host.stdout().includes("editor/patchMessage ✔"), "the anonymisation", 30_000)
        process.kill(-host.pid, "SIGHUP")
        const exit = yield* awaitExit(host, 15_000)
        const stdout = host.stdout()
        assert.deepStrictEqual(exit, { code: 129, signal: null }, `${stdout}\n${host.stderr()}`)
        assert.include(stdout, "SIGHUP: shutting the extension down")
        assert.include(stdout, `→ shutdown { reason: "closing" }`)
        assert.include(stdout, "← { success: true }")
        assert.include(stdout, "✔ ok")
        const state = Path.join(dataDir, "extensions", "hl7-tools", "state.json")
        assert.strictEqual(JSON.parse(Fs.readFileSync(state, "utf8")).anonymised, 1)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
