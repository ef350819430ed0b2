/**
 * What real hosts send, to real SDK extensions (examples/hermes-hello.ts and the probe fixture, bundled, on this
 * test's Node), byte for byte: the protocol's own `initialize` example (`"params": {}`), an `initialize` without params,
 * and `shutdown` with a reason the protocol does not name, with `{}`, and without params (docs/protocol.md).
 */
import { assert, describe, it } from "@effect/vitest"
import { HermesProtocol } from "@lifeline/hermes"
import { Effect, Schema } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { spawnFramed } from "./support/framed.js"

const hello = "examples/hermes-hello.ts"
const probe = "test/fixtures/hermes-probe.ts"
const tempDir = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "hermes-handshake-"))
const stateOf = (dataDir: string) =>
  JSON.parse(Fs.readFileSync(Path.join(dataDir, "extensions", "probe", "state.json"), "utf8"))

describe("Hermes: initialize and shutdown as hosts send them, to real extension processes", () => {
  it.live(
    "the protocol's example initialize frame, byte for byte, starts the extension, which then shuts down cleanly",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        const extension = yield* spawnFramed(hello, { env: { [HermesProtocol.DATA_DIR_VARIABLE]: dataDir } })
        const body = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
        // The specification prints this frame with "Content-Length: 52"; its body is 58 bytes (docs/protocol.md).
        assert.strictEqual(Buffer.byteLength(body, "utf8"), 58)
        extension.write(`Content-Length: 58\r\n\r\n${body}`)
        const answer = yield* extension.next((m) => m.id === 1, "the answer to initialize")
        assert.isUndefined(answer.error, JSON.stringify(answer.error))
        assert.deepStrictEqual(Schema.decodeUnknownSync(HermesProtocol.InitializeResult)(answer.result), {
          name: "hello",
          version: "1.0.0",
          commands: [{ id: "hello.sign", title: "Sign the message" }]
        })
        // The defaults, quoted by the extension, then by the logfmt line.
        assert.include(extension.stderr(), String.raw`initialize from Hermes \"unknown\" (protocol \"unknown\", pid 0)`)

        extension.send({ jsonrpc: "2.0", method: "initialized" })
        extension.send({ jsonrpc: "2.0", id: 2, method: "shutdown", params: { reason: "closing" } })
        const shutdown = yield* extension.next((m) => m.id === 2, "the answer to shutdown")
        assert.deepStrictEqual(shutdown, { jsonrpc: "2.0", id: 2, result: { success: true } })
        // After its answer the extension exits by itself, with stdin still open.
        const exit = yield* Effect.promise(() => extension.exited)
        assert.deepStrictEqual({ code: exit.code, signal: exit.signal }, { code: 0, signal: null }, extension.stderr())
        assert.include(extension.stderr(), "hello ended: Shutdown")
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )

  it.live(
    "initialize without params: the data directory is HERMES_DATA_DIR, else ~/.hermes, and the state lands there",
    () =>
      Effect.gen(function*() {
        const fromVariable = tempDir()
        const home = tempDir()
        const cases = [
          { env: { [HermesProtocol.DATA_DIR_VARIABLE]: fromVariable }, dataDir: fromVariable },
          { env: { [HermesProtocol.DATA_DIR_VARIABLE]: undefined, HOME: home }, dataDir: Path.join(home, ".hermes") }
        ]
        for (const { dataDir, env } of cases) {
          const extension = yield* spawnFramed(probe, { env })
          extension.send({ jsonrpc: "2.0", id: 1, method: "initialize" })
          const answer = yield* extension.next((m) => m.id === 1, "the answer to initialize")
          assert.strictEqual(answer.result?.name, "probe", JSON.stringify(answer))
          extension.send({ jsonrpc: "2.0", method: "initialized" })
          extension.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "probe.count" } })
          extension.send({ jsonrpc: "2.0", id: 2, method: "shutdown" })
          const shutdown = yield* extension.next((m) => m.id === 2, "the answer to shutdown")
          assert.deepStrictEqual(shutdown.result, { success: true })
          const exit = yield* Effect.promise(() => extension.exited)
          assert.strictEqual(exit.code, 0, extension.stderr())
          assert.deepStrictEqual(stateOf(dataDir), { runs: 1 })
        }
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )

  it.live(
    "shutdown with a reason outside the four: the checklist runs, the state is saved, { success: true }, logged escaped",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        const extension = yield* spawnFramed(probe, { env: { [HermesProtocol.DATA_DIR_VARIABLE]: undefined } })
        extension.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { dataDir, hostPid: 0 } })
        yield* extension.next((m) => m.id === 1, "the answer to initialize")
        extension.send({ jsonrpc: "2.0", method: "initialized" })
        extension.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "probe.count" } })
        // Text meant to forge a log line of its own, and to reach the terminal.
        const reason = "upgrade\ntimestamp=0 level=FATAL message=forged\u001b[2J"
        extension.send({ jsonrpc: "2.0", id: 2, method: "shutdown", params: { reason } })
        const shutdown = yield* extension.next((m) => m.id === 2, "the answer to shutdown")
        assert.deepStrictEqual(shutdown, { jsonrpc: "2.0", id: 2, result: { success: true } })
        const exit = yield* Effect.promise(() => extension.exited)
        assert.strictEqual(exit.code, 0, extension.stderr())
        assert.deepStrictEqual(stateOf(dataDir), { runs: 1 })
        const stderr = extension.stderr()
        assert.include(stderr, "handled as closing")
        assert.include(stderr, "ended: Shutdown")
        assert.include(stderr, "reason=closing")
        assert.isFalse(stderr.split("\n").some((line) => line.startsWith("timestamp=0")), stderr)
        assert.notInclude(stderr, "\u001b")
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )

  it.live(
    "shutdown with params {}: answered { success: true }, the state saved",
    () =>
      Effect.gen(function*() {
        const dataDir = tempDir()
        const extension = yield* spawnFramed(probe)
        extension.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { dataDir } })
        yield* extension.next((m) => m.id === 1, "the answer to initialize")
        extension.send({ jsonrpc: "2.0", method: "initialized" })
        extension.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "probe.count" } })
        extension.send({ jsonrpc: "2.0", id: 2, method: "shutdown", params: {} })
        const shutdown = yield* extension.next((m) => m.id === 2, "the answer to shutdown")
        assert.deepStrictEqual(shutdown.result, { success: true })
        const exit = yield* Effect.promise(() => extension.exited)
        assert.strictEqual(exit.code, 0, extension.stderr())
        assert.deepStrictEqual(stateOf(dataDir), { runs: 1 })
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )
})
