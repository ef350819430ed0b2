/**
 * A Lifeline client against a peer that is not built on Lifeline (`test/fixtures/foreign-peer.mjs`, plain Node), over a
 * real child process's stdio: plain JSON-RPC 2.0 has no cancellation, so a timed-out call puts nothing on the wire
 * after its request; and a request with `"params": null`, as other implementations send it, is answered.
 *
 * @since 0.1.0
 */
import { assert, layer } from "@effect/vitest"
import { Cancellation, Method, Protocol } from "@lifeline/kernel"
import { NodeChildProcess } from "@lifeline/node"
import { Effect, Schema } from "effect"
import * as Fixtures from "./support/fixtures.js"
import { eventually } from "./support/processes.js"

const Slow = Method.request("slow", { params: Method.NoParams, result: Schema.Unknown })
const Poke = Method.request("poke", { params: Method.NoParams, result: Schema.String })
const Record = Method.request("record", { params: Method.NoParams, result: Schema.Array(Schema.String) })
// What the fixture asks of us, with `"params": null`: a Schema that takes no params.
const Ping = Method.request("ping", { params: Schema.Struct({}), result: Schema.Literal("pong") })

const Foreign = Protocol.make({ serves: [Ping], calls: [Slow, Poke, Record] })

const startForeign = (cancellation?: Cancellation.Cancellation) =>
  Effect.gen(function*() {
    return yield* NodeChildProcess.makePeer({
      command: yield* Fixtures.command("foreign-peer.mjs"),
      name: "foreign-peer",
      protocol: Foreign,
      handlers: { ping: () => Effect.succeed("pong" as const) },
      ...(cancellation === undefined ? {} : { cancellation })
    })
  })

layer(Fixtures.layer([]), { excludeTestServices: true, timeout: "60 seconds" })(
  "a peer not built on Lifeline",
  (it) => {
    it.effect("a timed-out call sends no $/cancelRequest; a request with params null is answered", () =>
      Effect.gen(function*() {
        const { peer } = yield* startForeign()
        const error = yield* Effect.flip(peer.call(Slow, undefined, { timeout: "200 millis" }))
        assert.strictEqual(error._tag, "RequestTimeout")
        // The fixture answers `slow` late, then asks us `ping` with `"params": null` and reports our answer.
        assert.strictEqual(yield* peer.call(Poke, undefined), `{"jsonrpc":"2.0","id":"f-1","result":"pong"}`)
        yield* eventually(() => peer.unsafeStats().lateResponses === 1, "the late answer is dropped and counted")
        assert.deepStrictEqual(yield* peer.call(Record, undefined), [
          `{"jsonrpc":"2.0","id":1,"method":"slow"}`,
          `{"jsonrpc":"2.0","id":2,"method":"poke"}`,
          `{"jsonrpc":"2.0","id":"f-1","result":"pong"}`,
          `{"jsonrpc":"2.0","id":3,"method":"record"}`
        ])
        const stats = peer.unsafeStats()
        assert.strictEqual(stats.timedOut, 1)
        assert.strictEqual(stats.requestsReceived, 1)
        assert.strictEqual(stats.invalidMessages, 0)
        assert.strictEqual(stats.unknownResponses, 0)
      }))

    it.effect("the same call with LSP's cancellation configured sends $/cancelRequest (the fixture would see it)", () =>
      Effect.gen(function*() {
        const { peer } = yield* startForeign(Cancellation.lsp)
        const error = yield* Effect.flip(peer.call(Slow, undefined, { timeout: "200 millis" }))
        assert.strictEqual(error._tag, "RequestTimeout")
        assert.deepStrictEqual(yield* peer.call(Record, undefined), [
          `{"jsonrpc":"2.0","id":1,"method":"slow"}`,
          `{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}`,
          `{"jsonrpc":"2.0","id":2,"method":"record"}`
        ])
      }))
  }
)
