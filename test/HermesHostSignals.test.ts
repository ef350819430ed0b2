/**
 * A Hermes host as a user writes one (test/fixtures/hermes-signal-host.ts: `ExtensionHost.start` under
 * `NodeSignals.runMain`, nothing else) and real extension processes: the first SIGTERM sends `shutdown` (reason
 * `closing`) over a connection that is still open and runs the stop ladder before the program ends (143); a second
 * SIGTERM forces the stop of an extension that does not answer: SIGKILL at once, not after the 5 s `shutdownTimeout`
 * (exit 2). No process is left either way.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { root } from "./support/framed.js"
import { awaitGone, eventually, isAlive } from "./support/processes.js"

const runBundled = Path.join(root, "scripts", "run-bundled.mjs")
const probe = [process.execPath, runBundled, Path.join(root, "test", "fixtures", "hermes-probe.ts")]
const misbehaving = (mode: string) => [
  process.execPath,
  Path.join(root, "test", "fixtures", "hermes-misbehaving.mjs"),
  mode
]

/** The host as a child process: its stdout read as JSON lines, its stderr kept; SIGKILLed with the Scope if alive. */
const startHost = (extension: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "hermes-signal-host-"))
      const child = ChildProcess.spawn(
        process.execPath,
        [runBundled, "test/fixtures/hermes-signal-host.ts", dataDir, ...extension],
        { cwd: root, stdio: ["ignore", "pipe", "pipe"] }
      )
      const facts: Array<any> = []
      let pending = ""
      child.stdout.on("data", (chunk: Buffer) => {
        pending += chunk.toString("utf8")
        const lines = pending.split("\n")
        pending = lines.pop()!
        for (const line of lines) if (line.trim() !== "") facts.push(JSON.parse(line))
      })
      let stderr = ""
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString("utf8")
      })
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
        child.once("exit", (code, signal) => resolve({ code, signal, at: performance.now() }))
      )
      return { child, facts, stderr: () => stderr, exited }
    }),
    ({ child }) =>
      Effect.sync(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
      })
  )

describe("Hermes: a host under NodeSignals.runMain stops its extension on a signal by itself", () => {
  it.live(
    "SIGTERM: shutdown (closing) is sent and answered, the extension exits by itself, the host exits 143",
    () =>
      Effect.gen(function*() {
        const host = yield* startHost(probe)
        yield* eventually(() => host.facts.length > 0, "the extension is ready", 20_000)
        const extensionPid: number = host.facts[0].ready
        assert.isNumber(extensionPid, JSON.stringify(host.facts[0]) + host.stderr())
        const signalledAt = performance.now()
        host.child.kill("SIGTERM")
        const exit = yield* Effect.promise(() => host.exited)
        assert.deepStrictEqual([exit.code, exit.signal], [143, null], host.stderr())
        assert.isBelow(exit.at - signalledAt, 5000, host.stderr())
        const summary = host.facts.find((fact) => fact.shutdown !== undefined)?.shutdown
        assert.isDefined(summary, `${JSON.stringify(host.facts)}\n${host.stderr()}`)
        assert.deepStrictEqual(
          [summary.reason, summary.responded, summary.success, summary.killed, summary.terminated, summary.exit],
          ["closing", true, true, false, false, { exitCode: 0, signal: null }]
        )
        yield* awaitGone(extensionPid, 2000)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )

  it.live(
    "a second SIGTERM forces it: an extension that ignores shutdown gets SIGKILL at once, the host exits 2",
    () =>
      Effect.gen(function*() {
        const host = yield* startHost(misbehaving("ignore-shutdown"))
        yield* eventually(() => host.facts.length > 0, "the extension is ready", 20_000)
        const extensionPid: number = host.facts[0].ready
        assert.isNumber(extensionPid, JSON.stringify(host.facts[0]) + host.stderr())
        const signalledAt = performance.now()
        host.child.kill("SIGTERM")
        yield* Effect.sleep("500 millis")
        assert.isTrue(isAlive(extensionPid), "the first signal waits for the answer to shutdown")
        host.child.kill("SIGTERM")
        const exit = yield* Effect.promise(() => host.exited)
        assert.deepStrictEqual([exit.code, exit.signal], [2, null], host.stderr())
        // Well before the 5 s the answer to shutdown would otherwise get.
        assert.isBelow(exit.at - signalledAt, 3000, host.stderr())
        yield* awaitGone(extensionPid, 2000)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
