/**
 * The bound of the fail-fast path with a real child: the fail-fast stop of a child's connection (every pending call
 * failed, the transport ended) is over within 500 ms with 1,000 calls pending; the child then exits by itself at the
 * end of its input (docs/protocol.md, "Where
 * Lifeline differs from the specification, and why"; docs/lifecycle.md, "stop"). A correctness bound, not a speed
 * figure: the measured time is written to stderr for the record.
 */
import { assert, layer } from "@effect/vitest"
import { Connection, PeerError, ShutdownPolicy } from "@lifeline/kernel"
import { NodeChildProcess } from "@lifeline/node"
import { Effect, Exit, Fiber, Scope } from "effect"
import { Client, Pid, Sleep } from "./fixtures/protocol.js"
import * as Fixtures from "./support/fixtures.js"
import { awaitGone, eventually } from "./support/processes.js"

const pendingCalls = 1000
const boundMillis = 500

layer(Fixtures.layer(["server"]), { excludeTestServices: true, timeout: "60 seconds" })("FailFastStopBound", (it) => {
  it.effect(`fail-fast: the child's whole stop with ${pendingCalls} calls pending is over within ${boundMillis} ms`, () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { child, connection, stop } = yield* NodeChildProcess.makeConnection({
        command: yield* Fixtures.command("server"),
        protocol: Client,
        handlers: {},
        handshake: Connection.initiate((peer) => peer.call(Pid, {})),
        policy: ShutdownPolicy.FailFast(),
        requestTimeout: "1 minute"
      }).pipe(Scope.provide(scope))
      const pid = child.pid
      const calls = yield* Effect.forkChild(
        Effect.forEach(
          Array.from({ length: pendingCalls }, () => 60_000),
          (ms) => Effect.flip(connection.peer.call(Sleep, { ms })),
          { concurrency: "unbounded" }
        )
      )
      let pending = 0
      yield* eventually(() => pending === pendingCalls, `${pendingCalls} calls pending`).pipe(
        Effect.raceFirst(Effect.forever(Effect.andThen(
          Effect.map(connection.peer.stats, (s) => (pending = s.pendingOutbound)),
          Effect.sleep("5 millis")
        )))
      )
      // The child has them too: it answers a call sent after them only once it has read them all.
      assert.strictEqual(yield* connection.peer.call(Pid, {}), pid)
      // The bound is the fail-fast stop of the connection: every caller has its error and the transport has ended.
      const start = performance.now()
      assert.strictEqual(yield* connection.stop(), "Stopped")
      const elapsed = performance.now() - start
      // Then the child's whole stop: it exits by itself at the end of its input, bounded by the ladder (`exitGrace`).
      const report = yield* stop
      const whole = performance.now() - start
      const shutdown = yield* connection.awaitShutdown
      process.stderr.write(
        `FailFastStopBound: fail-fast stop with ${pendingCalls} calls pending took ${elapsed.toFixed(1)} ms ` +
          `(bound ${boundMillis} ms; the child gone after ${whole.toFixed(1)} ms, ended by ${report.endedBy})\n`
      )
      assert.isBelow(elapsed, boundMillis)
      assert.isAtMost(shutdown.finishedAt - shutdown.startedAt, boundMillis)
      // Every caller has its error, the shutdown error of a stop (not a timeout, not a closed peer).
      const errors = yield* Fiber.join(calls)
      assert.strictEqual(errors.length, pendingCalls)
      assert.isTrue(errors.every((e) => e instanceof PeerError.ShutdownError && e.reason === "Stop"))
      assert.strictEqual(shutdown.cutOff.length, pendingCalls)
      assert.strictEqual((yield* connection.lifecycle.state)._tag, "Closed")
      // The child ended by itself at the end of its input: no signal was needed.
      assert.strictEqual(report.endedBy, "EndOfInput")
      assert.deepStrictEqual(report.signals, [])
      yield* awaitGone(pid, 1000)
      yield* Scope.close(scope, Exit.void)
    }))
})
