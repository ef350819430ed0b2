/**
 * The packages as a user gets them: one command (`pnpm pack:all`) builds every package and packs it (`pnpm pack`, which
 * applies `publishConfig.exports` and turns `workspace:*` into versions), the tarballs are installed with plain
 * `npm install` into fresh projects outside the workspace, and plain `.mjs` programs there, importing only the published
 * entry points, run on the oldest Node each package claims (its `engines`, from the registry's `node` package):
 * - Node 22.19 (`@lifeline/node` and the packages on `@effect/platform-node`): a server over
 *   `NodeChildProcess.layerConnection`, called through a `Connection.Service` client, draining an in-flight call on
 *   SIGTERM;
 * - Node 20.19 (`@lifeline/jsonrpc`, `@lifeline/kernel`, `@lifeline/process`, `@lifeline/testing`,
 *   `@lifeline/journal`, `@lifeline/hermes`: no Node platform module): a Promise program, `PromiseConnection.open` over `TestTransport.layerServe`, a call and a drain.
 * CommonJS programs load the same packages with `require` (Node >= 20.19 and >= 22.12 load an ES module graph without
 * top-level await from `require`; the packages' `default` export condition lets them): on Node 22.19 a `.cjs` host
 * connects the MCP SDK's `Client` (itself CommonJS there) over `@lifeline/mcp`'s transport and lists a server's tools;
 * on Node 20.19 a `.cjs` program calls through `PromiseConnection`. A consumer `.ts` file (and a `.cts` one, as
 * CommonJS) is type-checked against the published `.d.ts`. The `hermes-host` bin of `@lifeline/hermes-node`
 * runs with `npx` from the installed tarball: its conformance kit checks the Python example extension of this
 * repository (every check passed).
 *
 * `LIFELINE_CONSUMER_EFFECT` (default `4.1.0`) is the `effect` and `@effect/platform-node` version installed:
 * `pnpm test:consumer:newest` runs this file against the newest Effect 4 on the registry (outside CI).
 * `npm install` needs the registry (for `effect`, `@effect/platform-node`, `@types/node`, `node`): without it the
 * test fails.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { checkIds } from "../packages/hermes-node/src/internal/conformanceChecks.js"

const workspace = Path.resolve(import.meta.dirname, "..")
const effectVersion = process.env.LIFELINE_CONSUMER_EFFECT ?? "4.1.0"
/** The packages' version: one for all (changesets' fixed group). */
const version: string = JSON.parse(
  Fs.readFileSync(Path.join(workspace, "packages", "kernel", "package.json"), "utf8")
).version
/** The oldest Node each group of packages claims in its `engines`. */
const oldestNode = { platform: "22.19.0", pure: "20.19.0" } as const
const tsc = Path.join(workspace, "node_modules", "typescript", "bin", "tsc")
const typesNodeVersion: string = JSON.parse(
  Fs.readFileSync(Path.join(workspace, "node_modules", "@types", "node", "package.json"), "utf8")
).version

interface Ran {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs a command to its end, killed after `timeoutMs`; never rejects, the caller asserts on the result. */
const run = (command: string, args: ReadonlyArray<string>, options: { cwd: string; timeoutMs: number }) =>
  new Promise<Ran>((resolve) => {
    ChildProcess.execFile(
      command,
      args,
      { cwd: options.cwd, timeout: options.timeoutMs, killSignal: "SIGKILL", maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const failed = error as (ChildProcess.ExecFileException & { code?: number | string }) | null
        resolve({
          code: failed === null ? 0 : typeof failed.code === "number" ? failed.code : null,
          signal: failed?.signal ?? null,
          stdout,
          stderr: failed !== null && typeof failed.code === "string" ? `${failed.message}\n${stderr}` : stderr
        })
      }
    )
  })

const expectSuccess = (what: string, ran: Ran) =>
  assert.strictEqual(
    ran.code,
    0,
    `${what} failed (code ${ran.code}, signal ${ran.signal}):\n${ran.stdout}\n${ran.stderr}`
  )

const shared = `import { Method, Protocol } from "@lifeline/kernel"
import { Schema } from "effect"

export const Echo = Method.request("echo", { params: Schema.Struct({ text: Schema.String }), result: Schema.String })
export const Sleep = Method.request("sleep", { params: Schema.Struct({ ms: Schema.Number }), result: Schema.Number })
export const Server = Protocol.make({ serves: [Echo, Sleep] })
`

const server = `import { NodeSignals, NodeStdio } from "@lifeline/node"
import { Duration, Effect } from "effect"
import { Server } from "./shared.mjs"

const main = Effect.gen(function*() {
  const connection = yield* NodeStdio.makeConnection({
    protocol: Server,
    handlers: {
      echo: ({ text }) => Effect.succeed(text),
      sleep: ({ ms }) => Effect.as(Effect.sleep(Duration.millis(ms)), ms)
    }
  })
  return yield* connection.awaitShutdown
}).pipe(Effect.scoped)

NodeSignals.runMain(main)
`

const client = `import { Connection, Protocol } from "@lifeline/kernel"
import { NodeChildProcess, NodeSignals } from "@lifeline/node"
import { Effect, Fiber } from "effect"
import { ChildProcess } from "effect/process"
import { fileURLToPath } from "node:url"
import { Server } from "./shared.mjs"

class ServerConnection extends Connection.Service()("consumer/ServerConnection", {
  protocol: Protocol.flip(Server)
}) {}

// The child connection as a Layer: the connection is the service, childOf gives the child behind it.
const ServerLive = NodeChildProcess.layerConnection(ServerConnection, {
  command: ChildProcess.make(process.execPath, [fileURLToPath(new URL("./server.mjs", import.meta.url))]),
  protocol: Protocol.flip(Server),
  handlers: {},
  name: "server"
})

const say = (line) => Effect.sync(() => process.stdout.write(JSON.stringify(line) + "\\n"))

const main = Effect.gen(function*() {
  yield* say({ node: process.version })
  const child = NodeChildProcess.childOf(yield* ServerConnection)
  yield* say({ childPid: typeof child?.child.pid })
  const client = yield* ServerConnection.client
  yield* say({ echo: yield* client.echo({ text: "hello" }) })
  const slow = yield* Effect.forkChild(client.sleep({ ms: 1500 }))
  yield* say({ inFlight: true })
  yield* say({ slow: yield* Fiber.join(slow) })
  return yield* Effect.never
}).pipe(Effect.provide(ServerLive))

NodeSignals.runMain(main)
`

const pureProgram = `import { Method, PromiseConnection, Protocol, ShutdownPolicy } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { Effect, Schema } from "effect"

const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
const Hello = Method.request("hello", { params: Schema.Struct({ name: Schema.String }), result: Schema.String })
const Server = Protocol.make({ serves: [Add], calls: [Hello] })

// A Promise program: no Effect of its own but the far end's handler, which the test serves in memory.
const connection = await PromiseConnection.open({
  protocol: Protocol.flip(Server),
  transport: TestTransport.layerServe(Server, { add: ([a, b]) => Effect.as(Effect.sleep("20 millis"), a + b) }),
  handlers: { hello: async ({ name }) => "hello, " + name },
  policy: ShutdownPolicy.drain("1 second")
})
const pending = connection.client.call(Add, [1, 2])
const report = await connection.close()
process.stdout.write(JSON.stringify({ node: process.version, sum: await pending, drained: report.drained }))
`

// The same Promise program, as CommonJS: \`require\` of the ES module packages.
const pureCjs = `const { Method, PromiseConnection, Protocol, ShutdownPolicy } = require("@lifeline/kernel")
const { TestTransport } = require("@lifeline/testing")
const { Effect, Schema } = require("effect")

const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
const Server = Protocol.make({ serves: [Add] })

const main = async () => {
  const connection = await PromiseConnection.open({
    protocol: Protocol.flip(Server),
    transport: TestTransport.layerServe(Server, { add: ([a, b]) => Effect.succeed(a + b) }),
    handlers: {},
    policy: ShutdownPolicy.drain("1 second")
  })
  const sum = await connection.client.call(Add, [1, 2])
  await connection.close()
  process.stdout.write(JSON.stringify({ node: process.version, sum }))
}
main().catch((error) => {
  process.stderr.write(String((error && error.stack) || error))
  process.exit(1)
})
`

// A minimal MCP server over stdio (NDJSON): \`initialize\`, \`tools/list\`; it exits at the end of its stdin.
const mcpServerCjs = `let buffer = ""
process.stdin.setEncoding("utf8")
process.stdin.on("data", (chunk) => {
  buffer += chunk
  let end
  while ((end = buffer.indexOf("\\n")) >= 0) {
    const message = JSON.parse(buffer.slice(0, end))
    buffer = buffer.slice(end + 1)
    if (message.id === undefined || message.method === undefined) continue
    const result = message.method === "initialize"
      ? {
        protocolVersion: message.params.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: "cjs-server", version: "1.0.0" }
      }
      : message.method === "tools/list"
      ? { tools: [{ name: "echo", inputSchema: { type: "object" } }] }
      : {}
    process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: message.id, result }) + "\\n")
  }
})
process.stdin.on("end", () => process.exit(0))
`

// A CommonJS MCP host: the SDK's \`Client\` (CommonJS) over \`@lifeline/mcp\`'s transport, loaded with \`require\`.
const mcpHostCjs = `const { StdioClientTransport } = require("@lifeline/mcp/StdioClientTransport")
const barrel = require("@lifeline/mcp")
const { Client } = require("@modelcontextprotocol/sdk/client/index.js")
const Path = require("node:path")

const main = async () => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [Path.join(__dirname, "mcp-server.cjs")],
    journalDirectory: Path.join(__dirname, "journal")
  })
  const client = new Client({ name: "cjs-host", version: "1.0.0" })
  await client.connect(transport)
  const { tools } = await client.listTools()
  const pid = transport.pid
  await client.close()
  let alive = true
  try {
    process.kill(pid, 0)
  } catch {
    alive = false
  }
  process.stdout.write(JSON.stringify({
    node: process.version,
    barrel: barrel.StdioClientTransport.StdioClientTransport === StdioClientTransport,
    server: client.getServerVersion().name,
    tools: tools.map((tool) => tool.name),
    aliveAfterClose: alive
  }))
}
main().catch((error) => {
  process.stderr.write(String((error && error.stack) || error))
  process.exit(1)
})
`

// The MCP transport from a CommonJS TypeScript file (\`require\` of an ES module, which TypeScript 5.8+ allows).
const consumerCts = `import { StdioClientTransport } from "@lifeline/mcp/StdioClientTransport"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"

export const transport: Transport = new StdioClientTransport({ command: "server", args: ["--stdio"] })
`

const consumerTs = `import type { Peer } from "@lifeline/kernel"
import { Connection, Method, Protocol, ShutdownPolicy } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { FleetRunner } from "@lifeline/fleet"
import { StdioClientTransport } from "@lifeline/mcp/StdioClientTransport"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { NodeChildProcess, NodeSignals } from "@lifeline/node"
import { PgJournal } from "@lifeline/postgres"
import { SqliteJournal } from "@lifeline/sqlite"
import { Context, Effect, Layer, Schema } from "effect"
import { ChildProcess } from "effect/process"

const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
const CalcProtocol = Protocol.make({ calls: [Add] })

class CalcConnection extends Connection.Service<CalcConnection>()("consumer/CalcConnection", {
  protocol: CalcProtocol
}) {}

class Calculator extends Context.Service<Calculator, {
  readonly add: (a: number, b: number) => Effect.Effect<number, Peer.CallError>
}>()("consumer/Calculator") {
  static readonly layer = Layer.effect(
    Calculator,
    Effect.map(CalcConnection.client, (client) => ({ add: (a: number, b: number) => client.add([a, b]) }))
  ).pipe(Layer.provide(CalcConnection.layer({ handlers: {}, policy: ShutdownPolicy.drain("2 seconds") })))
}

export const inMemory: Layer.Layer<Calculator, unknown> = Calculator.layer.pipe(
  Layer.provide(TestTransport.layerServe(Protocol.flip(CalcProtocol), { add: ([a, b]) => Effect.succeed(a + b) }))
)

export const overChild: Layer.Layer<Calculator, unknown> = Calculator.layer.pipe(
  Layer.provide(NodeChildProcess.layer({ command: ChildProcess.make("calculator", []), name: "calculator" }))
)

const program: Effect.Effect<number, unknown> = Calculator.use((calculator) => calculator.add(1, 2)).pipe(
  Effect.provide(inMemory)
)

export const code: 143 = NodeSignals.ExitCode.Terminate

// The journals and the fleet, as a host composes them (type-checked against the published .d.ts only).
export const sqliteJournal = SqliteJournal.layer({ filename: "journal.db" })
export const pgJournal = PgJournal.layerConfig
export const runner = FleetRunner.layerPostgres({ url: "postgres://lifeline@127.0.0.1:5432/postgres", port: 34431 })

// The MCP transport, where the SDK's Transport is expected (its .d.ts names the SDK's types).
export const mcpTransport: Transport = new StdioClientTransport({ command: "server", args: ["--stdio"] })

// @ts-expect-error: the internal modules are not exported
export type Hidden = typeof import("@lifeline/kernel/internal/peer")

NodeSignals.runMain(program)
`

// Effect's own .d.ts name \`CryptoKey\` and \`JsonWebKey\`: with skipLibCheck false the consumer needs the DOM lib.
const consumerTsconfig = {
  compilerOptions: {
    strict: true,
    exactOptionalPropertyTypes: true,
    module: "NodeNext",
    moduleResolution: "NodeNext",
    target: "ES2022",
    lib: ["ES2022", "DOM"],
    types: ["node"],
    noEmit: true,
    skipLibCheck: false
  },
  files: ["consumer.ts", "consumer.cts"]
}

describe("the published packages, installed with npm outside the workspace", () => {
  it("run a server over NodeChildProcess, call it, drain on SIGTERM, and type-check", async () => {
    const [major, minor] = process.versions.node.split(".").map(Number) as [number, number]
    assert.isTrue(
      major > 22 || (major === 22 && minor >= 19),
      `the consumer runs on process.execPath, Node ${process.versions.node}: Effect 4 needs Node >= 22.19`
    )
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-consumer-"))
    assert.strictEqual(Path.relative(workspace, dir).split(Path.sep)[0], "..", `${dir} is inside the workspace`)
    try {
      const packs = Path.join(dir, "packs")
      const project = Path.join(dir, "project")
      Fs.mkdirSync(packs)
      Fs.mkdirSync(project)

      expectSuccess(
        "pnpm pack:all",
        await run("pnpm", ["run", "pack:all", "--out", packs], { cwd: workspace, timeoutMs: 300_000 })
      )
      const tarballs = Fs.readdirSync(packs).filter((file) => file.endsWith(".tgz")).sort()
      assert.deepStrictEqual(tarballs, [
        `lifeline-fleet-${version}.tgz`,
        `lifeline-hermes-${version}.tgz`,
        `lifeline-hermes-node-${version}.tgz`,
        `lifeline-journal-${version}.tgz`,
        `lifeline-jsonrpc-${version}.tgz`,
        `lifeline-kernel-${version}.tgz`,
        `lifeline-mcp-${version}.tgz`,
        `lifeline-node-${version}.tgz`,
        `lifeline-postgres-${version}.tgz`,
        `lifeline-process-${version}.tgz`,
        `lifeline-sqlite-${version}.tgz`,
        `lifeline-testing-${version}.tgz`
      ])
      for (
        const name of [
          "jsonrpc",
          "kernel",
          "process",
          "testing",
          "journal",
          "hermes",
          "node",
          "sqlite",
          "postgres",
          "hermes-node",
          "fleet",
          "mcp"
        ]
      ) {
        const manifest = JSON.parse(
          Fs.readFileSync(Path.join(workspace, "packages", name, "package.json"), "utf8")
        )
        const pure = ["jsonrpc", "kernel", "process", "testing", "journal", "hermes"].includes(name)
        assert.strictEqual(manifest.engines.node, `>=${pure ? "20.19" : "22.19"}`, `${name}'s engines`)
        // @lifeline/mcp is for hosts that do not use Effect: Effect comes with it, as a dependency.
        const effectRange = name === "mcp" ? manifest.dependencies.effect : manifest.peerDependencies.effect
        assert.strictEqual(effectRange, "^4.1.0", `${name}'s effect range`)
      }

      // The pure packages on the oldest Node they claim.
      const pure = Path.join(dir, "pure")
      Fs.mkdirSync(pure)
      Fs.writeFileSync(
        Path.join(pure, "package.json"),
        JSON.stringify({ name: "lifeline-pure-consumer", private: true, type: "module" }, null, 2)
      )
      expectSuccess(
        `npm install (pure packages, node@${oldestNode.pure})`,
        await run("npm", [
          "install",
          "--no-audit",
          "--no-fund",
          "--prefer-offline",
          ...["jsonrpc", "kernel", "process", "testing", "journal", "hermes"].map((name) =>
            Path.join(packs, `lifeline-${name}-${version}.tgz`)
          ),
          `effect@${effectVersion}`,
          `node@${oldestNode.pure}`
        ], { cwd: pure, timeoutMs: 120_000 })
      )
      Fs.writeFileSync(Path.join(pure, "pure.mjs"), pureProgram)
      const ranPure = await run(Path.join(pure, "node_modules", ".bin", "node"), ["pure.mjs"], {
        cwd: pure,
        timeoutMs: 30_000
      })
      expectSuccess("pure.mjs", ranPure)
      assert.deepStrictEqual(JSON.parse(ranPure.stdout), { node: `v${oldestNode.pure}`, sum: 3, drained: true })
      Fs.writeFileSync(Path.join(pure, "pure.cjs"), pureCjs)
      const ranPureCjs = await run(Path.join(pure, "node_modules", ".bin", "node"), ["pure.cjs"], {
        cwd: pure,
        timeoutMs: 30_000
      })
      expectSuccess("pure.cjs (require)", ranPureCjs)
      assert.deepStrictEqual(JSON.parse(ranPureCjs.stdout), { node: `v${oldestNode.pure}`, sum: 3 })
      process.stderr.write(
        `[packages] pure.cjs on Node ${oldestNode.pure}, stderr: ${JSON.stringify(ranPureCjs.stderr)}\n`
      )

      Fs.writeFileSync(
        Path.join(project, "package.json"),
        JSON.stringify({ name: "lifeline-consumer", private: true, type: "module" }, null, 2)
      )
      const install = await run("npm", [
        "install",
        "--no-audit",
        "--no-fund",
        "--prefer-offline",
        ...tarballs.map((file) => Path.join(packs, file)),
        `effect@${effectVersion}`,
        `@effect/platform-node@${effectVersion}`,
        `@types/node@${typesNodeVersion}`,
        `node@${oldestNode.platform}`,
        // @lifeline/mcp's optional peer, for the consumer's type-check of the MCP transport.
        "@modelcontextprotocol/sdk@1.32.2"
      ], { cwd: project, timeoutMs: 120_000 })
      expectSuccess(
        "npm install (needs the npm registry for effect, @effect/platform-node, @types/node, node)",
        install
      )
      // npm keeps the range it was given for what the project asked; the packages' own peer range is a caret.
      const projectManifest = JSON.parse(Fs.readFileSync(Path.join(project, "package.json"), "utf8"))
      assert.match(projectManifest.dependencies.effect, /^\^?4\./)
      const oldNode = Path.join(project, "node_modules", ".bin", "node")

      // The packed manifests: compiled entry points, no workspace protocol.
      const kernel = JSON.parse(
        Fs.readFileSync(Path.join(project, "node_modules", "@lifeline", "kernel", "package.json"), "utf8")
      )
      // `default` next to `import`: `require` (which `import` does not match) loads the same ES module.
      assert.deepStrictEqual(kernel.exports["."], {
        types: "./dist/index.d.ts",
        import: "./dist/index.js",
        default: "./dist/index.js"
      })
      assert.strictEqual(kernel.exports["./internal/*"], null)
      assert.strictEqual(kernel.dependencies["@lifeline/jsonrpc"], version)
      assert.isUndefined(kernel.publishConfig)

      Fs.writeFileSync(Path.join(project, "shared.mjs"), shared)
      Fs.writeFileSync(Path.join(project, "server.mjs"), server)
      Fs.writeFileSync(Path.join(project, "client.mjs"), client)
      Fs.writeFileSync(Path.join(project, "consumer.ts"), consumerTs)
      Fs.writeFileSync(Path.join(project, "consumer.cts"), consumerCts)
      Fs.writeFileSync(Path.join(project, "mcp-server.cjs"), mcpServerCjs)
      Fs.writeFileSync(Path.join(project, "mcp-host.cjs"), mcpHostCjs)
      Fs.writeFileSync(Path.join(project, "tsconfig.json"), JSON.stringify(consumerTsconfig, null, 2))

      expectSuccess(
        "tsc on the consumer against the published .d.ts",
        await run(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: project, timeoutMs: 120_000 })
      )

      // A CommonJS MCP host on the oldest Node: `require` of @lifeline/mcp (and of what it depends on), the SDK's
      // CommonJS `Client`, a server's tools listed, the server gone after `close()`.
      const ranMcpCjs = await run(oldNode, ["mcp-host.cjs"], { cwd: project, timeoutMs: 30_000 })
      expectSuccess("mcp-host.cjs (require)", ranMcpCjs)
      assert.deepStrictEqual(JSON.parse(ranMcpCjs.stdout), {
        node: `v${oldestNode.platform}`,
        barrel: true,
        server: "cjs-server",
        tools: ["echo"],
        aliveAfterClose: false
      })
      process.stderr.write(
        `[packages] mcp-host.cjs on Node ${oldestNode.platform}, stderr: ${JSON.stringify(ranMcpCjs.stderr)}\n`
      )

      // The conformance kit as an extension author outside the repository runs it: `npx hermes-host` is the package's
      // bin (npm links it and marks it executable from `publishConfig.bin`), run on the project's Node 22.19 (`npx`
      // puts node_modules/.bin, with the `node` package's binary, first on PATH). Nothing of npx's own goes before the
      // name: after `npx --no`, npm reads the bin's options (`--conformance`, `--extension`) as its configuration.
      const packedHermesNode = JSON.parse(
        Fs.readFileSync(Path.join(project, "node_modules", "@lifeline", "hermes-node", "package.json"), "utf8")
      )
      assert.match(packedHermesNode.bin["hermes-host"], /^(\.\/)?dist\/bin\/hermes-host\.js$/)
      const python = Path.join(workspace, "examples", "python-extension", "extension.py")
      const kit = await run("npx", [
        "hermes-host",
        "--conformance",
        "--extension",
        `python3 ${python}`,
        "--json"
      ], {
        cwd: project,
        timeoutMs: 120_000
      })
      expectSuccess("npx hermes-host --conformance (the Python example)", kit)
      const scorecard = JSON.parse(kit.stdout)
      assert.strictEqual(scorecard.extension.name, "py-hl7", kit.stderr)
      assert.deepStrictEqual(scorecard.checks.map((check: { id: string }) => check.id), [...checkIds])
      for (const check of scorecard.checks) {
        assert.strictEqual(check.status, "pass", `${check.id}: ${JSON.stringify(check.evidence)}`)
      }
      assert.deepStrictEqual(
        [scorecard.passed, scorecard.failed, scorecard.warned, scorecard.notApplicable],
        [checkIds.length, 0, 0, 0]
      )
      // On a Node older than it needs, the bin says so in one line instead of failing on `node:sqlite`.
      const tooOld = await run(
        Path.join(pure, "node_modules", ".bin", "node"),
        [Path.join(project, "node_modules", "@lifeline", "hermes-node", packedHermesNode.bin["hermes-host"]), "--help"],
        { cwd: project, timeoutMs: 30_000 }
      )
      assert.strictEqual(tooOld.code, 2, tooOld.stderr)
      assert.strictEqual(tooOld.stderr, `hermes-host needs Node >= 22.19; this is Node ${oldestNode.pure}\n`)

      const child = ChildProcess.spawn(oldNode, ["client.mjs"], {
        cwd: project,
        env: { ...process.env, LIFELINE_SHUTDOWN_POLICY: "drain" },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let stdout = ""
      let stderr = ""
      child.stderr.on("data", (chunk: Buffer) => stderr += chunk.toString())
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.once("exit", (code, signal) => resolve({ code, signal }))
      )
      const killer = setTimeout(() => child.kill("SIGKILL"), 20_000)
      try {
        await new Promise<void>((resolve, reject) => {
          child.stdout.on("data", (chunk: Buffer) => {
            stdout += chunk.toString()
            if (stdout.includes(`{"inFlight":true}`)) resolve()
          })
          void exited.then(() => reject(new Error(`client.mjs exited before its slow call:\n${stdout}\n${stderr}`)))
        })
        child.kill("SIGTERM")
        const exit = await exited
        const lines = stdout.trim().split("\n").map((line) => JSON.parse(line))
        assert.deepStrictEqual(
          lines,
          [{ node: `v${oldestNode.platform}` }, { childPid: "number" }, { echo: "hello" }, { inFlight: true }, {
            slow: 1500
          }],
          stderr
        )
        assert.deepStrictEqual(exit, { code: 143, signal: null }, stderr)
      } finally {
        clearTimeout(killer)
        child.kill("SIGKILL")
      }
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 600_000)
})
