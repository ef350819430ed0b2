import { assert, describe, it } from "@effect/vitest"
import { Editor, Extension, ExtensionHost, MessageStore, Spawner, WindowPresenter } from "@lifeline/hermes"
import { TestSpawner } from "@lifeline/hermes/testing"
import { Deferred, Effect, Option } from "effect"
import { adjust, eventually, makeMemoryFs } from "./utils.js"

const sample = "MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|42|P|2.5\rPID|1||123||DOE^JOHN||19800101"
const spec: Spawner.Spec = { command: "long-extension" }
const options: ExtensionHost.Options = { dataDir: "/data", hermesVersion: "test", hostPid: 1 }

describe("ExtensionHost commands", () => {
  // docs/protocol.md, "command/execute": a command may take as long as it needs; neither side bounds it.
  it.effect("a command running past 10 s is untouched: no timeout on either side, it finishes at 60 s", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const spawner = yield* TestSpawner.make(() =>
        Extension.run(Extension.make({
          name: "long",
          version: "1.0.0",
          commands: {
            "long.run": {
              title: "Work for a minute",
              run: () =>
                Effect.gen(function*() {
                  yield* Deferred.succeed(started, void 0)
                  yield* Effect.sleep("60 seconds")
                  yield* Editor.patchMessage([{ path: "PID-5.1", value: "DONE" }])
                })
            }
          }
        })).pipe(Effect.provide(makeMemoryFs().layer))
      )
      const store = yield* MessageStore.make(sample)
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        yield* extension.execute("long.run")
        yield* Deferred.await(started)
        // Past the initialize bound (10 s), the shutdown bound (5 s) and a call's default timeout (5 s): untouched.
        for (const step of ["5 seconds", "6 seconds", "30 seconds", "18 seconds"] as const) {
          yield* adjust(step)
          assert.strictEqual(yield* extension.status, "Ready")
          assert.notInclude(yield* store.current, "DONE")
        }
        const history = (yield* extension.history).map((e) => e._tag)
        assert.notInclude(history, "Exited")
        assert.notInclude(history, "ShutdownStarted")
        assert.deepStrictEqual((yield* spawner.spawned).length, 1)
        yield* adjust("1 second")
        yield* eventually(Effect.map(store.current, (m) => m.includes("DONE^JOHN")), "the command finished at 60 s")
        assert.strictEqual(yield* extension.status, "Ready")
        assert.isTrue(Option.getOrThrow(yield* extension.shutdown("closing")).success)
      }).pipe(
        Effect.provideService(Spawner.Spawner, spawner),
        Effect.provideService(MessageStore.MessageStore, store),
        Effect.provideService(WindowPresenter.WindowPresenter, { present: () => Effect.succeed({ skipped: "test" }) })
      )
    }))
})
