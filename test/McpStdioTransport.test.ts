/**
 * The behaviours the MCP SDK's own stdio client transport tests check (modelcontextprotocol/typescript-sdk,
 * packages/client/test/client/stdio.test.ts: start then close cleanly, messages read back through `tee`, the pid while
 * running and `null` after), rewritten, and the rest of the transport contract its source implements (the default
 * environment, `start` twice, `send` when not connected, the stderr getter, the line limit, a line that is not JSON):
 * each run against the SDK's `StdioClientTransport` and `@lifeline/mcp`'s, which must behave the same.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Lifeline from "@lifeline/mcp/StdioClientTransport"
import * as Sdk from "@modelcontextprotocol/sdk/client/stdio.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import type { Readable } from "node:stream"
import { alive, groupOf, killAll, stubborn, treeOf } from "./support/mcp.js"
import { isAlive } from "./support/processes.js"

const eventually = async (condition: () => boolean) => {
  const start = performance.now()
  while (!condition()) {
    if (performance.now() - start > 5000) throw new Error("never happened")
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

const journalDirectory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-mcp-transport-"))
afterAll(() => Fs.rmSync(journalDirectory, { recursive: true, force: true }))

type Parameters = Sdk.StdioServerParameters & Lifeline.StdioServerParameters

interface AnyTransport {
  onclose?: (() => void) | undefined
  onerror?: ((error: Error) => void) | undefined
  onmessage?: ((message: JSONRPCMessage) => void) | undefined
  start(): Promise<void>
  send(message: JSONRPCMessage): Promise<void>
  close(): Promise<void>
  readonly pid: number | null
  readonly stderr: unknown
}

const transports: ReadonlyArray<readonly [string, (parameters: Parameters) => AnyTransport]> = [
  ["the SDK's StdioClientTransport", (parameters) => new Sdk.StdioClientTransport(parameters)],
  [
    "@lifeline/mcp's StdioClientTransport",
    (parameters) => new Lifeline.StdioClientTransport({ ...parameters, journalDirectory })
  ]
]

/** Keeps a `node -e` server running until its stdin ends, as a well-behaved server does. */
const untilEof = "process.stdin.resume(); process.stdin.on('end', () => process.exit(0))"
const tee: Parameters = { command: "/usr/bin/tee" }
const node = (script: string, extra: Partial<Parameters> = {}): Parameters => ({
  command: process.execPath,
  args: ["-e", script],
  ...extra
})

const collect = (transport: AnyTransport, until: (messages: Array<JSONRPCMessage>) => boolean) => {
  const messages: Array<JSONRPCMessage> = []
  const done = new Promise<Array<JSONRPCMessage>>((resolve) => {
    transport.onmessage = (message) => {
      messages.push(message)
      if (until(messages)) resolve(messages)
    }
  })
  return done
}

const errors = (transport: AnyTransport) => {
  const seen: Array<Error> = []
  transport.onerror = (error) => seen.push(error)
  return seen
}

describe("the SDK's stdio transport tests, on both transports", () => {
  for (const [name, make] of transports) {
    describe(name, () => {
      it("starts then closes cleanly: onclose once, only after the close", async () => {
        const transport = make(tee)
        const seen = errors(transport)
        let closes = 0
        transport.onclose = () => closes++
        await transport.start()
        assert.strictEqual(closes, 0)
        await transport.close()
        assert.strictEqual(closes, 1)
        assert.deepStrictEqual(seen, [])
      })

      it("reads messages back in order (tee echoes what it is sent)", async () => {
        const transport = make(tee)
        const seen = errors(transport)
        const sent: Array<JSONRPCMessage> = [
          { jsonrpc: "2.0", id: 1, method: "ping" },
          { jsonrpc: "2.0", method: "notifications/initialized" }
        ]
        const read = collect(transport, (messages) => messages.length === 2)
        await transport.start()
        for (const message of sent) await transport.send(message)
        assert.deepStrictEqual(await read, sent)
        await transport.close()
        assert.deepStrictEqual(seen, [])
      })

      it("gives the child's pid while it runs, null after the close", async () => {
        const transport = make(tee)
        assert.isNull(transport.pid)
        await transport.start()
        const pid = transport.pid
        assert.isNumber(pid)
        assert.isTrue(isAlive(pid!))
        await transport.close()
        assert.isNull(transport.pid)
        assert.isFalse(isAlive(pid!))
      })

      it("passes only the default environment's allowlist and the given env, over it", async () => {
        process.env.LIFELINE_MCP_SECRET = "not for servers"
        try {
          const transport = make(node(
            "process.stdout.write(JSON.stringify({ jsonrpc: '2.0', method: 'env', params: process.env }) + '\\n')",
            { env: { EXTRA: "given", PATH: "/usr/bin:/bin" } }
          ))
          const read = collect(transport, (messages) => messages.length === 1)
          await transport.start()
          const [message] = await read
          const env = (message as unknown as { params: Record<string, string> }).params
          assert.isUndefined(env.LIFELINE_MCP_SECRET)
          assert.strictEqual(env.EXTRA, "given")
          assert.strictEqual(env.PATH, "/usr/bin:/bin")
          assert.strictEqual(env.HOME, process.env.HOME)
          await transport.close()
        } finally {
          delete process.env.LIFELINE_MCP_SECRET
        }
        assert.deepStrictEqual(Lifeline.getDefaultEnvironment(), Sdk.getDefaultEnvironment())
        assert.deepStrictEqual([...Lifeline.DEFAULT_INHERITED_ENV_VARS], Sdk.DEFAULT_INHERITED_ENV_VARS)
      })

      it("runs the server in cwd", async () => {
        const transport = make(node(
          "process.stdout.write(JSON.stringify({ jsonrpc: '2.0', method: 'cwd', params: { cwd: process.cwd() } }) + '\\n')",
          { cwd: Os.tmpdir() }
        ))
        const read = collect(transport, (messages) => messages.length === 1)
        await transport.start()
        const [message] = await read
        assert.strictEqual((message as unknown as { params: { cwd: string } }).params.cwd, Fs.realpathSync(Os.tmpdir()))
        await transport.close()
      })

      it("refuses a second start, and a send before the start", async () => {
        const transport = make(tee)
        let sendError: unknown
        await transport.send({ jsonrpc: "2.0", method: "early" }).catch((error) => (sendError = error))
        assert.match(String(sendError), /Not connected/)
        await transport.start()
        let startError: unknown
        await transport.start().catch((error) => (startError = error))
        assert.match(String(startError), /already started/)
        await transport.close()
      })

      it("hands stderr out before the start when piped, and what the server writes there arrives", async () => {
        const transport = make(node(`process.stderr.write('to stderr\\n'); ${untilEof}`, {
          stderr: "pipe"
        }))
        const stderr = transport.stderr as Readable
        assert.isNotNull(stderr)
        const arrived = new Promise<string>((resolve) => stderr.once("data", (chunk: Buffer) => resolve(String(chunk))))
        await transport.start()
        assert.strictEqual(await arrived, "to stderr\n")
        await transport.close()
      })

      const noise = [
        ["a line that is not JSON", "{not json"],
        ["a line of text that is no message (a banner)", "Starting the server..."]
      ] as const
      for (const [what, line] of noise) {
        it(`reports ${what}, and keeps reading`, async () => {
          const transport = make(node(
            `process.stdout.write('${line}\\n' + JSON.stringify({ jsonrpc: '2.0', method: 'after' }) + '\\n'); ` +
              untilEof
          ))
          const seen = errors(transport)
          const read = collect(transport, (messages) => messages.length === 1)
          await transport.start()
          assert.deepStrictEqual(await read, [{ jsonrpc: "2.0", method: "after" }])
          assert.strictEqual(seen.length, 1)
          await transport.close()
        })
      }

      it("reports a line over maxBufferSize and closes", async () => {
        const transport = make(node("process.stdout.write('{\"x\":\"' + 'a'.repeat(4096)); " + untilEof, {
          maxBufferSize: 1024
        }))
        const seen = errors(transport)
        const closed = new Promise<void>((resolve) => (transport.onclose = resolve))
        await transport.start()
        await closed
        assert.isAtLeast(seen.length, 1)
        assert.isNull(transport.pid)
      })
    })
  }
})

describe("@lifeline/mcp's guarantees beyond the SDK's", () => {
  it("stray output longer than maxBufferSize is skipped without being held, reported, and reading goes on", async () => {
    // The SDK's transport buffers such a line until the limit and reports it; ours skips what is no message as it
    // arrives (nothing is held), so only a message may not pass maxBufferSize.
    const transport = new Lifeline.StdioClientTransport({
      command: process.execPath,
      args: [
        "-e",
        "process.stdout.write('a'.repeat(5000) + '\\n' + JSON.stringify({ jsonrpc: '2.0', method: 'after' }) + '\\n'); " +
        "process.stdin.resume()"
      ],
      stderr: "ignore",
      maxBufferSize: 1000
    })
    const seen: Array<Error> = []
    transport.onerror = (error) => seen.push(error)
    const messages: Array<unknown> = []
    const read = new Promise<void>((resolve) => {
      transport.onmessage = (message) => {
        messages.push(message)
        resolve()
      }
    })
    await transport.start()
    await read
    assert.deepStrictEqual(messages, [{ jsonrpc: "2.0", method: "after" }])
    assert.isAtLeast(seen.length, 1)
    assert.match(seen[0]!.message, /not JSON-RPC messages/)
    assert.isNotNull(transport.pid, "still open")
    await transport.close()
  })

  it("exitTimeout and killGrace bound the close of a server that ignores end of stdin and SIGTERM", async () => {
    const transport = new Lifeline.StdioClientTransport({
      command: process.execPath,
      args: [stubborn],
      stderr: "ignore",
      exitTimeout: "200 millis",
      killGrace: "300 millis",
      journalDirectory
    })
    let closes = 0
    transport.onclose = () => closes++
    await transport.start()
    const pid = transport.pid!
    await eventually(() => groupOf(pid).length === 2) // the server and its helper
    const start = performance.now()
    await transport.close()
    const elapsed = performance.now() - start
    assert.isAtLeast(elapsed, 480)
    assert.isBelow(elapsed, 1300)
    assert.deepStrictEqual(groupOf(pid), [])
    assert.strictEqual(closes, 1)
  })

  it("a close while another server runs returns once the server and its group are gone, the journal's books kept after; the last close waits for them and removes the journal file", async () => {
    const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-mcp-books-"))
    try {
      const [first, second] = [0, 1].map(() =>
        new Lifeline.StdioClientTransport({ command: "cat", journalDirectory: directory })
      )
      const closes = [0, 0]
      first!.onclose = () => closes[0]!++
      second!.onclose = () => closes[1]!++
      await first!.start()
      await second!.start()
      const pids = [first!.pid!, second!.pid!]
      // The records are written in the background of the spawn.
      await eventually(() => Fs.readdirSync(directory).length > 0)
      await first!.close()
      assert.deepStrictEqual(groupOf(pids[0]!), [], "the first server's group is gone when its close returns")
      assert.strictEqual(closes[0], 1)
      // A third server, closed with the second at once: the second's books are kept in the background while the third
      // closes; the runtime's disposal, at the last close, waits for them, so that a host that exits now leaves no
      // journal file.
      const third = new Lifeline.StdioClientTransport({ command: "cat", journalDirectory: directory })
      await third.start()
      await Promise.all([second!.close(), third.close()])
      assert.deepStrictEqual(groupOf(pids[1]!), [])
      assert.deepStrictEqual(closes, [1, 1])
      assert.deepStrictEqual(Fs.readdirSync(directory), [], "the journal file is removed when the last close returns")
    } finally {
      Fs.rmSync(directory, { recursive: true, force: true })
    }
  })

  it("a close() while the start is under way waits for it, then stops the server", async () => {
    const transport = new Lifeline.StdioClientTransport({ ...tee, journalDirectory })
    let closes = 0
    transport.onclose = () => closes++
    const started = transport.start()
    const closed = transport.close()
    await started
    const pid = transport.pid
    await closed
    assert.isNull(transport.pid)
    if (pid !== null) assert.isFalse(isAlive(pid))
    assert.strictEqual(closes, 1)
    // A second close() is a no-op.
    await transport.close()
    assert.strictEqual(closes, 1)
  })

  for (const [name, make] of transports) {
    it(`${name}: a server that exits at the end of its stdin, leaving a helper in its group`, async () => {
      const transport = make({ command: "sh", args: ["-c", "sleep 30 & exec cat"] })
      await transport.start()
      const pid = transport.pid!
      await eventually(() => treeOf(pid).length === 2)
      const helpers = treeOf(pid).filter((member) => member !== pid)
      await transport.close()
      const left = alive(helpers)
      process.stderr.write(`[mcp measured] ${name}: ${left.length} helper left after close\n`)
      killAll(left)
      if (make === transports[1][1]) assert.deepStrictEqual(left, [])
    })
  }
})

describe("a command that cannot be spawned", () => {
  for (const [name, make] of transports) {
    it(`${name}: start() rejects, onerror is told, and the pid stays null`, async () => {
      const transport = make({ command: "/nonexistent/mcp-server" })
      const seen = errors(transport)
      const failure = await transport.start().then(() => undefined, (error: unknown) => error)
      assert.instanceOf(failure, Error)
      // Node's own spawn error, as hosts test it (`error.code === "ENOENT"`), not a wrapper of it.
      assert.strictEqual((failure as { code?: unknown }).code, "ENOENT")
      assert.strictEqual(seen[0], failure)
      assert.isNull(transport.pid)
      await transport.close()
    })
  }
})

describe("a server that speaks first", () => {
  for (const [name, make] of transports) {
    it(`${name}: its first line, written at once, is delivered`, async () => {
      const transport = make(node(
        "process.stdout.write(JSON.stringify({ jsonrpc: '2.0', method: 'hello' }) + '\\n'); " + untilEof
      ))
      const read = collect(transport, (messages) => messages.length === 1)
      await transport.start()
      assert.deepStrictEqual(await read, [{ jsonrpc: "2.0", method: "hello" }])
      await transport.close()
    })
  }
})
