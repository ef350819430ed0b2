/**
 * The end of stdin (the host died, or closed the pipe) ends a real SDK extension by itself: one that was never
 * initialized, one that is initialized and idle (watching its host's pid), and one that is busy, which runs its
 * checklist (a drain included) within the shutdown budget first. Each is a bundled process on this test's Node.
 *
 * Only generous upper bounds are asserted here, to catch a regression to seconds; how fast the exit is, is measured,
 * not asserted (the figures are logged).
 */
import { assert, describe, it } from "@effect/vitest"
import { ShutdownPolicy } from "@lifeline/kernel"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { type Framed, spawnFramed } from "./support/framed.js"

const hello = "examples/hermes-hello.ts"
const probe = "test/fixtures/hermes-probe.ts"
const tempDir = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "hermes-eof-"))

/** Ends stdin, then waits for the exit: answers the exit and how long it took. */
const endInputAndWait = (extension: Framed) =>
  Effect.gen(function*() {
    const endedAt = extension.endInput()
    const exit = yield* Effect.promise(() => extension.exited)
    const elapsed = exit.at - endedAt
    yield* Effect.logInfo(`stdin EOF → exit: ${elapsed.toFixed(1)} ms`)
    return { code: exit.code, signal: exit.signal, elapsed }
  })

const initialize = (extension: Framed, params: Record<string, unknown>) =>
  Effect.gen(function*() {
    extension.send({ jsonrpc: "2.0", id: 1, method: "initialize", params })
    const answer = yield* extension.next((m) => m.id === 1, "the answer to initialize")
    assert.isDefined(answer.result, JSON.stringify(answer))
    extension.send({ jsonrpc: "2.0", method: "initialized" })
  })

describe("Hermes: the end of stdin ends an extension process by itself", () => {
  it.live(
    "never initialized: it exits at once, with code 0",
    () =>
      Effect.gen(function*() {
        const extension = yield* spawnFramed(hello)
        // A request before the handshake is answered (-32002): the extension is up, and still not initialized.
        extension.send({ jsonrpc: "2.0", id: 0, method: "editor/ping" })
        const refused = yield* extension.next((m) => m.id === 0, "the answer to a request before initialize")
        assert.strictEqual(refused.error?.code, -32002)
        const exit = yield* endInputAndWait(extension)
        assert.deepStrictEqual([exit.code, exit.signal], [0, null], extension.stderr())
        assert.isBelow(exit.elapsed, 1000, extension.stderr())
        assert.include(extension.stderr(), "hello ended: EndOfInput")
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )

  it.live(
    "initialized and idle, watching its host's pid: it runs the checklist (the state is saved) and exits at once",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        const extension = yield* spawnFramed(probe)
        yield* initialize(extension, { dataDir, hostPid: process.pid })
        extension.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "probe.count" } })
        yield* Effect.promise(() => waitFor(() => extension.stderr().includes("counted: 1")))
        const exit = yield* endInputAndWait(extension)
        assert.deepStrictEqual([exit.code, exit.signal], [0, null], extension.stderr())
        assert.isBelow(exit.elapsed, 1000, extension.stderr())
        assert.include(extension.stderr(), "probe ended: EndOfInput")
        assert.deepStrictEqual(
          JSON.parse(Fs.readFileSync(Path.join(dataDir, "extensions", "probe", "state.json"), "utf8")),
          { runs: 1 }
        )
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )

  for (const policy of ["fail-fast", "drain"] as const) {
    it.live(
      policy === "drain"
        ? "busy under drain: the running command is drained within the shutdown budget, then cancelled; it exits"
        : "busy under fail-fast: the running command is cancelled at once; it exits",
      () =>
        Effect.gen(function*() {
          const dataDir = tempDir()
          // A drain far longer than the SDK's shutdown budget (4 s): the budget must cut it.
          const extension = yield* spawnFramed(probe, {
            env: { [ShutdownPolicy.POLICY_VARIABLE]: policy, [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "30 seconds" }
          })
          yield* initialize(extension, { dataDir, hostPid: 0 })
          extension.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "probe.hang" } })
          const patch = yield* extension.next((m) => m.method === "editor/patchMessage", "probe.hang's patch")
          // The answer comes before the end of stdin, so the command is running (forever) when the input ends.
          extension.send({ jsonrpc: "2.0", id: patch.id, result: { applied: 1 } })
          const exit = yield* endInputAndWait(extension)
          assert.deepStrictEqual([exit.code, exit.signal], [0, null], extension.stderr())
          const stderr = extension.stderr()
          assert.include(stderr, "cancelling 1 command(s)")
          assert.include(stderr, "probe ended: EndOfInput")
          if (policy === "drain") {
            assert.include(stderr, "draining 1 command(s)")
            // The budget is 4 s, one of them kept for the cleanup.
            assert.isBelow(exit.elapsed, 6000, stderr)
          } else {
            assert.notInclude(stderr, "draining")
            assert.isBelow(exit.elapsed, 1000, stderr)
          }
        }).pipe(Effect.scoped),
      { timeout: 30_000 }
    )
  }
})

/** Polls `condition` every 5 ms, for at most 10 s. */
const waitFor = (condition: () => boolean) =>
  new Promise<void>((resolve, reject) => {
    const start = performance.now()
    const check = () => {
      if (condition()) resolve()
      else if (performance.now() - start > 10_000) reject(new Error("timed out"))
      else setTimeout(check, 5)
    }
    check()
  })
