/**
 * Effect's own MCP client (`McpClient.layerStdio`, which starts its server through the `ChildProcessSpawner` service)
 * over `NodeSupervisedSpawner.layer`, against the MCP reference server (`@modelcontextprotocol/server-everything`,
 * protocol 2025-11-25), started directly and through an `sh -c` wrapper: tools listed and called, and nothing of the
 * server left once the layer is closed; and the example that does it (`examples/effect-mcp`) run as a program.
 */
import { NodeFileSystem, NodePath } from "@effect/platform-node"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { NodeSupervisedSpawner } from "@lifeline/node"
import { Effect, Layer } from "effect"
import { McpClient, McpProtocol } from "effect/ai"
import { ChildProcess } from "effect/process"
import * as NodeProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import { isAlive } from "./support/processes.js"

const here = Path.dirname(Url.fileURLToPath(import.meta.url))
const everything = Path.join(here, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-mcp-"))
afterAll(() => Fs.rmSync(directory, { recursive: true, force: true }))

const Spawner = NodeSupervisedSpawner.layerOptions({ directory }).pipe(
  Layer.provide(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer))
)

/** The live processes whose command line has `word` as an argument. */
const pidsWith = (word: string): Array<number> =>
  Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number).filter((pid) => {
    try {
      return Fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").some((arg) => arg.includes(word)) &&
        isAlive(pid)
    } catch {
      return false
    }
  })

const commands = [
  ["directly", ChildProcess.make(process.execPath, [everything, "stdio"])],
  ["through sh -c", ChildProcess.make("sh", ["-c", `"${process.execPath}" "${everything}" stdio; echo done`])]
] as const

describe("McpClient.layerStdio over NodeSupervisedSpawner", () => {
  for (const [how, command] of commands) {
    it.live(
      `server-everything started ${how}: tools listed and called, nothing left after the close`,
      () =>
        Effect.gen(function*() {
          const seen = yield* Effect.gen(function*() {
            const client = yield* McpClient.McpClient
            const tools = yield* client.listTools()
            const echo = tools.find((tool) => tool.name === "echo")
            assert.isDefined(echo)
            const result = yield* client.callTool({ tool: echo!, arguments: { message: "through Lifeline" } })
            assert.include(JSON.stringify(result.content), "through Lifeline")
            return pidsWith(everything)
          }).pipe(
            Effect.provide(
              McpClient.layerStdio({
                name: "lifeline-test",
                version: "0.1.0",
                command,
                protocol: McpProtocol.v2025_11_25
              }).pipe(Layer.provide(Spawner))
            )
          )
          assert.isAbove(seen.length, 0)
          assert.deepStrictEqual(pidsWith(everything), [])
        }),
      { timeout: 60_000 }
    )
  }

  it.live(
    "examples/effect-mcp lists and calls server-everything's tools through sh -c, and leaves no server",
    () =>
      Effect.gen(function*() {
        const root = Path.join(here, "..")
        const run = yield* Effect.promise(() =>
          new Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resolve) => {
            const child = NodeProcess.spawn(process.execPath, [
              Path.join(root, "scripts", "run-bundled.mjs"),
              Path.join(root, "examples", "effect-mcp", "effect-mcp.ts"),
              "--server",
              `"${process.execPath}" "${everything}" stdio`,
              "--tool",
              "echo",
              "--arguments",
              JSON.stringify({ message: "from the example" })
            ], { cwd: root, env: { ...process.env, XDG_STATE_HOME: directory }, stdio: ["ignore", "pipe", "pipe"] })
            let stdout = ""
            let stderr = ""
            child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
            child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
            child.on("exit", (code) => resolve({ code, stdout, stderr }))
          })
        )
        assert.strictEqual(run.code, 0, run.stderr)
        const printed = JSON.parse(run.stdout) as { protocolVersion: string; tools: Array<string>; result: unknown }
        assert.strictEqual(printed.protocolVersion, "2025-11-25")
        assert.include(printed.tools, "echo")
        assert.include(JSON.stringify(printed.result), "from the example")
        assert.deepStrictEqual(pidsWith(everything), [])
      }),
    { timeout: 60_000 }
  )
})
