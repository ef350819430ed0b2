/**
 * A Promise program and a real child process: `PromiseConnection.open` over `NodeChildProcess.layer`, a drain on
 * `close()` that lets an in-flight call finish, then the child's stop ladder; and the same under a drain too short for
 * the call, which is cut off at its deadline. No Effect in the test's own code but building the command.
 */
import { describe, expect, it } from "@effect/vitest"
import type { PeerError } from "@lifeline/kernel"
import { PromiseConnection, ShutdownPolicy } from "@lifeline/kernel"
import { NodeChildProcess } from "@lifeline/node"
import { Effect, Exit, Layer, Scope } from "effect"
import { Client, Pid, Sleep } from "./fixtures/protocol.js"
import * as Fixtures from "./support/fixtures.js"
import { isAlive } from "./support/processes.js"

const serverTransport = async () => {
  const scope = Effect.runSync(Scope.make())
  // The bundle lives as long as the test's scope, not only while the command is made.
  const command = await Effect.runPromise(
    Effect.flatMap(
      Layer.buildWithScope(Fixtures.layer(["server"]), scope),
      (programs) => Effect.provideContext(Fixtures.command("server"), programs)
    )
  )
  return {
    transport: NodeChildProcess.layer({ command, name: "server" }),
    dispose: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

const outcome = <A>(promise: Promise<A>): Promise<{ ok: A } | { error: unknown }> =>
  promise.then((ok) => ({ ok }), (error: unknown) => ({ error }))

describe("PromiseConnection with a real child process", () => {
  it("close() drains: the call in flight is answered, then the child is stopped and gone", async () => {
    const { transport, dispose } = await serverTransport()
    try {
      const connection = await PromiseConnection.open({
        protocol: Client,
        transport,
        handlers: {},
        policy: ShutdownPolicy.drain("5 seconds")
      })
      const pid = await connection.client.call(Pid, {})
      expect(isAlive(pid)).toBe(true)
      const slow = connection.client.call(Sleep, { ms: 300 })
      const report = await connection.close()
      expect(await slow).toBe(300)
      expect(report.drained).toBe(true)
      expect(report.cutOff).toEqual([])
      expect(isAlive(pid)).toBe(false)
    } finally {
      await dispose()
    }
  })

  it("a drain shorter than the call: the call fails with DrainTimeout at the deadline; the child is gone", async () => {
    const { transport, dispose } = await serverTransport()
    try {
      const connection = await PromiseConnection.open({
        protocol: Client,
        transport: transport.pipe(Layer.orDie),
        handlers: {},
        policy: ShutdownPolicy.drain("200 millis")
      })
      const pid = await connection.client.call(Pid, {})
      const slow = outcome(connection.client.call(Sleep, { ms: 20_000 }))
      const started = performance.now()
      const report = await connection.close()
      const result = await slow
      expect("error" in result && (result.error as PeerError.ShutdownError).reason).toBe("DrainTimeout")
      expect(report.drained).toBe(false)
      expect(performance.now() - started).toBeLessThan(10_000) // generous: a loaded machine
      expect(isAlive(pid)).toBe(false)
    } finally {
      await dispose()
    }
  })
})
