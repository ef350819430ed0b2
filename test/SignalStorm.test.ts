/**
 * A storm of SIGTERMs (bursts of 50, one every 10 ms until the process is gone) against a process under
 * `NodeSignals.runMain`: hermes-host (examples/headless-host.ts) and an extension run by `NodeExtension.runMain` (the
 * HL7 example). The handlers stay installed until the process exits, so it never dies by the signal itself (exit
 * -15): it exits with a documented code (docs/hosting.md, "Exit codes"). Which one depends on how many of the signals
 * it saw: the kernel merges a signal that arrives while the same one is still pending, so a burst of 50 may be one
 * signal to the process (143, the graceful stop finished), two (2, forced) or three and more (3, abandoned).
 */
import { assert, describe, it } from "@effect/vitest"
import { HermesProtocol } from "@lifeline/hermes"
import { Effect } from "effect"
import type * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { frame, root, spawnFramed } from "./support/framed.js"
import { spawnLines } from "./support/processes.js"

/** Bursts of 50 SIGTERMs every 10 ms until `child` has exited; answers how many were sent. */
const storm = (child: ChildProcess.ChildProcess) =>
  Effect.callback<number>((resume) => {
    let sent = 0
    const burst = () => {
      if (child.exitCode !== null || child.signalCode !== null) {
        clearInterval(timer)
        return resume(Effect.succeed(sent))
      }
      for (let i = 0; i < 50; i++) {
        try {
          process.kill(child.pid!, "SIGTERM")
          sent++
        } catch {
          // gone
        }
      }
    }
    const timer = setInterval(burst, 10)
    burst()
    return Effect.sync(() => clearInterval(timer))
  })

const exitOf = (child: ChildProcess.ChildProcess) =>
  Effect.promise(() =>
    new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        return resolve({ code: child.exitCode, signal: child.signalCode })
      }
      child.once("exit", (code, signal) => resolve({ code, signal }))
    })
  )

describe("a storm of SIGTERMs never kills a process by the signal itself", () => {
  it.live(
    "hermes-host: bursts of 50 SIGTERMs while it runs and shuts down: a documented exit code, never by signal",
    () =>
      Effect.gen(function*() {
        const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "signal-storm-"))
        const extension = `${process.execPath} ${Path.join(root, "test", "fixtures", "hermes-misbehaving.mjs")} behave`
        const host = yield* spawnLines(
          Path.join(root, "examples", "headless-host", "bin", "hermes-host"),
          ["--extension", extension, "--data-dir", dataDir, "--settle", "30s"],
          { cwd: root }
        )
        // Ready: the run waits for the extension to settle, the signal handlers are installed.
        yield* host.line((line) => line.includes("ready") ? true : undefined, () => new Error(host.stderr())).pipe(
          Effect.timeout("20 seconds")
        )
        const sent = yield* storm(host.child)
        const exit = yield* exitOf(host.child)
        assert.strictEqual(exit.signal, null, `${sent} SIGTERMs sent; ${host.stderr()}`)
        assert.include([143, 2, 3], exit.code, `${sent} SIGTERMs sent; ${host.stderr()}`)
        assert.isAbove(sent, 49)
        Fs.rmSync(dataDir, { recursive: true, force: true })
      }).pipe(Effect.scoped),
    40_000
  )

  it.live(
    "an extension under NodeExtension.runMain (HL7): bursts of 50 SIGTERMs: a documented exit code, never by signal",
    () =>
      Effect.gen(function*() {
        const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "signal-storm-"))
        const extension = yield* spawnFramed("examples/hl7-extension/main.ts", {
          env: { [HermesProtocol.DATA_DIR_VARIABLE]: dataDir }
        })
        extension.write(frame({ jsonrpc: "2.0", id: 1, method: "initialize", params: { dataDir } }))
        yield* extension.next((m) => m.id === 1, "the answer to initialize", 20_000)
        const sent = yield* storm(extension.child)
        const exit = yield* Effect.promise(() => extension.exited)
        assert.strictEqual(exit.signal, null, `${sent} SIGTERMs sent; ${extension.stderr()}`)
        assert.include([143, 2, 3], exit.code, `${sent} SIGTERMs sent; ${extension.stderr()}`)
        Fs.rmSync(dataDir, { recursive: true, force: true })
      }).pipe(Effect.scoped),
    40_000
  )
})
