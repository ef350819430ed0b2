/**
 * Effect's own MCP client (`McpClient.layerStdio`, which starts its server through the `ChildProcessSpawner` service)
 * over `NodeSupervisedSpawner.layer`, against the MCP reference server (`@modelcontextprotocol/server-everything`,
 * protocol 2025-11-25), started directly and through an `sh -c` wrapper: tools listed and called, and nothing of the
 * server left once the layer is closed.
 */
import { NodeFileSystem, NodePath } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { NodeSupervisedSpawner } from "@lifeline/node"
import { Effect, Layer } from "effect"
import { McpClient, McpProtocol } from "effect/ai"
import { ChildProcess } from "effect/process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import { isAlive } from "./support/processes.js"

const here = Path.dirname(Url.fileURLToPath(import.meta.url))
const everything = Path.join(here, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-mcp-"))

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
})
