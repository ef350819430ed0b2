/**
 * A peer that sends requests and never reads the answers, against a real Lifeline process
 * (test/fixtures/flow-server.ts, bundled): 200,000 small `echo` requests written at once to its stdin while its stdout
 * is never read. The answers waiting to be written stay within `maxPendingAnswers` (its reader holds the next request
 * and stops reading), its RSS stays bounded, and after `stallTimeout` (2 s here) the connection ends as unresponsive
 * and the process exits.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { frame, root } from "./support/framed.js"

/** The resident set size of `pid` in MiB (Linux), or NaN where /proc is not there. */
const rssMiB = (pid: number): number => {
  try {
    const status = Fs.readFileSync(`/proc/${pid}/status`, "latin1")
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]) / 1024
  } catch {
    return NaN
  }
}

const REQUESTS = 200_000
const STALL_MS = 2_000
/**
 * Generous: the answers bound (4096 answers, ~1.8 KB each) and the bytes read ahead of the held request are a few
 * tens of MiB at most; without the bound, 200,000 waiting answers took this process up by ~400 MiB.
 */
const MAX_GROWTH_MIB = 120

describe("A peer that never reads its answers", () => {
  it.live(
    `${REQUESTS} requests, stdout never read: RSS stays bounded and the stall bound ends the connection`,
    () =>
      Effect.gen(function*() {
        const child = ChildProcess.spawn(
          process.execPath,
          [Path.join(root, "scripts", "run-bundled.mjs"), "test/fixtures/flow-server.ts"],
          {
            cwd: root,
            // stdout is a pipe nobody reads: once its 64 KiB are full, every write of the server waits.
            stdio: ["pipe", "pipe", "pipe"],
            env: { ...process.env, LIFELINE_STALL_TIMEOUT: `${STALL_MS} millis` }
          }
        )
        yield* Effect.addFinalizer(() => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL")))
        let stderr = ""
        child.stderr.on("data", (chunk: Buffer) => {
          stderr += chunk.toString("utf8")
        })
        child.stdin.on("error", () => {})
        const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
          child.once("exit", (code, signal) => resolve({ code, signal, at: performance.now() }))
        )
        const pid = child.pid!
        for (let waited = 0; !stderr.includes("ready"); waited += 10) {
          if (waited > 15_000 || child.exitCode !== null) assert.fail(`never ready; stderr:\n${stderr}`)
          yield* Effect.sleep("10 millis")
        }
        const atRest = rssMiB(pid)

        const frames = Buffer.concat(
          Array.from(
            { length: REQUESTS },
            (_, i) => frame({ jsonrpc: "2.0", id: i + 1, method: "echo", params: { text: "hi" } })
          )
        )
        const startedAt = performance.now()
        child.stdin.write(frames)
        let peak = atRest
        const sampler = setInterval(() => {
          const now = rssMiB(pid)
          if (now > peak) peak = now
        }, 20)
        const exit = yield* Effect.promise(() => exited).pipe(
          Effect.timeout("20 seconds"),
          Effect.ensuring(Effect.sync(() => clearInterval(sampler)))
        )
        const elapsed = exit.at - startedAt
        yield* Effect.logInfo(
          `${REQUESTS} requests (${(frames.length / 1024 / 1024).toFixed(1)} MiB), never read: exited ` +
            `${exit.code}/${exit.signal} after ${elapsed.toFixed(0)} ms; RSS ${atRest.toFixed(0)} MiB at rest, ` +
            `${peak.toFixed(0)} MiB at the peak`
        )
        const stats = /stats: reason=(\w+) received=(\d+) readsHeld=(\d+) unresponsive=(\d+)/.exec(stderr)
        assert.isNotNull(stats, stderr.slice(-3000))
        const [, reason, received, readsHeld, unresponsive] = stats!
        assert.strictEqual(reason, "Failed")
        assert.strictEqual(unresponsive, "1")
        assert.strictEqual(readsHeld, "1")
        // Reading stopped at the bound: most of the requests were never read.
        assert.isBelow(Number(received), REQUESTS / 10, stderr.slice(-3000))
        assert.include(stderr, "unresponsive")
        // Not before the stall bound, and not long after it (start-up of the flood, teardown, exit).
        assert.isAtLeast(elapsed, STALL_MS)
        assert.isBelow(elapsed, STALL_MS + 8_000)
        assert.isBelow(peak - atRest, MAX_GROWTH_MIB, `RSS grew from ${atRest} to ${peak} MiB`)
        assert.strictEqual(exit.signal, null)
      }).pipe(Effect.scoped),
    30_000
  )
})
