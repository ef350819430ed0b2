/**
 * `PromiseConnection` from a Promise program's seat: opened and closed with `await`, Promise handlers, the policy.
 * These tests run on the live clock (a Promise program has no other) but never wait for time: nothing in them sleeps.
 * The drain's deadline, with a real child process, is in test/PromiseConnection.test.ts.
 */
import { afterEach, describe, expect, it, vi } from "@effect/vitest"
import { ErrorCode, RpcError } from "@lifeline/jsonrpc"
import {
  Cancellation,
  Connection,
  Method,
  PeerError,
  PromiseConnection,
  Protocol,
  ShutdownPolicy,
  Transport
} from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Exit, Layer, ManagedRuntime, Schema, Scope } from "effect"

class Nope extends Schema.TaggedError<Nope>()("Nope", { message: Schema.String }) {}

const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
const Hold = Method.request("hold", { params: Schema.Struct({}), result: Schema.Null })
const Greet = Method.request("greet", {
  params: Schema.Struct({ name: Schema.String }),
  result: Schema.String,
  error: Nope
})
const Note = Method.notification("note", { params: Schema.Struct({ text: Schema.String }) })

/** The far end serves `add` and `hold` (which never answers) and calls our `greet` and `note`. */
const Far = Protocol.make({ serves: [Add, Hold], calls: [Greet, Note], cancellation: Cancellation.lsp })
const Near = Protocol.flip(Far)

const disposals: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const dispose of disposals.splice(0)) await dispose()
})

/** The far end in a Scope the test owns, and the near end's transport as the Layer a program would pass. */
const farEnd = async () => {
  const scope = Effect.runSync(Scope.make())
  disposals.push(() => Effect.runPromise(Scope.close(scope, Exit.void)))
  const served = await Effect.runPromise(
    TestTransport.serve(Far, { add: ([a, b]) => Effect.succeed(a + b), hold: () => Effect.never }).pipe(
      Scope.provide(scope)
    )
  )
  return { served, transport: Layer.succeed(Transport.Transport, served.transport) }
}

const outcome = <A>(promise: Promise<A>): Promise<{ ok: A } | { error: unknown }> =>
  promise.then((ok) => ({ ok }), (error: unknown) => ({ error }))

describe("PromiseConnection", () => {
  it("opens, calls, and closes under the policy: fail-fast rejects what is in flight with ShutdownError", async () => {
    const { transport } = await farEnd()
    const connection = await PromiseConnection.open({
      protocol: Near,
      transport,
      handlers: { greet: ({ name }) => `hello, ${name}`, note: () => {} },
      policy: ShutdownPolicy.FailFast()
    })
    expect(await connection.client.call(Add, [1, 2])).toBe(3)
    const held = outcome(connection.client.call(Hold, {}))
    const report = await connection.close()
    expect(report.policy._tag).toBe("FailFast")
    expect(report.reason).toBe("Stop")
    const result = await held
    expect("error" in result && result.error).toBeInstanceOf(PeerError.ShutdownError)
    expect(await connection.closed).toBe(report)
    expect(await connection.close()).toBe(report) // idempotent: the same report
  })

  it("Promise handlers answer: a result, a typed error, an RpcError; any other rejection is -32603", async () => {
    const { served, transport } = await farEnd()
    let noted: (text: string) => void = () => {}
    const note = new Promise<string>((resolve) => noted = resolve)
    const logged = vi.spyOn(console, "log")
    const errors = vi.spyOn(console, "error")
    const connection = await PromiseConnection.open({
      protocol: Near,
      transport,
      handlers: {
        greet: async ({ name }) => {
          if (name === "typed") throw new Nope({ message: "no" })
          if (name === "rpc") throw RpcError.make(-32042, "refused")
          if (name === "bug") throw new Error("a bug with a secret detail")
          return `hello, ${name}`
        },
        note: ({ text }) => noted(text)
      },
      policy: ShutdownPolicy.FailFast()
    })
    const greet = (name: string) => Effect.runPromise(Effect.flip(served.peer.call(Greet, { name })))
    expect(await Effect.runPromise(served.peer.call(Greet, { name: "you" }))).toBe("hello, you")
    expect(await greet("typed")).toBeInstanceOf(Nope)
    const rpc = await greet("rpc")
    expect(rpc).toBeInstanceOf(RpcError.RpcError)
    expect((rpc as RpcError.RpcError).code).toBe(-32042)
    const bug = await greet("bug")
    expect((bug as RpcError.RpcError).code).toBe(ErrorCode.InternalError)
    expect((bug as RpcError.RpcError).message).not.toContain("secret")
    await Effect.runPromise(served.peer.notify(Note, { text: "noted" }))
    expect(await note).toBe("noted")
    // The handler's defect was logged, on stderr (console.error), never on the program's stdout (console.log).
    expect(errors.mock.calls.some((args) => args.some((arg) => String(arg).includes("handler greet died")))).toBe(true)
    expect(logged).not.toHaveBeenCalled()
    logged.mockRestore()
    errors.mockRestore()
    await connection.close()
  })

  it("a cancelled request aborts its handler's signal", async () => {
    const { served, transport } = await farEnd()
    let aborted: (reason: unknown) => void = () => {}
    const abortedWith = new Promise<unknown>((resolve) => aborted = resolve)
    let started: () => void = () => {}
    const startedHandler = new Promise<void>((resolve) => started = resolve)
    const connection = await PromiseConnection.open({
      protocol: Near,
      transport,
      handlers: {
        greet: (_, { signal }) =>
          new Promise<string>(() => {
            signal.addEventListener("abort", () => aborted(signal.reason))
            started()
          }),
        note: () => {}
      },
      policy: ShutdownPolicy.FailFast()
    })
    const call = outcome(Effect.runPromise(served.peer.call(Greet, { name: "slow" }, { timeout: "10 millis" })))
    await startedHandler
    await abortedWith // the far end timed out and sent $/cancelRequest: our handler's fiber was interrupted
    const result = await call
    expect("error" in result && result.error).toBeInstanceOf(PeerError.RequestTimeout)
    await connection.close()
  })

  it("a transport that cannot be built rejects open with its error, and leaves nothing running", async () => {
    const refused = await outcome(PromiseConnection.open({
      protocol: Near,
      transport: Layer.effect(Transport.Transport, Effect.fail(new Error("no such server"))),
      handlers: { greet: () => "", note: () => {} }
    }))
    expect("error" in refused && (refused.error as Error).message).toBe("no such server")
  })

  it("closeNow cuts a drain short: what the drain was waiting for fails with ShutdownError Forced", async () => {
    const { transport } = await farEnd()
    const connection = await PromiseConnection.open({
      protocol: Near,
      transport,
      handlers: { greet: () => "", note: () => {} },
      policy: ShutdownPolicy.drain("1 hour")
    })
    const held = outcome(connection.client.call(Hold, {}))
    const closing = connection.close() // drains: would wait an hour for `hold`
    const report = await connection.closeNow()
    expect(await closing).toBe(report)
    const result = await held
    expect("error" in result && (result.error as PeerError.ShutdownError).reason).toBe("Forced")
  })
})

// docs/peer.md, "With a ManagedRuntime, stop the connections before you dispose".
describe("a connection in a ManagedRuntime", () => {
  const Gate = Method.request("gate", { params: Schema.Struct({}), result: Schema.String })
  const GateServer = Protocol.make({ serves: [Gate] })
  class GateConnection extends Connection.Service<GateConnection>()("test/GateConnection", {
    protocol: Protocol.flip(GateServer)
  }) {}

  const runtimeWith = (opened: Promise<void>) =>
    ManagedRuntime.make(
      GateConnection.layer({ handlers: {}, policy: ShutdownPolicy.drain("1 hour") }).pipe(
        Layer.provide(
          TestTransport.layerServe(GateServer, { gate: () => Effect.as(Effect.promise(() => opened), "open") })
        )
      )
    )

  it("stopped before dispose: the call in flight drains and is answered", async () => {
    let open: () => void = () => {}
    const runtime = runtimeWith(new Promise((resolve) => open = resolve))
    const connection = await runtime.runPromise(Effect.gen(function*() {
      return yield* GateConnection
    }))
    const call = outcome(runtime.runPromise(connection.peer.call(Gate, {})))
    await runtime.runPromise(Effect.yieldNow)
    const stopping = runtime.runPromise(connection.stop())
    open()
    expect(await stopping).toBe("Stopped")
    expect(await call).toEqual({ ok: "open" })
    await runtime.dispose()
  })

  it("disposed alone: the caller is interrupted, not answered and not given a ShutdownError", async () => {
    const runtime = runtimeWith(new Promise(() => {}))
    const connection = await runtime.runPromise(Effect.gen(function*() {
      return yield* GateConnection
    }))
    const call = outcome(runtime.runPromise(connection.peer.call(Gate, {})))
    await runtime.runPromise(Effect.yieldNow)
    await runtime.dispose()
    const result = await call
    expect("error" in result).toBe(true)
    expect((result as { error: unknown }).error).not.toBeInstanceOf(PeerError.ShutdownError)
  })
})
