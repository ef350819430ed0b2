/**
 * An SDK extension (examples/hermes-hello.ts through `NodeExtension.runMain`) as a real process whose host sends a
 * frame it cannot read: the connection fails, the checklist runs, and the process exits with code 1, not 0, so whoever
 * started it sees a failure. The end of stdin, by contrast, is a normal end (code 0; see HermesEof.test.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnFramed } from "./support/framed.js"

describe("Hermes: a fatal framing error ends an SDK extension with a failure", () => {
  it.live(
    "a Content-Length over the frame limit: exit code 1, outcome Failed",
    () =>
      Effect.gen(function*() {
        const extension = yield* spawnFramed("examples/hermes-hello.ts")
        extension.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} })
        yield* extension.next((m) => m.id === 1, "the answer to initialize")
        extension.send({ jsonrpc: "2.0", method: "initialized" })
        // stdin stays open: the extension ends because of the frame, not because the host went away.
        extension.write("Content-Length: 99999999999\r\n\r\n")
        const exit = yield* Effect.promise(() => extension.exited).pipe(
          Effect.timeoutOrElse({
            duration: "10 seconds",
            orElse: () => Effect.die(new Error(`no exit within 10 s; stderr:\n${extension.stderr()}`))
          })
        )
        assert.deepStrictEqual([exit.code, exit.signal], [1, null], extension.stderr())
        assert.include(extension.stderr(), "hello ended: Failed")
        assert.include(extension.stderr(), "the connection to the host failed")
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )
})
