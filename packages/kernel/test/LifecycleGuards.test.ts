/**
 * What the guards of `Lifecycle` guarantee, at the edges mutation testing found untested (`pnpm mutate
 * packages/kernel/src/Lifecycle.ts`): the replay boundary of `events` and `changes` under any interleaving of a
 * subscriber and the transitions, the messages of its errors, and the guards of `runHandshake`.
 */
import { assert, describe, it } from "@effect/vitest"
import { ErrorCode } from "@lifeline/jsonrpc"
import { Lifecycle } from "@lifeline/kernel"
import { Effect, Fiber, References, Stream } from "effect"

describe("Lifecycle guards", () => {
  describe("the replay boundary", () => {
    // A subscriber that yields to other fibers every few steps of its own (MaxOpsBeforeYield 4), started `k` steps
    // before three transitions that yield between them: for some `k` a transition lands between the subscription and
    // the snapshot of the history, which is where an event could be seen twice or lost.
    for (const stream of ["events", "changes"] as const) {
      it.effect(`${stream}: every transition exactly once, whatever the interleaving`, () =>
        Effect.gen(function*() {
          for (let k = 0; k < 60; k++) {
            const seen = yield* Effect.scoped(Effect.gen(function*() {
              const lifecycle = yield* Lifecycle.make
              const collecting = yield* Effect.forkChild(
                (stream === "events"
                  ? Stream.runCollect(Stream.map(lifecycle.events, (e) => e.to._tag))
                  : Stream.runCollect(Stream.map(lifecycle.changes, (s) => s._tag))).pipe(
                    Effect.provideService(References.MaxOpsBeforeYield, 4)
                  )
              )
              for (let i = 0; i < k; i++) yield* Effect.yieldNow
              yield* lifecycle.transition(Lifecycle.Ready())
              yield* Effect.yieldNow
              yield* lifecycle.beginStop("Stop")
              yield* Effect.yieldNow
              yield* lifecycle.transition(Lifecycle.Closed())
              return Array.from(yield* Fiber.join(collecting))
            }))
            if (stream === "events") assert.deepStrictEqual(seen, ["Ready", "Closing", "Closed"], `k = ${k}`)
            else {
              // `changes` starts with the state current when it subscribed, then each later one, each once.
              const all = ["Starting", "Ready", "Closing", "Closed"]
              assert.deepStrictEqual(seen, all.slice(all.indexOf(seen[0])), `k = ${k}`)
            }
          }
        }))
    }
  })

  describe("gates", () => {
    it("a second handshake once Ready: -32600, saying which method and why", () => {
      const error = Lifecycle.inboundGate(Lifecycle.Ready(), "initialize", true)
      assert.strictEqual(error?.code, ErrorCode.InvalidRequest)
      assert.strictEqual(error?.data, "initialize: the handshake has already completed")
    })

    it("outbound while Closing: the reason is the stop's, with a detail only when the stop was not a plain one", () => {
      const stop = Lifecycle.outboundGate(Lifecycle.Closing({ reason: "Stop" }))
      assert.deepStrictEqual([stop?.reason, stop?.phase, stop?.detail], ["Stop", "Closing", undefined])
      const remote = Lifecycle.outboundGate(Lifecycle.Closing({ reason: "RemoteShutdown" }))
      assert.deepStrictEqual([remote?.reason, remote?.phase, remote?.detail], ["Stop", "Closing", "RemoteShutdown"])
      const interrupted = Lifecycle.outboundGate(Lifecycle.Closing({ reason: "Interrupted" }))
      assert.deepStrictEqual([interrupted?.reason, interrupted?.detail], ["Interrupted", undefined])
    })
  })

  it.effect("runHandshake runs the handshake in a span named for it, with its timeout", () =>
    Effect.gen(function*() {
      const lifecycle = yield* Lifecycle.make
      const span = yield* Lifecycle.runHandshake(lifecycle, Effect.orDie(Effect.currentSpan), "3 seconds")
      assert.strictEqual(span.name, "Lifecycle.runHandshake")
      assert.strictEqual(span.attributes.get("timeoutMillis"), 3000)
    }).pipe(Effect.scoped))
})
