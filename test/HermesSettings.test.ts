/**
 * New settings reach a real extension process (docs/protocol.md, "initialize"): `reloadWith` shuts it down with
 * reason `reload` and starts it again with the new environment, arguments and `settings`. The Python example has no
 * settings of its own: it ignores them and keeps working.
 */
import { assert, describe, it } from "@effect/vitest"
import { ExtensionHost, HermesProtocol, MessageStore, WindowPresenter } from "@lifeline/hermes"
import type { Spawner } from "@lifeline/hermes"
import { NodeSpawner } from "@lifeline/hermes-node"
import { Effect, Option, References } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"

const root = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "..")
const python: Spawner.Spec = {
  command: "python3",
  args: [Path.join(root, "examples", "python-extension", "extension.py")],
  env: { PATH: process.env.PATH ?? "", SETTINGS_ROUND: "1" }
}
const message = "MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|42|P|2.5\rPID|1||123||DOE^JOHN||19800101"

describe("Hermes: new settings restart a real extension with them", () => {
  it.live(
    "the Python example is restarted with the new environment and settings, which it ignores",
    () =>
      Effect.gen(function*() {
        const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "hermes-settings-"))
        const store = yield* MessageStore.make(message)
        const extension = yield* ExtensionHost.start(python, {
          dataDir,
          hostPid: process.pid,
          settings: { theme: "dark" }
        }).pipe(Effect.provideService(MessageStore.MessageStore, store))
        assert.strictEqual(yield* extension.status, "Ready")
        const status = yield* extension.reloadWith({
          env: { PATH: process.env.PATH ?? "", SETTINGS_ROUND: "2" },
          settings: { theme: "light", fontSize: 14 }
        })
        assert.strictEqual(status, "Ready")
        assert.strictEqual(extension.spec.env?.SETTINGS_ROUND, "2")
        const pids = (yield* extension.history).flatMap((e) => e._tag === "Spawned" ? [e.pid] : [])
        assert.strictEqual(pids.length, 2)
        const environ = Fs.readFileSync(`/proc/${pids[1]}/environ`, "utf8").split("\0")
        assert.include(environ, "SETTINGS_ROUND=2")
        assert.include(environ, `${HermesProtocol.DATA_DIR_VARIABLE}=${dataDir}`)
        const summary = Option.getOrThrow(yield* extension.shutdown("closing"))
        assert.isTrue(summary.success)
        const history = yield* extension.history
        const started = history.flatMap((e) => e._tag === "ShutdownStarted" ? [e.reason] : [])
        assert.deepStrictEqual(started, ["reload", "closing"])
        const stderr = history.flatMap((e) => e._tag === "Exited" ? [e.stderrTail.join("\n")] : [])
        assert.include(stderr[0], "settings ignored: 1 key(s)")
        assert.include(stderr[1], "settings ignored: 2 key(s)")
      }).pipe(
        Effect.scoped,
        Effect.provide(NodeSpawner.layer()),
        Effect.provideService(WindowPresenter.WindowPresenter, { present: () => Effect.succeed({ skipped: "test" }) }),
        Effect.provideService(References.MinimumLogLevel, "Error")
      ),
    { timeout: 30_000 }
  )
})
