/**
 * `ExtensionSession.layer` on Effect's in-memory cluster (`TestRunner`: one runner, message storage in memory) with a
 * real extension process (examples/fleet/extension.ts, run as a bundle): what an application sees through
 * `ExtensionSession.run`.
 */
import { assert, describe, it } from "@effect/vitest"
import { ExtensionSession } from "@lifeline/fleet"
import { Journal } from "@lifeline/journal"
import { Protocol } from "@lifeline/kernel"
import { Effect, Layer, Option } from "effect"
import { TestRunner } from "effect/cluster"
import * as Extension from "./support/extension.js"

const effectsFile = Extension.newEffectsFile("session")

const Sessions = ExtensionSession.layer({
  command: (sessionId) => Extension.command(sessionId, effectsFile),
  protocol: Protocol.make({ calls: [Extension.Work] }),
  run: Extension.run,
  maxIdleTime: "1 second"
})

const TestLive = Sessions.pipe(Layer.provideMerge(TestRunner.layer), Layer.provideMerge(Journal.layerMemory))

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const starts = (key: string) => Extension.starts(effectsFile, key)

describe("ExtensionSession on a cluster", () => {
  it.live(
    "runs an operation on the session's extension once; the same key is answered again without running",
    () =>
      Effect.gen(function*() {
        const reply = yield* ExtensionSession.run("s-1", { key: "s-1/op-1", kind: "work", payload: { ms: 10 } })
        assert.deepInclude(reply as object, { key: "s-1/op-1", runner: process.pid })
        const again = yield* ExtensionSession.run("s-1", { key: "s-1/op-1", kind: "work", payload: { ms: 10 } })
        assert.deepStrictEqual(again, reply)
        assert.strictEqual(starts("s-1/op-1"), 1)
        const journal = yield* Journal.Journal
        const entry = Option.getOrThrow(yield* journal.get("s-1/op-1"))
        assert.strictEqual(entry.status, "Completed")
        assert.strictEqual(entry.owner, ExtensionSession.owner("s-1"))
      }).pipe(Effect.provide(TestLive)),
    60_000
  )

  it.live(
    "a failing operation is answered with OperationFailed, recorded Failed, and not retried",
    () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(
          ExtensionSession.run("s-2", { key: "s-2/op-1", kind: "work", payload: { ms: -1 } })
        )
        assert.strictEqual(error._tag, "OperationFailed")
        if (error._tag === "OperationFailed") assert.isFalse(error.interrupted)
        const journal = yield* Journal.Journal
        assert.strictEqual(Option.getOrThrow(yield* journal.get("s-2/op-1")).status, "Failed")
        yield* Effect.sleep("500 millis")
        assert.strictEqual(starts("s-2/op-1"), 1)
      }).pipe(Effect.provide(TestLive)),
    60_000
  )

  it.live(
    "keeps the session's extension alive while idle, and stops it once closed and idle",
    () =>
      Effect.gen(function*() {
        const reply = yield* ExtensionSession.run("s-3", { key: "s-3/op-1", kind: "work", payload: { ms: 0 } })
        const pid = (reply as { pid: number }).pid
        yield* Effect.sleep("2500 millis")
        assert.isTrue(isAlive(pid), "the extension stopped while its session was open")
        yield* ExtensionSession.close("s-3")
        const start = Date.now()
        while (isAlive(pid) && Date.now() - start < 15_000) yield* Effect.sleep("100 millis")
        assert.isFalse(isAlive(pid), "the extension of a closed, idle session still runs")
      }).pipe(Effect.provide(TestLive)),
    60_000
  )
})
