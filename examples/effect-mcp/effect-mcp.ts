/**
 * Effect's own MCP client (`McpClient.layerStdio`) with every server it starts supervised by Lifeline: the only
 * Lifeline line is the spawner layer (`NodeSupervisedSpawner.layer` in place of `NodeChildProcessSpawner.layer`). It
 * starts the server given by `--server` (a shell command line, so wrappers such as `npx` or `uvx` work), lists its
 * tools, calls `--tool` with `--arguments` (JSON) if given, prints what it got as one JSON line, and closes: the
 * server's whole process group is gone when the program ends, and a run that is killed is swept by the next one.
 * docs/supervising-effect-children.md explains what the layer adds.
 *
 *   pnpm tsx examples/effect-mcp/effect-mcp.ts --server "npx -y @modelcontextprotocol/server-everything" --tool echo \
 *     --arguments '{"message":"hi"}'
 *   pnpm tsx examples/effect-mcp/effect-mcp.ts --server "npx -y @modelcontextprotocol/server-filesystem /tmp" \
 *     --tool list_allowed_directories
 *   pnpm tsx examples/effect-mcp/effect-mcp.ts --protocol 2026-07-28 \
 *     --server "pnpm tsx test/fixtures/mcp-2026-server.ts" --tool add --arguments '{"a":1,"b":2}'
 *
 * `--protocol` picks the MCP version Effect's client speaks: `2025-11-25` (the default: `initialize`, what the
 * reference servers speak) or `2026-07-28` (`server/discover`, no `initialize`; Effect's client does not fall back, so
 * the server must speak it, as test/fixtures/mcp-2026-server.ts, built on Effect's own `McpServer`, does).
 *
 * `test/EffectMcpClient.test.ts` runs it against the three (installed or bundled, started with `node`).
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeSupervisedSpawner from "@lifeline/node/NodeSupervisedSpawner"
import * as McpClient from "effect/ai/McpClient"
import * as McpProtocol from "effect/ai/McpProtocol"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ChildProcess from "effect/process/ChildProcess"
import * as Util from "node:util"

const { values } = Util.parseArgs({
  options: {
    server: { type: "string" },
    tool: { type: "string" },
    arguments: { type: "string" },
    protocol: { type: "string", default: "2025-11-25" }
  },
  strict: true
})
const protocols = { "2025-11-25": McpProtocol.v2025_11_25, "2026-07-28": McpProtocol.v2026_07_28 } as const
const isProtocol = (name: string): name is keyof typeof protocols => Object.hasOwn(protocols, name)
if (values.server === undefined || !isProtocol(values.protocol)) {
  process.stderr.write(
    "usage: effect-mcp.ts --server \"<command line>\" [--protocol 2025-11-25|2026-07-28] [--tool NAME] " +
      "[--arguments JSON]\n"
  )
  process.exit(2)
}

const Spawner = NodeSupervisedSpawner.layer.pipe(Layer.provide(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer)))

const Client = McpClient.layerStdio({
  name: "lifeline-effect-mcp",
  version: "0.1.0",
  command: ChildProcess.make("sh", ["-c", values.server]),
  protocol: protocols[values.protocol]
}).pipe(Layer.provide(Spawner))

const main = Effect.gen(function*() {
  const client = yield* McpClient.McpClient
  const tools = yield* client.listTools()
  const tool = values.tool === undefined ? undefined : tools.find((candidate) => candidate.name === values.tool)
  if (values.tool !== undefined && tool === undefined) return yield* Effect.fail(`no tool named ${values.tool}`)
  const result = tool === undefined ? undefined : yield* client.callTool({
    tool,
    arguments: values.arguments === undefined ? {} : JSON.parse(values.arguments)
  })
  process.stdout.write(`${
    JSON.stringify({
      protocolVersion: client.protocolVersion,
      server: client.serverInfo?.name,
      tools: tools.map((candidate) => candidate.name),
      result: result?.content
    })
  }\n`)
}).pipe(Effect.provide(Client))

NodeRuntime.runMain(main)
