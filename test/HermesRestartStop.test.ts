/**
 * A shutdown that arrives while the host restarts a crashed extension, with real processes: the relaunch that has
 * not answered `initialize` yet is stopped without a `shutdown` request, at once, not after the 10 s initialize bound
 * (docs/protocol.md, "Restarts"). The extension is test/fixtures/hermes-restart-hang.mjs: it crashes after its first
 * start, and every later start never answers `initialize`.
 */
import { assert, describe, it } from "@effect/vitest"
import { ExtensionHost, MessageStore, WindowPresenter } from "@lifeline/hermes"
import type { Spawner } from "@lifeline/hermes"
import { NodeSpawner } from "@lifeline/hermes-node"
import { Effect, Option, References } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import { eventually, isAlive } from "./support/processes.js"

const fixture = Path.join(Path.dirname(Url.fileURLToPath(import.meta.url)), "fixtures", "hermes-restart-hang.mjs")
const message = "MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|42|P|2.5\rPID|1||123||DOE^JOHN||19800101"

const run = (mode: "exits" | "stubborn") =>
  Effect.gen(function*() {
    const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "hermes-restart-stop-"))
    const spec: Spawner.Spec = { command: process.execPath, args: [fixture, Path.join(dataDir, "marker"), mode] }
    const store = yield* MessageStore.make(message)
    const extension = yield* ExtensionHost.start(spec, {
      dataDir,
      hostPid: process.pid,
      exitGrace: "300 millis",
      killGrace: "300 millis"
    }).pipe(Effect.provideService(MessageStore.MessageStore, store))
    // The first start crashes just after `initialized`; the relaunch is sent `initialize` and never answers it.
    yield* extension.awaitStatus((s) => s === "Starting")
    let relaunched = false
    yield* eventually(() => relaunched, "the relaunch was spawned").pipe(
      Effect.raceFirst(Effect.forever(Effect.andThen(
        Effect.map(extension.history, (h) => (relaunched = h.some((e) => e._tag === "Spawned" && e.generation === 2))),
        Effect.sleep("5 millis")
      )))
    )
    const history = yield* extension.history
    const pid = history.flatMap((e) => e._tag === "Spawned" && e.generation === 2 ? [e.pid] : [])[0]!
    yield* Effect.sleep("200 millis") // it has read `initialize` by now
    const start = performance.now()
    const summary = Option.getOrThrow(yield* extension.shutdown("closing"))
    const elapsed = performance.now() - start
    process.stderr.write(`HermesRestartStop (${mode}): shutdown during the restart took ${elapsed.toFixed(1)} ms\n`)
    const exits = (yield* extension.history).filter((e) => e._tag === "Exited")
    const stderr = exits.flatMap((e) => e._tag === "Exited" && e.generation === 2 ? e.stderrTail : []).join("\n")
    return { summary, elapsed, pid, stderr, status: yield* extension.status }
  }).pipe(
    Effect.scoped,
    Effect.provide(NodeSpawner.layer()),
    Effect.provideService(WindowPresenter.WindowPresenter, { present: () => Effect.succeed({ skipped: "test" }) }),
    Effect.provideService(References.MinimumLogLevel, "Error")
  )

describe("Hermes: a shutdown during a restart, with real processes", () => {
  it.live(
    "the relaunch that has not answered initialize ends with its input at once: no shutdown request",
    () =>
      Effect.gen(function*() {
        const { elapsed, pid, status, stderr, summary } = yield* run("exits")
        assert.deepStrictEqual([summary.responded, summary.killed, summary.terminated], [false, false, false], stderr)
        assert.deepStrictEqual(summary.exit, { exitCode: 0, signal: null })
        assert.isBelow(elapsed, 2000, "not the 10 s initialize bound")
        assert.include(stderr, "got initialize")
        assert.include(stderr, "end of input")
        assert.notInclude(stderr, "got shutdown")
        assert.isFalse(isAlive(pid))
        assert.strictEqual(status, "Stopped")
      }),
    { timeout: 30_000 }
  )

  it.live(
    "one that ignores the end of its input and SIGTERM is killed within the 5 s bound",
    () =>
      Effect.gen(function*() {
        const { elapsed, pid, status, stderr, summary } = yield* run("stubborn")
        assert.deepStrictEqual([summary.responded, summary.terminated, summary.killed], [false, true, true], stderr)
        assert.deepStrictEqual(summary.exit, { exitCode: null, signal: "SIGKILL" })
        assert.isBelow(elapsed, 5000)
        assert.include(stderr, "SIGTERM ignored")
        assert.notInclude(stderr, "got shutdown")
        assert.isFalse(isAlive(pid))
        assert.strictEqual(status, "Stopped")
      }),
    { timeout: 30_000 }
  )
})
