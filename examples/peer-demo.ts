/**
 * Two Lifeline connections talk over an in-memory pipe: a handshake, calls both ways, a typed error, a timeout, a
 * cancellation, then a drain shutdown that lets one call finish and cuts another off at the deadline.
 *
 * Run it with `pnpm tsx examples/peer-demo.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Framing } from "@lifeline/jsonrpc"
import { Cancellation, Connection, Method, Protocol, ShutdownPolicy } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Console, Duration, Effect, Fiber, References, Schema, Stream } from "effect"

class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  code: Schema.Number,
  message: Schema.String,
  key: Schema.String
}) {}

const Initialize = Method.request("initialize", {
  params: Schema.Struct({ client: Schema.String }),
  result: Schema.Struct({ server: Schema.String })
})
const Initialized = Method.notification("initialized", { params: Schema.Struct({}) })
const Lookup = Method.request("lookup", {
  params: Schema.Struct({ key: Schema.String }),
  result: Schema.String,
  error: NotFound
})
const Work = Method.request("work", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })
const Progress = Method.notification("progress", { params: Schema.Struct({ percent: Schema.Number }) })
const WhoAreYou = Method.request("whoAreYou", { params: Schema.Struct({}), result: Schema.String })

// An interrupted call is cancelled on the wire as LSP does it, with `$/cancelRequest`.
const Server = Protocol.make({
  serves: [Initialize, Initialized, Lookup, Work],
  calls: [Progress, WhoAreYou],
  cancellation: Cancellation.lsp
})

const since = (start: number) => `${String(Date.now() - start).padStart(5)} ms`

const program = Effect.gen(function*() {
  const start = Date.now()
  const say = (line: string) => Console.log(`${since(start)}  ${line}`)
  const pair = yield* TestTransport.makePair()

  const frame = Framing.contentLength.encodeString(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize" }))
  yield* say(`a frame on the wire: ${JSON.stringify(new TextDecoder().decode(frame))}`)

  const server = yield* Connection.make({
    protocol: Server,
    transport: pair.left,
    handshake: Connection.accept("initialize", { notifications: ["initialized"], timeout: "10 seconds" }),
    policy: ShutdownPolicy.drain("1 second"),
    handlers: {
      initialize: ({ client }) => Effect.succeed({ server: `demo server, hello ${client}` }),
      initialized: () => Effect.void,
      lookup: ({ key }) =>
        key === "answer" ? Effect.succeed("42") : Effect.fail(new NotFound({ code: 404, message: `no ${key}`, key })),
      work: ({ ms }) => Effect.as(Effect.sleep(Duration.millis(ms)), ms)
    }
  })
  yield* server.lifecycle.events.pipe(
    Stream.runForEach((e) => say(`server lifecycle ${e.from._tag} → ${e.to._tag}`)),
    Effect.forkScoped
  )

  const client = yield* Connection.make({
    protocol: Protocol.flip(Server),
    transport: pair.right,
    requestTimeout: "300 millis",
    handlers: {
      progress: ({ percent }) => say(`client got progress ${percent}%`),
      whoAreYou: () => Effect.succeed("the demo client")
    },
    handshake: Connection.initiate((peer) =>
      peer.call(Initialize, { client: "demo client" }).pipe(
        Effect.tap((r) => say(`handshake answered: ${r.server}`)),
        Effect.andThen(peer.notify(Initialized, {}))
      )
    )
  })

  yield* say(`lookup answer → ${yield* client.peer.call(Lookup, { key: "answer" })}`)
  const missing = yield* Effect.flip(client.peer.call(Lookup, { key: "question" }))
  yield* say(`lookup question → typed failure ${missing._tag}: ${missing.message}`)
  yield* server.peer.notify(Progress, { percent: 50 })
  yield* say(`server asks the client who it is → ${yield* server.peer.call(WhoAreYou, {})}`)

  const slow = yield* Effect.flip(client.peer.call(Work, { ms: 1000 }))
  yield* say(`work(1000 ms) with a 300 ms timeout → ${slow._tag}`)

  const cancelled = yield* Effect.forkChild(client.peer.call(Work, { ms: 5000 }, { timeout: "10 seconds" }))
  yield* Effect.sleep("50 millis")
  yield* Fiber.interrupt(cancelled)
  yield* say(
    `interrupted a 5 s call: $/cancelRequest sent, server cancelled ${(yield* server.peer.stats).cancelledByPeer}`
  )

  const finishes = yield* Effect.forkChild(client.peer.call(Work, { ms: 200 }, { timeout: "10 seconds" }))
  const cutOff = yield* Effect.forkChild(client.peer.call(Work, { ms: 5000 }, { timeout: "10 seconds" }))
  yield* Effect.sleep("20 millis")
  yield* say("server stops under drain(1 second) with two calls in flight")
  yield* say(`server.stop() → ${yield* server.stop()}, and again → ${yield* server.stop()}`)
  yield* say(`the 200 ms call finished: ${yield* Fiber.join(finishes)}`)
  const error = yield* Effect.flip(Fiber.join(cutOff))
  yield* say(`the 5 s call was cut off: ${error._tag} (${error.message})`)
  const report = yield* server.awaitShutdown
  yield* say(
    `shutdown report: drained=${report.drained}, cut off ${
      report.cutOff.map((c) => `${c.direction} ${c.method}`).join(", ")
    }, ` +
      `took ${report.finishedAt - report.startedAt} ms`
  )
  const stats = yield* client.peer.stats
  yield* say(
    `client stats: sent ${stats.requestsSent} requests, ${stats.timedOut} timed out, ${stats.cancelledByUs} cancelled, ` +
      `${stats.lateResponses} late answers dropped`
  )
}).pipe(Effect.scoped)

program.pipe(Effect.provideService(References.MinimumLogLevel, "Warn"), NodeRuntime.runMain)
