/**
 * One service of an application, built Layer-first on a `Connection.Service`, run three ways by swapping the
 * `Transport` layer: in memory (`TestTransport.layerServe`), over a child that `NodeChildProcess.layer` spawns and
 * stops, and over the pipes of a child that someone else spawned (`NodeStream.layer`). The child is a calculator
 * written without Lifeline, in plain Node: Content-Length frames on stdin/stdout.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Peer, Transport } from "@lifeline/kernel"
import { Connection, Method, Protocol, ShutdownPolicy } from "@lifeline/kernel"
import { NodeChildProcess, NodeStream } from "@lifeline/node"
import { TestTransport } from "@lifeline/testing"
import { Context, Effect, Layer, Schema } from "effect"
import { ChildProcess } from "effect/process"
import { spawn } from "node:child_process"

// -- the application's service --------------------------------------------------------------------------------

const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
const Square = Method.request("square", { params: Schema.Struct({ n: Schema.Number }), result: Schema.Number })
const CalcProtocol = Protocol.make({ calls: [Add, Square] })

class CalcConnection extends Connection.Service<CalcConnection>()("test/LayerFirst/CalcConnection", {
  protocol: CalcProtocol
}) {}

class Calculator extends Context.Service<Calculator, {
  readonly sumOfSquares: (a: number, b: number) => Effect.Effect<number, Peer.CallError>
}>()("test/LayerFirst/Calculator") {
  static readonly layer = Layer.effect(
    Calculator,
    Effect.gen(function*() {
      const client = yield* CalcConnection.client
      return {
        sumOfSquares: (a, b) =>
          Effect.all([client.square({ n: a }), client.square({ n: b })]).pipe(
            Effect.flatMap(([x, y]) => client.add([x, y]))
          )
      }
    })
  )
}

/** The whole service (and its connection) over a transport: the only thing a deployment, or a test, chooses. */
const calculatorOver = <E>(transport: Layer.Layer<Transport.Transport, E>) =>
  Calculator.layer.pipe(
    Layer.provideMerge(CalcConnection.layer({ handlers: {}, policy: ShutdownPolicy.drain("2 seconds") })),
    Layer.provide(transport)
  )

const sumOfSquares = (a: number, b: number) => Calculator.use((calculator) => calculator.sumOfSquares(a, b))

// -- a calculator in another process ----------------------------------------------------------------------------

const calculatorScript = `
let buffer = Buffer.alloc(0)
const send = (message) => {
  const body = Buffer.from(JSON.stringify(message))
  process.stdout.write(Buffer.concat([Buffer.from("Content-Length: " + body.length + "\\r\\n\\r\\n"), body]))
}
process.stdin.on("data", (chunk) => {
  buffer = Buffer.concat([buffer, chunk])
  for (;;) {
    const end = buffer.indexOf("\\r\\n\\r\\n")
    if (end < 0) return
    const length = Number(/Content-Length: *(\\d+)/i.exec(buffer.subarray(0, end).toString())[1])
    if (buffer.length < end + 4 + length) return
    const message = JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString())
    buffer = buffer.subarray(end + 4 + length)
    if (message.id === undefined) continue
    if (message.method === "add") send({ jsonrpc: "2.0", id: message.id, result: message.params[0] + message.params[1] })
    else if (message.method === "square") send({ jsonrpc: "2.0", id: message.id, result: message.params.n ** 2 })
    else if (message.method === "pid") send({ jsonrpc: "2.0", id: message.id, result: process.pid })
    else send({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "Method not found" } })
  }
})
process.stdin.on("end", () => process.exit(0))
`

describe("Layer-first: one service, three transports", () => {
  it.effect("in memory: the far end served by TestTransport.layerServe", () =>
    Effect.gen(function*() {
      const inMemory = TestTransport.layerServe(Protocol.flip(CalcProtocol), {
        add: ([a, b]) => Effect.succeed(a + b),
        square: ({ n }) => Effect.succeed(n * n)
      })
      assert.strictEqual(yield* sumOfSquares(3, 4).pipe(Effect.provide(calculatorOver(inMemory))), 25)
    }))

  it.live("over a child that NodeChildProcess.layer spawns, and stops when the layer is released", () =>
    Effect.gen(function*() {
      const child = NodeChildProcess.layer({
        command: ChildProcess.make(process.execPath, ["-e", calculatorScript]),
        name: "calculator",
        stderrLogLevel: "None"
      })
      const [result, pid] = yield* Effect.gen(function*() {
        // Outside the protocol, through the same connection: the calculator also answers `pid`.
        const pid = yield* (yield* CalcConnection).peer.callUntyped("pid")
        return [yield* sumOfSquares(5, 12), pid as number] as const
      }).pipe(Effect.provide(calculatorOver(child)))
      assert.strictEqual(result, 169)
      // Released, the layer ran the child's stop sequence: the process is gone.
      assert.throws(() => process.kill(pid, 0))
    }))

  it.live("over the pipes of a child spawned by someone else (NodeStream.layer)", () =>
    Effect.gen(function*() {
      const child = yield* Effect.acquireRelease(
        Effect.sync(() => spawn(process.execPath, ["-e", calculatorScript], { stdio: ["pipe", "pipe", "ignore"] })),
        (child) => Effect.sync(() => child.kill("SIGKILL"))
      )
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
      const pipes = NodeStream.layer({ readable: child.stdout, writable: child.stdin, name: "calculator" })
      assert.strictEqual(yield* sumOfSquares(8, 15).pipe(Effect.provide(calculatorOver(pipes))), 289)
      // Released, the connection stopped and ended the child's stdin: the child exits by itself.
      assert.strictEqual(yield* Effect.promise(() => exited), 0)
    }).pipe(Effect.scoped))
})
