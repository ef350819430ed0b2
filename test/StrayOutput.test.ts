/**
 * Stray output without a line break between frames, over real pipes, in both directions (issue 25, item 2): `50%`
 * glued to the next `Content-Length:` costs its own 3 bytes, and every later frame is read. A Hermes extension that
 * prints it before each frame (test/fixtures/hermes-stray-output.mjs) is served by `ExtensionHost` in this process,
 * its `shutdown` answer included; an SDK extension (examples/hermes-hello.ts) whose host writes it before each frame
 * answers every request, `shutdown` included.
 */
import { assert, describe, it } from "@effect/vitest"
import { ExtensionHost, MessageStore, WindowPresenter } from "@lifeline/hermes"
import type { Spawner } from "@lifeline/hermes"
import { NodeSpawner } from "@lifeline/hermes-node"
import { Effect, Option, References } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { root, spawnFramed } from "./support/framed.js"

const strayOutput: Spawner.Spec = {
  command: process.execPath,
  args: [Path.join(root, "test", "fixtures", "hermes-stray-output.mjs")]
}
const message = "MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|42|P|2.5\rPID|1||123^^^HOSP||DOE^JOHN||19800101|M"
const quiet = Effect.provideService(References.MinimumLogLevel, "Error")

describe("stray output without a line break between frames, over real pipes", () => {
  it.live(
    "an extension that prints `50%` before every frame: initialize, its 20 requests and shutdown all go through",
    () =>
      Effect.gen(function*() {
        const dataDir = yield* Effect.acquireRelease(
          Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "stray-output-"))),
          (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
        )
        const store = yield* MessageStore.make(message)
        const extension = yield* ExtensionHost.start(strayOutput, { dataDir, hostPid: process.pid }).pipe(
          Effect.provideService(MessageStore.MessageStore, store),
          Effect.provide(WindowPresenter.layerRecordOnly)
        )
        // The answer to initialize came after a `50%`.
        assert.strictEqual(yield* extension.status, "Ready")
        yield* extension.execute("run")
        const resultFile = Path.join(dataDir, "stray-result.json")
        for (let waited = 0; !Fs.existsSync(resultFile); waited += 20) {
          if (waited > 10_000) assert.fail("the extension did not get its 20 answers within 10 s")
          yield* Effect.sleep("20 millis")
        }
        assert.deepStrictEqual(JSON.parse(Fs.readFileSync(resultFile, "utf8")), { answered: 20, failed: 0 })
        const served = (yield* extension.history).filter((event) => event._tag === "RequestServed")
        assert.strictEqual(served.length, 20)
        const summary = Option.getOrThrow(yield* extension.shutdown())
        assert.deepStrictEqual(
          { responded: summary.responded, success: summary.success, killed: summary.killed },
          { responded: true, success: true, killed: false }
        )
        assert.isFalse(summary.terminated)
      }).pipe(Effect.scoped, Effect.provide(NodeSpawner.layer()), quiet),
    { timeout: 30_000 }
  )

  it.live(
    "an SDK extension whose host writes `50%` before every frame: 20 requests and shutdown answered, exit 0",
    () =>
      Effect.gen(function*() {
        const extension = yield* spawnFramed("examples/hermes-hello.ts")
        const stray = (message: unknown) => {
          extension.write("50%")
          extension.send(message)
        }
        stray({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} })
        yield* extension.next((m) => m.id === 1, "the answer to initialize")
        stray({ jsonrpc: "2.0", method: "initialized" })
        // Requests the extension does not serve: each is answered, with -32601, which is all this needs.
        for (let id = 2; id <= 21; id++) stray({ jsonrpc: "2.0", id, method: "test/unknown", params: {} })
        for (let id = 2; id <= 21; id++) {
          const answer = yield* extension.next((m) => m.id === id, `the answer to request ${id}`)
          assert.strictEqual(answer.error?.code, -32601)
        }
        stray({ jsonrpc: "2.0", id: 22, method: "shutdown", params: { reason: "closing" } })
        const shutdown = yield* extension.next((m) => m.id === 22, "the answer to shutdown")
        assert.deepStrictEqual(shutdown.result?.success, true, JSON.stringify(shutdown))
        extension.endInput()
        const exit = yield* Effect.promise(() => extension.exited).pipe(
          Effect.timeoutOrElse({
            duration: "10 seconds",
            orElse: () => Effect.die(new Error(`no exit within 10 s; stderr:\n${extension.stderr()}`))
          })
        )
        assert.deepStrictEqual([exit.code, exit.signal], [0, null], extension.stderr())
        // The SDK logs each burst it skipped on stderr (the extension's log), once per burst.
        assert.include(extension.stderr(), "skipped 3 bytes from the peer that were not frames")
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )
})
