/**
 * A request of a batch that a teardown interrupts is reported in the ShutdownReport's `cutOff` by its id and method,
 * as a single request is (docs/peer.md, "Batches" and "Teardown"), so the "cut off" warning and a journal see it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Connection, Method, Protocol, ShutdownPolicy } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Schema } from "effect"
import { eventually, makeRaw } from "./utils.js"

const Work = Method.request("work", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })

/** A fail-fast connection that serves `work` with `work`, and the raw other side of its transport. */
const serving = (work: (params: { readonly ms: number }) => Effect.Effect<number>) =>
  Effect.gen(function*() {
    const pair = yield* TestTransport.makePair()
    const raw = yield* makeRaw(pair.right)
    const connection = yield* Connection.make({
      protocol: Protocol.make({ serves: [Work] }),
      transport: pair.left,
      handlers: { work },
      policy: ShutdownPolicy.FailFast()
    })
    return { connection, raw }
  })

describe("batch cut off", () => {
  it.effect("a request of a batch interrupted by a teardown is listed in the report's cutOff, as a single one is", () =>
    Effect.gen(function*() {
      const { connection, raw } = yield* serving(({ ms }) => Effect.as(Effect.sleep(ms), ms))
      yield* raw.send({ jsonrpc: "2.0", id: "single", method: "work", params: { ms: 60_000 } })
      yield* raw.send([{ jsonrpc: "2.0", id: "batched", method: "work", params: { ms: 60_000 } }])
      yield* eventually(Effect.map(connection.peer.stats, (s) => s.activeInbound === 2), "both run")
      yield* connection.stop()
      const report = yield* connection.awaitShutdown
      assert.sameDeepMembers([...report.cutOff], [
        { direction: "inbound", id: "single", method: "work" },
        { direction: "inbound", id: "batched", method: "work" }
      ])
    }))

  it.effect("a batch that was answered leaves nothing to report: the stop drains, nothing is cut off", () =>
    Effect.gen(function*() {
      const { connection, raw } = yield* serving(({ ms }) => Effect.succeed(ms))
      yield* raw.send([
        { jsonrpc: "2.0", id: 1, method: "work", params: { ms: 1 } },
        { jsonrpc: "2.0", id: 2, method: "work", params: { ms: 2 } }
      ])
      yield* eventually(Effect.map(connection.peer.stats, (s) => s.activeInbound === 0), "the batch was answered")
      yield* connection.stop()
      const report = yield* connection.awaitShutdown
      assert.deepStrictEqual([...report.cutOff], [])
      assert.isTrue(report.drained)
    }))
})
