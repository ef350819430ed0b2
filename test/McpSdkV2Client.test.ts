/**
 * The v2 SDK's `Client` (`@modelcontextprotocol/client` 2.4) over its own `StdioClientTransport` and over
 * `@lifeline/mcp`'s: server-everything through `sh -c` and server-filesystem directly and through `sh -c` (tools listed
 * and called, processes left after `close()`), and a server that ignores the end of its stdin and SIGTERM, with a
 * helper (ours, with short bounds: nothing left).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Lifeline from "@lifeline/mcp/StdioClientTransport"
import { Client } from "@modelcontextprotocol/client"
import * as V2 from "@modelcontextprotocol/client/stdio"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { alive, everything, filesystem, groupOf, killAll, stubborn, treeOf } from "./support/mcp.js"

const journalDirectory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-mcp-v2-"))
/** The directory server-filesystem may touch, with a file to read. */
const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-mcp-v2-root-"))
Fs.writeFileSync(Path.join(root, "hello.txt"), "hello from a file\n")
afterAll(() => {
  Fs.rmSync(journalDirectory, { recursive: true, force: true })
  Fs.rmSync(root, { recursive: true, force: true })
})

const measured = (line: string) => process.stderr.write(`[mcp measured] ${line}\n`)
const wrapped = { command: "sh", args: ["-c", `"${process.execPath}" "${everything}" stdio; echo done >&2`] }

describe("the v2 SDK's Client", () => {
  for (const which of ["v2", "lifeline"] as const) {
    it(`${which}: server-everything through sh -c: tools listed and called, processes left after close()`, async () => {
      const transport = which === "v2"
        ? new V2.StdioClientTransport({ ...wrapped, stderr: "ignore" })
        : new Lifeline.StdioClientTransport({ ...wrapped, stderr: "ignore", journalDirectory })
      const client = new Client({ name: "lifeline-test", version: "1.0.0" })
      await client.connect(transport)
      const tools = await client.listTools()
      assert.isTrue(tools.tools.some((tool) => tool.name === "echo"))
      const result = await client.callTool({ name: "echo", arguments: { message: "v2" } })
      assert.include(JSON.stringify(result.content), "v2")
      const tree = treeOf(transport.pid!)
      await client.close()
      const left = alive(tree)
      measured(`${which} client, everything through sh -c: ${left.length} of ${tree.length} left after close`)
      killAll(left)
      if (which === "lifeline") assert.deepStrictEqual(left, [])
    }, 20_000)
  }

  const files = [
    ["directly", { command: process.execPath, args: [filesystem, root] }],
    ["through sh -c", { command: "sh", args: ["-c", `"${process.execPath}" "${filesystem}" "${root}"; echo done >&2`] }]
  ] as const
  for (const [shape, parameters] of files) {
    for (const which of ["v2", "lifeline"] as const) {
      it(`${which}: server-filesystem ${shape}: a file read, processes left after close()`, async () => {
        const transport = which === "v2"
          ? new V2.StdioClientTransport({ ...parameters, args: [...parameters.args], stderr: "ignore" })
          : new Lifeline.StdioClientTransport({
            ...parameters,
            args: [...parameters.args],
            stderr: "ignore",
            journalDirectory
          })
        const client = new Client({ name: "lifeline-test", version: "1.0.0" })
        await client.connect(transport)
        const result = await client.callTool({
          name: "read_text_file",
          arguments: { path: Path.join(root, "hello.txt") }
        })
        assert.include(JSON.stringify(result.content), "hello from a file")
        const tree = treeOf(transport.pid!)
        await client.close()
        const left = alive(tree)
        measured(`${which} client, filesystem ${shape}: ${left.length} of ${tree.length} left after close`)
        killAll(left)
        if (which === "lifeline") assert.deepStrictEqual(left, [])
      }, 20_000)
    }
  }

  it("lifeline: a server that ignores end of stdin and SIGTERM, with a helper: nothing left", async () => {
    const transport = new Lifeline.StdioClientTransport({
      command: process.execPath,
      args: [stubborn],
      stderr: "ignore",
      exitTimeout: "200 millis",
      killGrace: "300 millis",
      journalDirectory
    })
    const client = new Client({ name: "lifeline-test", version: "1.0.0" })
    await client.connect(transport)
    const pid = transport.pid!
    assert.strictEqual(groupOf(pid).length, 2)
    await client.close()
    assert.deepStrictEqual(groupOf(pid), [])
  }, 20_000)
})
