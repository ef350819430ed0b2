/**
 * Effect's own MCP client (`McpClient.layerStdio`, which starts its server through the `ChildProcessSpawner` service)
 * over `NodeSupervisedSpawner.layer` and, side by side, over Effect's `NodeChildProcessSpawner.layer`, against the MCP
 * reference servers (`@modelcontextprotocol/server-everything` and `server-filesystem`, protocol 2025-11-25), each
 * started directly and through an `sh -c` wrapper: tools listed and called, and, read from /proc, nothing of the server
 * (its processes, its process group) left once the layer is closed; the example that does it (`examples/effect-mcp`)
 * run as a program; and a host program (fixtures/effect-mcp-host.ts) SIGKILLed with calls in flight, then started
 * again: the restarted host's start sweeps the first one's servers. (Two apps SIGKILLed and one restarted, only dead
 * owners' children swept: test/SupervisedSpawnerGuarantees.test.ts.) Effect's layer's figures are printed on stderr
 * as `[effect-mcp measured]` lines (docs/supervising-effect-children.md's table); ours are asserted.
 */
import { NodeChildProcessSpawner, NodeFileSystem, NodePath } from "@effect/platform-node"
import { afterAll, assert, describe, it, layer } from "@effect/vitest"
import { NodeSupervisedSpawner } from "@lifeline/node"
import { Effect, Layer } from "effect"
import { McpClient, McpProtocol } from "effect/ai"
import { ChildProcess, type ChildProcessSpawner } from "effect/process"
import * as NodeProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import * as Fixtures from "./support/fixtures.js"
import { alive, everything, filesystem, groupIdOf, groupOf, killAll, processesWith, treeOf } from "./support/mcp.js"
import { eventually, spawnLines } from "./support/processes.js"

const here = Path.dirname(Url.fileURLToPath(import.meta.url))
const node = process.execPath
const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-mcp-"))
/** The directory server-filesystem may touch: a file to read, and FIFOs whose reads wait for a writer. */
const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-mcp-root-"))
Fs.writeFileSync(Path.join(root, "hello.txt"), "hello from a file\n")
afterAll(() => {
  Fs.rmSync(directory, { recursive: true, force: true })
  Fs.rmSync(root, { recursive: true, force: true })
})
const measured = (line: string) => process.stderr.write(`[effect-mcp measured] ${line}\n`)

const platform = Layer.mergeAll(NodeFileSystem.layer, NodePath.layer)
const layers: ReadonlyArray<readonly [string, Layer.Layer<ChildProcessSpawner.ChildProcessSpawner>]> = [
  ["NodeSupervisedSpawner", NodeSupervisedSpawner.layerOptions({ directory }).pipe(Layer.provide(platform))],
  ["Effect's NodeChildProcessSpawner", NodeChildProcessSpawner.layer.pipe(Layer.provide(platform))]
]

/** Runs examples/effect-mcp as a program (bundled, as `pnpm tsx` would run it), its journal under `directory`. */
const runExample = (args: ReadonlyArray<string>) =>
  Effect.promise(() =>
    new Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resolve) => {
      const repository = Path.join(here, "..")
      const child = NodeProcess.spawn(node, [
        Path.join(repository, "scripts", "run-bundled.mjs"),
        Path.join(repository, "examples", "effect-mcp", "effect-mcp.ts"),
        ...args
      ], {
        cwd: repository,
        env: { ...process.env, XDG_STATE_HOME: directory },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let stdout = ""
      let stderr = ""
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
      child.on("exit", (code) => resolve({ code, stdout, stderr }))
    })
  )

/**
 * What is left, read from /proc, of the server processes that were `running` once the client's layer has closed: its
 * processes and anything in their groups. Printed for both layers (killed afterwards), asserted empty for ours.
 */
const leftAfterClose = (layerName: string, what: string, how: string, running: ReadonlyArray<number>) => {
  const groups = [...new Set(running.map(groupIdOf))].filter((pgid) => pgid !== undefined)
  const left = alive(running)
  const inGroups = groups.flatMap(groupOf)
  measured(`${layerName} ${what}: ${left.length} of ${running.length} left after the close`)
  killAll([...left, ...inGroups])
  assert.strictEqual(running.length, how === "directly" ? 1 : 2)
  if (layerName === "NodeSupervisedSpawner") {
    assert.deepStrictEqual(left, [])
    assert.deepStrictEqual(inGroups, [])
  }
}

interface Server {
  readonly name: string
  /** Its entry point, which is in the command line of each of its processes (the `sh -c` wrapper's too). */
  readonly entry: string
  readonly args: ReadonlyArray<string>
  readonly tool: string
  readonly arguments: Record<string, unknown>
  readonly answer: string
}

const servers: ReadonlyArray<Server> = [
  {
    name: "server-everything",
    entry: everything,
    args: ["stdio"],
    tool: "echo",
    arguments: { message: "through Lifeline" },
    answer: "through Lifeline"
  },
  {
    name: "server-filesystem",
    entry: filesystem,
    args: [root],
    tool: "read_text_file",
    arguments: { path: Path.join(root, "hello.txt") },
    answer: "hello from a file"
  }
]

const shapes = (server: Server) =>
  [
    ["directly", ChildProcess.make(node, [server.entry, ...server.args])],
    [
      "through sh -c",
      ChildProcess.make("sh", ["-c", `"${node}" "${server.entry}" ${server.args.join(" ")}; echo done`])
    ]
  ] as const

describe("McpClient.layerStdio over each spawner layer", () => {
  for (const server of servers) {
    for (const [how, command] of shapes(server)) {
      for (const [name, spawner] of layers) {
        it.live(
          `${name}: ${server.name} ${how}: tools listed and called, processes left after the close`,
          () =>
            Effect.gen(function*() {
              const running = yield* Effect.gen(function*() {
                const client = yield* McpClient.McpClient
                const tool = (yield* client.listTools()).find((candidate) => candidate.name === server.tool)
                assert.isDefined(tool)
                const result = yield* client.callTool({ tool: tool!, arguments: server.arguments })
                assert.include(JSON.stringify(result.content), server.answer)
                return processesWith(server.entry)
              }).pipe(
                Effect.provide(
                  McpClient.layerStdio({
                    name: "lifeline-test",
                    version: "0.1.0",
                    command,
                    protocol: McpProtocol.v2025_11_25
                  })
                    .pipe(Layer.provide(spawner))
                )
              )
              leftAfterClose(name, `${server.name} ${how}`, how, running)
            }),
          { timeout: 30_000 }
        )
      }
    }
  }

  for (const server of servers) {
    it.live(
      `examples/effect-mcp lists and calls ${server.name}'s tools through sh -c, and leaves no server`,
      () =>
        Effect.gen(function*() {
          const run = yield* runExample([
            "--server",
            `"${node}" "${server.entry}" ${server.args.join(" ")}`,
            "--tool",
            server.tool,
            "--arguments",
            JSON.stringify(server.arguments)
          ])
          assert.strictEqual(run.code, 0, run.stderr)
          const printed = JSON.parse(run.stdout) as { protocolVersion: string; tools: Array<string>; result: unknown }
          assert.strictEqual(printed.protocolVersion, "2025-11-25")
          assert.include(printed.tools, server.tool)
          assert.include(JSON.stringify(printed.result), server.answer)
          assert.deepStrictEqual(processesWith(server.entry), [])
        }),
      { timeout: 60_000 }
    )
  }
})

/**
 * The same over MCP 2026-07-28: Effect's client with `McpProtocol.v2026_07_28` (`server/discover`, no `initialize`)
 * against a server built on Effect's own `McpServer` speaking it (fixtures/mcp-2026-server.ts), directly and through
 * `sh -c`, and the example with `--protocol 2026-07-28`.
 */
layer(Fixtures.layer(["mcp-2026-server"]), { excludeTestServices: true, timeout: "60 seconds" })(
  "McpClient.layerStdio at 2026-07-28 against Effect's McpServer",
  (it) => {
    const modern = (programs: Fixtures.Programs["Service"]) => {
      const argv = programs.argv("mcp-2026-server")
      return { argv, entry: argv[argv.length - 1]! }
    }
    for (const how of ["directly", "through sh -c"] as const) {
      for (const [name, spawner] of layers) {
        it.effect(`${name}: ${how}: discovered, tools listed and called, processes left after the close`, () =>
          Effect.gen(function*() {
            const { argv, entry } = modern(yield* Fixtures.Programs)
            const command = how === "directly"
              ? ChildProcess.make(node, [...argv], { cwd: Fixtures.fixturesDir })
              : ChildProcess.make("sh", ["-c", `"${node}" ${argv.map((arg) => `"${arg}"`).join(" ")}; echo done`], {
                cwd: Fixtures.fixturesDir
              })
            const running = yield* Effect.gen(function*() {
              const client = yield* McpClient.McpClient
              assert.strictEqual(client.protocolVersion, "2026-07-28")
              const tools = yield* client.listTools()
              assert.includeMembers(tools.map((tool) => tool.name), ["echo", "add", "slow"])
              const result = yield* client.callTool({
                tool: tools.find((tool) => tool.name === "add")!,
                arguments: { a: 20, b: 22 }
              })
              assert.include(JSON.stringify(result.content), "42")
              return processesWith(entry)
            }).pipe(
              Effect.provide(
                McpClient.layerStdio({
                  name: "lifeline-test",
                  version: "0.1.0",
                  command,
                  protocol: McpProtocol.v2026_07_28
                })
                  .pipe(Layer.provide(spawner))
              )
            )
            leftAfterClose(name, `mcp-2026-server (Effect's McpServer) ${how}`, how, running)
          }))
      }
    }

    it.effect("examples/effect-mcp --protocol 2026-07-28 lists and calls the fixture's tools, and leaves no server", () =>
      Effect.gen(function*() {
        const { argv, entry } = modern(yield* Fixtures.Programs)
        const run = yield* runExample([
          "--protocol",
          "2026-07-28",
          "--server",
          `"${node}" ${argv.map((arg) => `"${arg}"`).join(" ")}`,
          "--tool",
          "echo",
          "--arguments",
          JSON.stringify({ text: "at 2026-07-28" })
        ])
        assert.strictEqual(run.code, 0, run.stderr)
        const printed = JSON.parse(run.stdout) as { protocolVersion: string; tools: Array<string>; result: unknown }
        assert.strictEqual(printed.protocolVersion, "2026-07-28")
        assert.includeMembers(printed.tools, ["echo", "add", "slow"])
        assert.include(JSON.stringify(printed.result), "at 2026-07-28")
        assert.deepStrictEqual(processesWith(entry), [])
      }))
  }
)

layer(Fixtures.layer(["effect-mcp-host"]), { excludeTestServices: true, timeout: "60 seconds" })("a host", (it) => {
  /**
   * Starts the host (over `spawner`: `lifeline` or `effect`) with its journal in `journal`; once its four servers are
   * each in a call, answers the processes of its servers (read from /proc, the host left out) and the writers held on
   * the FIFOs server-filesystem reads, which keep those calls waiting. With `sweeps`, the processes a dead host left
   * must be gone within 1 s of the moment its spawner layer is built (the sweep is done then): `sweptAfter` is how
   * long after that they were, `built` how long after the spawn it was.
   */
  const startHost = (spawner: "lifeline" | "effect", journal: string, sweeps: ReadonlyArray<number> = []) =>
    Effect.gen(function*() {
      const programs = yield* Fixtures.Programs
      const host = yield* spawnLines(node, programs.argv("effect-mcp-host"), {
        cwd: here,
        env: {
          ...process.env,
          MCP_LAYER: spawner,
          LIFELINE_SPAWNER_DIR: journal,
          MCP_EVERYTHING: everything,
          MCP_FILESYSTEM: filesystem,
          MCP_ROOT: root
        }
      })
      const line = (key: string) =>
        host.line(
          (text) => text.startsWith(`{"${key}"`) ? performance.now() : undefined,
          () => new Error(`the host exited: ${host.stderr()}`)
        ).pipe(Effect.timeout("30 seconds"))
      const spawned = performance.now()
      const built = yield* line("built")
      yield* eventually(() => alive(sweeps).length === 0, "the dead host's servers swept", 1000)
      const sweptAfter = performance.now() - built
      yield* line("calling")
      // The reads are in flight once a writer can open each FIFO without waiting (ENXIO while no reader has it).
      const writers: Array<number> = []
      for (const fifo of ["fifo-0", "fifo-1"]) {
        yield* eventually(() => {
          try {
            writers.push(Fs.openSync(Path.join(root, fifo), Fs.constants.O_WRONLY | Fs.constants.O_NONBLOCK))
            return true
          } catch {
            return false
          }
        }, `server-filesystem reading ${fifo}`)
      }
      yield* Effect.addFinalizer(() => Effect.sync(() => writers.forEach((fd) => Fs.closeSync(fd))))
      const servers = treeOf(host.child.pid!).filter((pid) => pid !== host.child.pid)
      // What a failing test leaves is killed at the end.
      yield* Effect.addFinalizer(() => Effect.sync(() => killAll(alive(servers))))
      return { host, servers, built: built - spawned, sweptAfter }
    })

  const fifos = Effect.acquireRelease(
    Effect.sync(() => {
      for (const fifo of ["fifo-0", "fifo-1"]) NodeProcess.execFileSync("mkfifo", [Path.join(root, fifo)])
    }),
    () => Effect.sync(() => ["fifo-0", "fifo-1"].forEach((fifo) => Fs.rmSync(Path.join(root, fifo), { force: true })))
  )

  for (const spawner of ["lifeline", "effect"] as const) {
    it.effect(`${spawner}: SIGKILLed with a call in flight on each server, then started again`, () =>
      Effect.gen(function*() {
        yield* fifos
        const journal = Fs.mkdtempSync(Path.join(directory, "journal-"))
        const first = yield* startHost(spawner, journal)
        // server-everything directly (1) and through sh -c (2), server-filesystem the same (1 + 2).
        assert.strictEqual(first.servers.length, 6)
        // Each server leads a process group of its own (the wrapper's server is in the wrapper's): none is the host's.
        assert.notInclude(first.servers.map(groupIdOf), first.host.child.pid)
        first.host.child.kill("SIGKILL")
        yield* first.host.exited
        yield* Effect.sleep("300 millis")
        // In process groups of their own, the servers outlive the host.
        const survivors = alive(first.servers)
        assert.deepStrictEqual(survivors, first.servers)

        if (spawner === "lifeline") {
          const restarted = yield* startHost(spawner, journal, first.servers)
          measured(
            `lifeline host SIGKILL: ${survivors.length} of 6 left 300 ms after the kill; 0 left ` +
              `${restarted.sweptAfter.toFixed(0)} ms after the next host's layer was built ` +
              `(${restarted.built.toFixed(0)} ms after its spawn; the first host's: ${first.built.toFixed(0)} ms)`
          )
          assert.strictEqual(restarted.servers.length, 6)
          assert.deepStrictEqual(alive(restarted.servers), restarted.servers)
        } else {
          yield* startHost(spawner, journal)
          yield* Effect.sleep("1 second")
          measured(
            `effect host SIGKILL: ${survivors.length} of 6 left 300 ms after the kill; ` +
              `${alive(first.servers).length} left 1 s after the next host's servers were in their calls`
          )
        }
      }).pipe(Effect.scoped))
  }
})
