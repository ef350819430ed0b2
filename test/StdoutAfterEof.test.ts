/**
 * The stop ladder against a child that writes to stdout after the end of its input (issue 13, item 9, found while
 * tracing the MCP reference server's exit). The close step closes the conversation, and with it the transport's
 * `incoming` stream, whose finalizer releases the stdout reader: `readable.pause()` (node `internal/streamReader.ts`,
 * `unsafeRelease`). From then until the handle's release nothing reads the child's stdout, the pipe fills (64 KiB),
 * and a child that still has more to write blocks in `write` and cannot exit at the end of its input: it needs
 * SIGTERM. A parent on `node:child_process` alone that stops listening but leaves the stream flowing (`resume()`)
 * sees the same child exit ~10 ms after the end of stdin. The stop must keep reading (and dropping) stdout from the
 * close step until the exit.
 */
import { assert, describe, it } from "@effect/vitest"
import { Framing } from "@lifeline/jsonrpc"
import { Protocol } from "@lifeline/kernel"
import { NodeChildProcess } from "@lifeline/node"
import { Effect } from "effect"
import { ChildProcess } from "effect/process"
import * as Path from "node:path"
import * as Url from "node:url"

const fixture = Path.join(Path.dirname(Url.fileURLToPath(import.meta.url)), "fixtures", "stdout-after-eof.mjs")

/** Spawns the fixture, makes one call, stops it, and says how it ended. */
const stopAfterOutput = (bytes: number) =>
  Effect.gen(function*() {
    const { child, peer } = yield* NodeChildProcess.makePeer({
      command: ChildProcess.make(process.execPath, [fixture, String(bytes)]),
      protocol: Protocol.make({}),
      handlers: {},
      framing: Framing.ndjson,
      stderrLogLevel: "None",
      onUnknownNotification: () => Effect.void,
      stop: { exitGrace: "1 second", killGrace: "1 second" }
    })
    yield* peer.callUntyped("ping")
    const start = performance.now()
    const report = yield* child.stop
    return { report, ms: performance.now() - start }
  }).pipe(Effect.scoped)

describe("the stop sequence drains stdout after the end of input", () => {
  it.live("a child that writes 4 KiB after the end of its input exits on it", () =>
    Effect.gen(function*() {
      const { ms, report } = yield* stopAfterOutput(4 * 1024)
      assert.strictEqual(report.endedBy, "EndOfInput")
      assert.deepStrictEqual(report.exit, { exitCode: 0, signal: null })
      assert.isBelow(ms, 900)
    }), 15_000)

  // Red until the node stop ladder drains stdout after the close step (today: endedBy "Terminate" after 1 s).
  it.live(
    "a child that writes 1 MiB after the end of its input exits on it, without SIGTERM",
    () =>
      Effect.gen(function*() {
        const { ms, report } = yield* stopAfterOutput(1024 * 1024)
        assert.deepStrictEqual(report.signals, [])
        assert.strictEqual(report.endedBy, "EndOfInput")
        assert.deepStrictEqual(report.exit, { exitCode: 0, signal: null })
        assert.isBelow(ms, 900)
      }),
    15_000
  )
})
