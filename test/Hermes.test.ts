/**
 * The headless Hermes host (examples/headless-host.ts) against real extension processes: the HL7 example extension
 * built with the SDK, and hand-written ones that misbehave. Every run is a real `hermes-host --json` process, some of
 * them SIGKILLed to leave an orphan extension for the next run to reap. Then `ExtensionHost` in this process, over the
 * Node wiring (`NodeSpawner.layer()` from `@lifeline/hermes-node`), against SDK extensions as real processes:
 * notifications during requests, restarts after crashes, and an extension whose host dies without closing its stdin.
 */
import { assert, describe, it } from "@effect/vitest"
import { ExtensionHost, Hl7, MessageStore, WindowPresenter } from "@lifeline/hermes"
import type { Spawner } from "@lifeline/hermes"
import { NodeSpawner } from "@lifeline/hermes-node"
import { Deferred, Effect, Layer, Option, References, Result } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import { awaitGone, eventually, isAlive } from "./support/processes.js"

const root = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "..")
// tsx's command line, run by this test's Node (node_modules/.bin/tsx is a shell shim around a shim).
const tsxCli = Path.join(root, "node_modules", "tsx", "dist", "cli.mjs")
const host = Path.join(root, "examples", "headless-host.ts")
// The extension's command line names this test's Node: a bare `node` would be whichever one PATH finds first.
const misbehaving = (mode: string) =>
  `${process.execPath} ${Path.join(root, "test", "fixtures", "hermes-misbehaving.mjs")} ${mode}`

interface Run {
  readonly code: number | null
  readonly report: any
  readonly stderr: string
  readonly elapsedMs: number
}

const runHost = (args: ReadonlyArray<string>, dataDir: string) =>
  Effect.callback<Run>((resume) => {
    const startedAt = Date.now()
    const child = ChildProcess.execFile(
      process.execPath,
      [tsxCli, host, "--json", "--data-dir", dataDir, ...args],
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

/**
 * `hermes-host --json` as one node process (not the tsx launcher, which would survive a SIGKILL as a parent), with
 * the `linger` extension, kept busy by a long --settle; SIGKILLed with the Scope. Answers it once the extension is
 * up: the fixture writes its pid when initialize arrives, which the host sends after it recorded the spawn.
 */
const startLingering = (dataDir: string) =>
  Effect.gen(function*() {
    const pidFile = Path.join(dataDir, "linger.pid")
    const readPid = () => Fs.existsSync(pidFile) ? Number(Fs.readFileSync(pidFile, "utf8")) : NaN
    Fs.rmSync(pidFile, { force: true })
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(
          process.execPath,
          ["--import", "tsx", host, "--json", "--data-dir", dataDir, "--extension", misbehaving("linger")]
            .concat(["--settle", "1 minute"]),
          { cwd: root, stdio: "ignore" }
        )
      ),
      (child) => Effect.sync(() => child.kill("SIGKILL"))
    )
    yield* eventually(() => readPid() > 0, "the extension is up", 20_000)
    const extension = readPid()
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        if (isAlive(extension)) process.kill(extension, "SIGKILL")
      })
    )
    return { host: child, extension, readPid }
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

  it.live(
    "an error answer to shutdown is reported (shutdown-error, exit code 1), and the process still terminated",
    () =>
      Effect.gen(function*() {
        const { code, report } = yield* runHost(["--extension", misbehaving("error-shutdown")], tempDir())
        // A shutdown that failed is not ok (the extension may have lost its state): the run says so.
        assert.strictEqual(report.outcome, "shutdown-error")
        assert.strictEqual(code, 1)
        assert.isTrue(report.shutdown.responded)
        assert.isFalse(report.shutdown.success)
        assert.strictEqual(report.shutdown.error, "-32000 Shutdown failed: disk full")
        // It ignores SIGTERM too, so SIGKILL ends it.
        assert.deepStrictEqual(report.exit, { code: null, signal: "SIGKILL" })
      }),
    { timeout: 60_000 }
  )

  it.live("an extension that crashes mid-command: crashed, with its exit code", () =>
    Effect.gen(function*() {
      const { report } = yield* runHost(["--extension", misbehaving("crash")], tempDir())
      assert.strictEqual(report.outcome, "crashed")
      assert.deepStrictEqual(report.exit, { code: 3, signal: null })
      assert.isNull(report.shutdown)
    }), { timeout: 60_000 })

  it.live(
    "--run of a command the extension did not announce: listed in refused, exit code 1, outcome still ok",
    () =>
      Effect.gen(function*() {
        const { code, report, stderr } = yield* runHost(
          ["--extension", misbehaving("plain"), "--run", "nope", "--run", "run", "--settle", "100 millis"],
          tempDir()
        )
        assert.strictEqual(report.outcome, "ok", stderr)
        assert.strictEqual(code, 1)
        assert.deepStrictEqual(report.refused, [
          { command: "nope", reason: "UnknownCommand", detail: "the extension did not announce it in initialize" }
        ])
        // The other command still ran.
        assert.include(methods(report), "editor/getMessage")
        assert.isTrue(report.shutdown.success)
      }),
    { timeout: 60_000 }
  )

  it.live(
    "an extension that outlives its SIGKILLed host is reaped by the next host on the same data dir",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        const { extension: orphan, host: crashed, readPid } = yield* startLingering(dataDir)
        crashed.kill("SIGKILL")
        yield* awaitGone(crashed.pid!, 5000)
        assert.isTrue(isAlive(orphan), "the extension outlived its host")

        const { code, report, stderr } = yield* runHost(
          ["--extension", misbehaving("linger"), "--run", "run", "--settle", "100 millis"],
          dataDir
        )
        assert.strictEqual(report.outcome, "ok", stderr)
        assert.strictEqual(code, 0)
        assert.isFalse(isAlive(orphan), "reaped")
        assert.deepStrictEqual(report.journal, {
          file: Path.join(dataDir, "lifeline", "journal.db"),
          recording: true,
          warning: null
        })
        assert.deepStrictEqual(report.reaped.map((r: any) => [r.pid, r.outcome, r.detail]), [[orphan, "Killed", null]])
        assert.include(report.reaped[0].command.join(" "), "hermes-misbehaving.mjs linger")
        // Reaped before this run spawned its own extension, which it stopped and recorded as ended.
        const spawnedAt = report.events.find((e: any) => e.type === "Spawned").atMs
        assert.isAtMost(report.reaped[0].atMs, spawnedAt)
        assert.notStrictEqual(readPid(), orphan)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )

  it.live(
    "a journal that cannot be opened: the host warns and runs the extension without recording it",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        Fs.writeFileSync(Path.join(dataDir, "lifeline"), "a file where the journal's directory should be")
        const { code, report, stderr } = yield* runHost(["--extension", misbehaving("plain")], dataDir)
        assert.strictEqual(report.outcome, "ok", stderr)
        assert.strictEqual(code, 0)
        assert.isFalse(report.journal.recording)
        assert.include(report.journal.warning, "cannot open the journal")
        assert.include(stderr, "not recorded")
      }),
    { timeout: 60_000 }
  )

  it.live(
    "a second host on the data dir of a running one records nothing and leaves the first one's extension alone",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        const first = yield* startLingering(dataDir)
        const { code, report, stderr } = yield* runHost(
          ["--extension", misbehaving("plain"), "--settle", "100 millis"],
          dataDir
        )
        assert.strictEqual(report.outcome, "ok", stderr)
        assert.strictEqual(code, 0)
        assert.isFalse(report.journal.recording)
        assert.include(report.journal.warning, `another hermes-host (pid ${first.host.pid})`)
        assert.include(stderr, "not recorded")
        assert.deepStrictEqual(report.reaped, [])
        assert.isTrue(isAlive(first.extension), "the first host's extension is not an orphan")
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )

  it.live("junk on stdout and a flood on stderr do not derail the host", () =>
    Effect.gen(function*() {
      const { report } = yield* runHost(["--extension", misbehaving("junk")], tempDir())
      assert.strictEqual(report.outcome, "ok")
      assert.include(methods(report), "editor/getMessage")
      assert.isTrue(report.shutdown.success)
    }), { timeout: 60_000 })
})

// -- ExtensionHost in this process, SDK extensions as real processes ------------------------------------------------

/** The SDK extension of test/fixtures/hermes-probe.ts, run as a cached bundle (it starts in well under a second). */
const probeArgv = [
  Path.join(root, "scripts", "run-bundled.mjs"),
  Path.join(root, "test", "fixtures", "hermes-probe.ts")
]
const probe: Spawner.Spec = { command: process.execPath, args: probeArgv }
const hl7: Spawner.Spec = { command: Path.join(root, "examples", "hl7-extension", "bin", "hl7-extension") }
const message = "MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|42|P|2.5\rPID|1||123^^^HOSP||DOE^JOHN||19800101|M"

const field = (text: string, path: string) =>
  Result.match(Hl7.parse(text), { onFailure: () => undefined, onSuccess: (m) => Hl7.get(m, path) })

type Event = ExtensionHost.Event
const ofTag = <T extends Event["_tag"]>(events: ReadonlyArray<Event>, tag: T) =>
  events.filter((e): e is Extract<Event, { _tag: T }> => e._tag === tag)

/** The host's lifecycle lines and the crash warnings these tests provoke are expected: only errors are printed. */
const quiet = Effect.provideService(References.MinimumLogLevel, "Error")

/** Waits until the status leaves `Ready` (a crash), then until it is `Ready` or `Failed` again. */
const afterCrash = (extension: ExtensionHost.Extension) =>
  Effect.gen(function*() {
    yield* extension.awaitStatus((s) => s !== "Ready")
    return yield* extension.awaitStatus((s) => s === "Ready" || s === "Failed")
  }).pipe(
    Effect.timeoutOrElse({ duration: "15 seconds", orElse: () => Effect.fail("no restart within 15 s") }),
    Effect.orDie
  )

/**
 * `node <argv>` with pipes this test holds: Content-Length frames in on stdin, out on stdout (collected in
 * `received`), stderr kept. Killed with the Scope if still running.
 */
const spawnFramed = (argv: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = ChildProcess.spawn(process.execPath, argv, { cwd: root, stdio: ["pipe", "pipe", "pipe"] })
      const received: Array<any> = []
      let buffer = Buffer.alloc(0)
      child.stdout.on("data", (chunk: Buffer) => {
        buffer = Buffer.concat([buffer, chunk])
        for (;;) {
          const end = buffer.indexOf("\r\n\r\n")
          if (end < 0) return
          const length = Number(/Content-Length: *(\d+)/i.exec(buffer.subarray(0, end).toString("ascii"))?.[1])
          if (buffer.length < end + 4 + length) return
          received.push(JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString("utf8")))
          buffer = buffer.subarray(end + 4 + length)
        }
      })
      let stderr = ""
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString("utf8")
      })
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.once("exit", (code, signal) => resolve({ code, signal }))
      )
      const send = (message: unknown) => {
        const body = Buffer.from(JSON.stringify(message), "utf8")
        child.stdin.write(Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, "ascii"), body]))
      }
      return { child, received, stderr: () => stderr, exited, send }
    }),
    ({ child }) =>
      Effect.sync(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
      })
  )

describe("Hermes: ExtensionHost and SDK extensions as real processes", () => {
  it.live(
    "window/closed reaches the extension while it waits for editor/patchMessage (docs/protocol.md)",
    () =>
      Effect.gen(function*() {
        const inner = yield* MessageStore.make(message)
        const order: Array<string> = []
        const patchPending = yield* Deferred.make<void>()
        const closedHandled = yield* Deferred.make<void>()
        // The host answers the first patch only once the extension has reacted to `window/closed` (its MSH-4 mark),
        // and the window closes only once that patch is pending: `window/closed` travels between the request and its
        // answer every time. An extension that read nothing but answers while it waits would never react.
        const store: MessageStore.MessageStore.Service = {
          ...inner,
          patch: (patches) =>
            patches[0]?.path === "MSH-4"
              ? inner.patch(patches).pipe(
                Effect.tap(() => Effect.sync(() => order.push("window/closed handled"))),
                Effect.tap(() => Deferred.succeed(closedHandled, void 0))
              )
              : Effect.gen(function*() {
                order.push("patch received")
                yield* Deferred.succeed(patchPending, void 0)
                yield* Deferred.await(closedHandled).pipe(Effect.timeoutOption("4 seconds"))
                const applied = yield* inner.patch(patches)
                order.push("patch answered")
                return applied
              })
        }
        const windows: WindowPresenter.WindowPresenter.Service = {
          present: () => Effect.as(Deferred.await(patchPending), { skipped: "closed while a patch is pending" })
        }
        const extension = yield* ExtensionHost.start(probe, { dataDir: tempDir(), hostPid: process.pid }).pipe(
          Effect.provideService(MessageStore.MessageStore, store),
          Effect.provideService(WindowPresenter.WindowPresenter, windows)
        )
        assert.strictEqual(yield* extension.status, "Ready")
        yield* extension.execute("probe.patchWhileWindowCloses")
        yield* Deferred.await(closedHandled).pipe(Effect.timeout("8 seconds"))
        yield* extension.awaitQuiet("200 millis")
        const summary = yield* extension.shutdown("closing")
        assert.isTrue(Option.isSome(summary) && summary.value.success)

        assert.deepStrictEqual(order, ["patch received", "window/closed handled", "patch answered"])
        const history = yield* extension.history
        const closedAt = history.findIndex((e) => e._tag === "WindowClosed")
        const patches = history.flatMap((e, i) =>
          e._tag === "RequestServed" && e.method === "editor/patchMessage" ? [{ i, ok: e.ok }] : []
        )
        // Sent by the host before the answer to the pending patch, which is served last.
        assert.deepStrictEqual(patches.map((p) => p.ok), [true, true])
        assert.isAbove(closedAt, -1)
        assert.isBelow(closedAt, patches[1].i)
        // Both edits were applied: the pending patch was not lost or confused with the notification.
        const after = yield* inner.current
        assert.strictEqual(field(after, "PID-5.1"), "PATCHED")
        assert.strictEqual(field(after, "MSH-4"), "WINDOW-CLOSED")
        // The extension's own log: the window closed before its patch call returned.
        const stderr = ofTag(history, "Exited")[0].stderrTail.join("\n")
        const closedLine = stderr.indexOf("window window-1 closed")
        assert.isAbove(closedLine, -1, stderr)
        assert.isBelow(closedLine, stderr.indexOf("patch answered: 1 applied"), stderr)
      }).pipe(Effect.scoped, Effect.provide(NodeSpawner.layer()), quiet),
    { timeout: 30_000 }
  )

  it.live(
    "a crash is restarted within the budget; killed mid-command once more, it stays Failed and the host healthy",
    () =>
      Effect.gen(function*() {
        const store = yield* MessageStore.make(message)
        const dataDir = tempDir()
        const extension = yield* ExtensionHost.start(probe, {
          dataDir,
          hostPid: process.pid,
          restart: { maxRestarts: 1, within: "1 minute" }
        }).pipe(Effect.provideService(MessageStore.MessageStore, store))
        assert.strictEqual(yield* extension.status, "Ready")
        const firstPid = ofTag(yield* extension.history, "Spawned")[0].pid!

        // 1. A crash of its own (exit code 1 in the middle of a command): restarted, a new process, commands work.
        yield* extension.execute("probe.crash")
        assert.strictEqual(yield* afterCrash(extension), "Ready")
        let history = yield* extension.history
        assert.deepStrictEqual(
          ofTag(history, "Exited").map((e) => ({ generation: e.generation, status: e.status, expected: e.expected })),
          [{ generation: 1, status: { exitCode: 1, signal: null }, expected: false }]
        )
        assert.deepStrictEqual(ofTag(history, "Restarting").map((e) => [e.restart, e.maxRestarts]), [[1, 1]])
        assert.deepStrictEqual(ofTag(history, "Initializing").map((e) => e.generation), [1, 2])
        assert.deepStrictEqual(ofTag(history, "Ready").map((e) => e.generation), [1, 2])
        const secondPid = ofTag(history, "Spawned")[1].pid!
        assert.notStrictEqual(secondPid, firstPid)
        assert.isFalse(isAlive(firstPid))
        yield* extension.execute("probe.sign")
        yield* eventually(
          () => field(Effect.runSync(store.current), "MSH-3") === `PROBE-${secondPid}`,
          "the restarted extension signed the message"
        )

        // 2. Killed from outside (SIGKILL) in the middle of a command: the budget is spent, so it stays Failed.
        yield* extension.execute("probe.hang")
        yield* eventually(
          () => field(Effect.runSync(store.current), "MSH-5") === `HANGING-${secondPid}`,
          "the restarted extension is running probe.hang"
        )
        process.kill(secondPid, "SIGKILL")
        assert.strictEqual(yield* afterCrash(extension), "Failed")
        history = yield* extension.history
        assert.deepStrictEqual(ofTag(history, "Exited")[1].status, { exitCode: null, signal: "SIGKILL" })
        assert.include(ofTag(history, "Failed")[0].reason, "restart budget (1) is exhausted")
        assert.lengthOf(ofTag(history, "Spawned"), 2)
        const refused = yield* Effect.flip(extension.execute("probe.sign"))
        assert.strictEqual(refused.reason, "NotReady")
        assert.isTrue(Option.isNone(yield* extension.shutdown("closing")))
        assert.strictEqual(yield* extension.status, "Failed")

        // 3. The host is unharmed: it serves another extension, which shuts down cleanly.
        const other = yield* ExtensionHost.start(hl7, { dataDir, hostPid: process.pid }).pipe(
          Effect.provideService(MessageStore.MessageStore, store)
        )
        assert.strictEqual(yield* other.status, "Ready")
        yield* other.execute("hl7.anonymise")
        yield* eventually(
          () => field(Effect.runSync(store.current), "PID-5.1") === "ANONYMOUS",
          "the other extension anonymised the message"
        )
        yield* other.awaitQuiet("200 millis")
        const summary = yield* other.shutdown("closing")
        assert.isTrue(Option.isSome(summary) && summary.value.success && !summary.value.killed)
        assert.strictEqual(yield* extension.status, "Failed")
      }).pipe(Effect.scoped, Effect.provide(Layer.merge(NodeSpawner.layer(), WindowPresenter.layerRecordOnly)), quiet),
    {
      timeout: 60_000
    }
  )

  it.live(
    "an extension whose host exits without closing its stdin notices by the pid, persists its state, exits",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        // The "host" is a throwaway process; this test holds the extension's stdin open, as an orphaned grandchild
        // that inherited the pipe would.
        const host = yield* Effect.acquireRelease(
          Effect.sync(() => ChildProcess.spawn("sleep", ["60"], { stdio: "ignore" })),
          (child) => Effect.sync(() => child.kill("SIGKILL"))
        )
        const extension = yield* spawnFramed(probeArgv)
        extension.send({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { hermesVersion: "test", protocolVersion: "1.0", dataDir, hostPid: host.pid! }
        })
        yield* eventually(() => extension.received.some((m) => m.id === 1), "the answer to initialize")
        assert.strictEqual(extension.received[0].result.name, "probe")
        extension.send({ jsonrpc: "2.0", method: "initialized" })
        extension.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "probe.count" } })
        yield* eventually(() => extension.stderr().includes("counted: 1"), "the command ran")
        assert.isNull(extension.child.exitCode, "alive while its host is")

        const killedAt = performance.now()
        host.kill("SIGKILL")
        const exit = yield* Effect.promise(() => extension.exited)
        const elapsed = performance.now() - killedAt
        assert.deepStrictEqual(exit, { code: 0, signal: null }, extension.stderr())
        // NodeStdio.awaitHostExit looks every 250 ms; the checklist takes milliseconds.
        assert.isBelow(elapsed, 4000)
        assert.include(extension.stderr(), `the host (pid ${host.pid}) exited without closing the connection`)
        assert.include(extension.stderr(), "ended: HostExited")
        const stateFile = Path.join(dataDir, "extensions", "probe", "state.json")
        assert.deepStrictEqual(JSON.parse(Fs.readFileSync(stateFile, "utf8")), { runs: 1 })
        assert.deepStrictEqual(Fs.readdirSync(Path.dirname(stateFile)), ["state.json"])
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )
})
