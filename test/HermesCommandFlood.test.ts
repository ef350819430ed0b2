/**
 * An SDK extension as a real process (test/fixtures/hermes-commands.ts, bundled) against what a host can throw at it
 * and what its environment can get wrong: a flood of `command/execute` notifications is bounded (16 run, 64 wait, the
 * rest refused and counted, the process stays small); a SIGTERM runs its checklist while the connection to the host is
 * still open, so a draining command still reaches the host, and a second one cuts the drain short; an invalid shutdown
 * policy in its environment makes it say so and exit 1 instead of silently running fail-fast.
 */
import { assert, describe, it } from "@effect/vitest"
import { ShutdownPolicy } from "@lifeline/kernel"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { frame, type Framed, spawnFramed } from "./support/framed.js"

const commands = "test/fixtures/hermes-commands.ts"
const tempDir = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "hermes-commands-"))

/** The resident set size of `pid` in MiB (Linux), or NaN where /proc is not there. */
const rssMiB = (pid: number): number => {
  try {
    const status = Fs.readFileSync(`/proc/${pid}/status`, "latin1")
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]) / 1024
  } catch {
    return NaN
  }
}

const initialize = (extension: Framed, dataDir: string) =>
  Effect.gen(function*() {
    extension.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { dataDir, hostPid: 0 } })
    const answer = yield* extension.next((m) => m.id === 1, "the answer to initialize")
    assert.strictEqual(answer.result?.name, "commands", JSON.stringify(answer))
    extension.send({ jsonrpc: "2.0", method: "initialized" })
  })

describe("Hermes: an SDK extension process under a flood, a signal, a bad environment", () => {
  it.live(
    "100,000 command/execute notifications: 16 run, 64 wait, 99,920 are refused and counted; RSS stays bounded",
    () =>
      Effect.gen(function*() {
        const flood = 100_000
        const extension = yield* spawnFramed(commands)
        yield* initialize(extension, tempDir())
        const pid = extension.child.pid!
        const atRest = rssMiB(pid)

        // One write of every frame, then `shutdown`: the extension reads them in order, so the answer comes once
        // every notification has been handled.
        const one = frame({ jsonrpc: "2.0", method: "command/execute", params: { command: "commands.wait" } })
        const startedAt = performance.now()
        extension.write(Buffer.concat(Array.from({ length: flood }, () => one)))
        extension.send({ jsonrpc: "2.0", id: 2, method: "shutdown", params: { reason: "closing" } })
        let peak = atRest
        const sampler = setInterval(() => {
          const now = rssMiB(pid)
          if (now > peak) peak = now
        }, 20)
        const answer = yield* extension.next((m) => m.id === 2, "the answer to shutdown", 60_000).pipe(
          Effect.ensuring(Effect.sync(() => clearInterval(sampler)))
        )
        const elapsed = performance.now() - startedAt
        assert.deepStrictEqual(answer.result, { success: true }, extension.stderr())
        extension.endInput()
        const exit = yield* Effect.promise(() => extension.exited)
        assert.deepStrictEqual([exit.code, exit.signal], [0, null], extension.stderr())
        yield* Effect.logInfo(
          `flood of ${flood}: answered in ${elapsed.toFixed(0)} ms, RSS ${atRest.toFixed(0)} MiB at rest, ` +
            `${peak.toFixed(0)} MiB at the peak`
        )

        const stderr = extension.stderr()
        // 16 running and 64 waiting were accepted; every other one was refused and counted. The running ones were
        // cancelled at shutdown, the waiting ones never started: 80 cancelled.
        assert.include(stderr, "commands ended: Shutdown", stderr.slice(-2000))
        assert.include(stderr, `refusedCommands=${flood - 80}`, stderr.slice(-2000))
        assert.include(stderr, "cancelled=80", stderr.slice(-2000))
        // Logged once for the burst, not once per notification.
        const refusalLines = stderr.split("\n").filter((line) => line.includes("refused"))
        assert.isAtMost(refusalLines.length, 3, refusalLines.slice(0, 5).join("\n"))
        assert.include(stderr, "command \\\"commands.wait\\\" refused: 16 command(s) run and 64 wait")
        // Unbounded, the same flood took the process to 1.75 GB. Generous: the bound is on the extension's own
        // holdings, while the peer still handles each notification on its way in.
        if (!Number.isNaN(peak)) assert.isBelow(peak, 256, `peak RSS ${peak.toFixed(0)} MiB`)
        assert.isBelow(elapsed, 60_000)
      }).pipe(Effect.scoped),
    { timeout: 90_000 }
  )

  it.live(
    "SIGTERM runs the checklist while the connection is open: a draining command still reaches the host, then 143",
    () =>
      Effect.gen(function*() {
        const extension = yield* spawnFramed(commands, {
          env: { [ShutdownPolicy.POLICY_VARIABLE]: "drain", [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "3 seconds" }
        })
        yield* initialize(extension, tempDir())
        extension.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "commands.late" } })
        // The command is asleep (500 ms) when the signal comes: the drain waits for it, with the connection open.
        yield* Effect.sleep("100 millis")
        const signalledAt = performance.now()
        extension.child.kill("SIGTERM")
        const patch = yield* extension.next((m) => m.method === "editor/patchMessage", "the command's request", 10_000)
        assert.deepStrictEqual(patch.params, { patches: [{ path: "MSH-3", value: "LATE" }] })
        extension.send({ jsonrpc: "2.0", id: patch.id, result: { applied: 1 } })
        const exit = yield* Effect.promise(() => extension.exited)
        assert.deepStrictEqual([exit.code, exit.signal], [143, null], extension.stderr())
        assert.include(extension.stderr(), "late: patched (1 applied)")
        assert.include(extension.stderr(), "draining 1 command(s)")
        assert.isBelow(exit.at - signalledAt, 4000, extension.stderr())
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )

  it.live(
    "a second SIGTERM cuts the checklist's drain short: the command is cancelled at once, exit 2",
    () =>
      Effect.gen(function*() {
        const extension = yield* spawnFramed(commands, {
          env: { [ShutdownPolicy.POLICY_VARIABLE]: "drain", [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "30 seconds" }
        })
        yield* initialize(extension, tempDir())
        extension.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "commands.wait" } })
        yield* Effect.sleep("100 millis")
        const signalledAt = performance.now()
        extension.child.kill("SIGTERM")
        yield* Effect.sleep("300 millis")
        assert.isNull(extension.child.exitCode, "draining after the first signal")
        extension.child.kill("SIGTERM")
        const exit = yield* Effect.promise(() => extension.exited)
        assert.deepStrictEqual([exit.code, exit.signal], [2, null], extension.stderr())
        // The drain would last the shutdown budget (3 s of its 4 s); forced, it ends at once.
        assert.isBelow(exit.at - signalledAt, 2000, extension.stderr())
        assert.include(extension.stderr(), "cancelling 1 command(s)")
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )

  it.live(
    "an invalid LIFELINE_SHUTDOWN_POLICY: the extension says which variable and why, and exits 1 before initialize",
    () =>
      Effect.gen(function*() {
        for (
          const [env, variable] of [
            [{ [ShutdownPolicy.POLICY_VARIABLE]: "drian" }, ShutdownPolicy.POLICY_VARIABLE],
            [
              { [ShutdownPolicy.POLICY_VARIABLE]: "drain", [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "soon" },
              ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE
            ]
          ] as const
        ) {
          const extension = yield* spawnFramed(commands, { env })
          extension.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { dataDir: tempDir() } })
          const exit = yield* Effect.promise(() => extension.exited)
          const stderr = extension.stderr()
          assert.deepStrictEqual([exit.code, exit.signal], [1, null], stderr)
          const line = stderr.split("\n").find((l) => l.includes("cannot start"))
          assert.isDefined(line, stderr)
          assert.include(line, "the shutdown policy in the environment is invalid")
          assert.include(line, variable)
          assert.isFalse(extension.received.some((m) => m.id === 1), "initialize was never answered")
        }
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )
})
