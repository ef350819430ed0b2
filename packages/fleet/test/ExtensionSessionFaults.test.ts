/**
 * Faults of a session on Effect's in-memory cluster (`TestRunner`) with real extension processes
 * (examples/fleet/extension.ts, run as a bundle): a session id no journal owner can have, a command that cannot be
 * spawned or throws, an extension that crashes, a key reused for another operation. None of them may hold up the
 * runner's other sessions.
 */
import { assert, describe, it } from "@effect/vitest"
import { ExtensionSession } from "@lifeline/fleet"
import { Journal } from "@lifeline/journal"
import { Protocol } from "@lifeline/kernel"
import { Effect, Layer, Option } from "effect"
import { TestRunner } from "effect/cluster"
import { ChildProcess } from "effect/process"
import * as Extension from "./support/extension.js"

const effectsFile = Extension.newEffectsFile("faults")

let spawnsOfBad = 0
const Sessions = ExtensionSession.layer({
  command: (sessionId) => {
    if (sessionId.startsWith("missing-")) return ChildProcess.make("/nonexistent/lifeline-fleet-extension")
    if (sessionId.startsWith("throws-")) throw new Error("no command for this session")
    if (!sessionId.startsWith("ok-")) spawnsOfBad++
    return Extension.command(sessionId, effectsFile)
  },
  protocol: Protocol.make({ calls: [Extension.Work] }),
  run: Extension.run,
  maxRestarts: 2,
  restartBackoff: "200 millis",
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

/** Sends around `ExtensionSession.run` (its checks): what an older client, or a hand-made message, would send. */
const sendRaw = (sessionId: string, key: string) =>
  Effect.flatMap(
    ExtensionSession.ExtensionSession.client,
    (clientFor) => clientFor(sessionId).Run(new ExtensionSession.Operation({ key, kind: "work", payload: { ms: 0 } }))
  )

describe("ExtensionSession faults", () => {
  it.live(
    "a session id no journal owner can have is answered with a typed error at once, and other sessions run",
    () =>
      Effect.gen(function*() {
        for (const id of ["bad\u0001id", "x".repeat(242)]) {
          const error = yield* Effect.flip(sendRaw(id, `${id.slice(0, 8)}/op-1`)).pipe(Effect.timeout("20 seconds"))
          assert.strictEqual(error._tag, "OperationFailed")
          if (error._tag === "OperationFailed") assert.include(error.reason, "invalid session id")
        }
        const reply = yield* ExtensionSession.run("ok-1", { key: "ok-1/op-1", kind: "work", payload: { ms: 0 } }).pipe(
          Effect.timeout("30 seconds")
        )
        assert.deepInclude(reply as object, { key: "ok-1/op-1" })
        assert.strictEqual(spawnsOfBad, 0, "an extension was spawned for a bad session id")
      }).pipe(Effect.provide(TestLive)),
    60_000
  )

  it.live(
    "a command that does not exist, or throws, fails the operation with ExtensionUnavailable, and other sessions run",
    () =>
      Effect.gen(function*() {
        const started = Date.now()
        for (const sessionId of ["missing-1", "throws-1"]) {
          const error = yield* Effect.flip(
            ExtensionSession.run(sessionId, { key: `${sessionId}/op-1`, kind: "work", payload: { ms: 0 } })
          ).pipe(Effect.timeout("20 seconds"))
          assert.strictEqual(error._tag, "ExtensionUnavailable")
          if (error._tag === "ExtensionUnavailable") assert.strictEqual(error.reason, "SpawnFailed")
        }
        assert.isBelow(Date.now() - started, 10_000)
        // The session started its child once when it started and twice more (after 200 ms, then 400 ms) for its
        // first two operations: with maxRestarts 2 the budget is then spent, and operations fail at once.
        const reasons: Array<string> = []
        for (let i = 2; i <= 4; i++) {
          const error = yield* Effect.flip(
            ExtensionSession.run("missing-1", { key: `missing-1/op-${i}`, kind: "work", payload: { ms: 0 } })
          )
          reasons.push(error._tag === "ExtensionUnavailable" ? error.reason : error._tag)
        }
        assert.deepStrictEqual(reasons, ["SpawnFailed", "RestartBudgetSpent", "RestartBudgetSpent"])
        const journal = yield* Journal.Journal
        assert.strictEqual(Option.getOrThrow(yield* journal.get("missing-1/op-1")).status, "Failed")
        // The same key is answered again, from the journal, with the same typed error.
        const again = yield* Effect.flip(
          ExtensionSession.run("missing-1", { key: "missing-1/op-1", kind: "work", payload: { ms: 0 } })
        )
        assert.strictEqual(again._tag, "ExtensionUnavailable")
        const reply = yield* ExtensionSession.run("ok-2", { key: "ok-2/op-1", kind: "work", payload: { ms: 0 } })
        assert.deepInclude(reply as object, { key: "ok-2/op-1" })
      }).pipe(Effect.provide(TestLive)),
    60_000
  )

  it.live(
    "an extension that crashed is started again at the session's next operation",
    () =>
      Effect.gen(function*() {
        const first = yield* ExtensionSession.run("ok-3", { key: "ok-3/op-1", kind: "work", payload: { ms: 0 } })
        const pid = (first as { pid: number }).pid
        process.kill(pid, "SIGKILL")
        while (isAlive(pid)) yield* Effect.sleep("50 millis")
        yield* Effect.sleep("200 millis")
        const second = yield* ExtensionSession.run("ok-3", { key: "ok-3/op-2", kind: "work", payload: { ms: 0 } })
        assert.notStrictEqual((second as { pid: number }).pid, pid)
      }).pipe(Effect.provide(TestLive)),
    60_000
  )

  it.live(
    "a key reused with another payload or kind is refused with KeyReused; the same operation is answered again",
    () =>
      Effect.gen(function*() {
        const first = yield* ExtensionSession.run("ok-4", { key: "ok-4/op-1", kind: "work", payload: { ms: 0 } })
        const same = yield* ExtensionSession.run("ok-4", { key: "ok-4/op-1", kind: "work", payload: { ms: 0 } })
        assert.deepStrictEqual(same, first)
        const otherPayload = yield* Effect.flip(
          ExtensionSession.run("ok-4", { key: "ok-4/op-1", kind: "work", payload: { ms: 1 } })
        )
        assert.strictEqual(otherPayload._tag, "KeyReused")
        const otherKind = yield* Effect.flip(
          ExtensionSession.run("ok-4", { key: "ok-4/op-1", kind: "other", payload: { ms: 0 } })
        )
        assert.strictEqual(otherKind._tag, "KeyReused")
      }).pipe(Effect.provide(TestLive)),
    60_000
  )
})
