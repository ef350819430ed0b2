/**
 * The reason a Scope closes with reaches the calls its stop cuts off, with a real child (`fixtures/server.ts`) on
 * `NodeChildProcess.makeConnection` and `makePeer`: `Stop` for a plain close, `Interrupted` for a Scope closed by an
 * interruption (`Scope.close(scope, Exit.interrupt())`, an interrupted `Effect.scoped` fiber), as the kernel's own
 * `Connection.make` and `Peer.make` report it (docs/lifecycle.md, docs/peer.md "Teardown").
 */
import { assert, layer } from "@effect/vitest"
import { PeerError, PromiseClient, type Protocol } from "@lifeline/kernel"
import { NodeChildProcess } from "@lifeline/node"
import { Deferred, Effect, Exit, Fiber, Scope } from "effect"
import { Client, Sleep } from "./fixtures/protocol.js"
import * as Fixtures from "./support/fixtures.js"
import { isAlive } from "./support/processes.js"

const start = (kind: "connection" | "peer") =>
  Effect.gen(function*() {
    const command = yield* Fixtures.command("server")
    const options = { command, name: "server", protocol: Client, handlers: {}, requestTimeout: "1 minute" } as const
    return kind === "connection"
      ? yield* Effect.map(NodeChildProcess.makeConnection(options), ({ child, connection }) => ({
        child,
        peer: connection.peer
      }))
      : yield* NodeChildProcess.makePeer(options)
  })

const described = (error: unknown) => {
  assert.instanceOf(error, PeerError.ShutdownError)
  const { phase, reason } = error as PeerError.ShutdownError
  return { reason, phase }
}

layer(Fixtures.layer(["server"]), { excludeTestServices: true, timeout: "60 seconds" })(
  "ShutdownScopeReason: a real child's calls are told how its Scope closed",
  (it) => {
    const cases = [
      { kind: "connection", exit: Exit.void, expected: { reason: "Stop", phase: "Closing" } },
      { kind: "connection", exit: Exit.interrupt(), expected: { reason: "Interrupted", phase: "Closing" } },
      { kind: "peer", exit: Exit.void, expected: { reason: "Stop", phase: "Scope" } },
      { kind: "peer", exit: Exit.interrupt(), expected: { reason: "Interrupted", phase: "Scope" } }
    ] as const
    for (const { exit, expected, kind } of cases) {
      const how = Exit.isSuccess(exit) ? "Exit.void" : "Exit.interrupt()"
      it.effect(`${kind}, Scope.close(${how}): ${expected.reason}, and the child is gone`, () =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const { child, peer } = yield* start(kind).pipe(Scope.provide(scope))
          // A Promise caller, as an app outside Effect would be: it is still waiting when the Scope closes.
          const pending = PromiseClient.make(peer).call(Sleep, { ms: 60_000 }).catch((error: unknown) => error)
          yield* Effect.sleep("100 millis")
          yield* Scope.close(scope, exit)
          assert.deepStrictEqual(described(yield* Effect.promise(() => pending)), expected)
          assert.isFalse(isAlive(child.pid))
        }))
    }

    it.effect("an interrupted Effect.scoped fiber: Interrupted", () =>
      Effect.gen(function*() {
        const started = yield* Deferred.make<
          { readonly peer: PromiseClient.PromiseClient<Protocol.Calls<typeof Client>> }
        >()
        const fiber = yield* Effect.forkChild(Effect.scoped(Effect.gen(function*() {
          const { peer } = yield* start("connection")
          yield* Deferred.succeed(started, { peer: PromiseClient.make(peer) })
          return yield* Effect.never
        })))
        const { peer } = yield* Deferred.await(started)
        const pending = peer.call(Sleep, { ms: 60_000 }).catch((error: unknown) => error)
        yield* Effect.sleep("100 millis")
        yield* Fiber.interrupt(fiber)
        assert.deepStrictEqual(described(yield* Effect.promise(() => pending)), {
          reason: "Interrupted",
          phase: "Closing"
        })
      }))
  }
)
