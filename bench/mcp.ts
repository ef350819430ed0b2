/**
 * What `@lifeline/mcp`'s transport costs a host at `close()`, against the MCP SDK's `StdioClientTransport` in the same
 * run, closes interleaved so both see the same machine. Each row a median with its spread (p25–p75, min–max) over
 * `--repeats` (default 100), from `close()` until it returns, the server started and settled (20 ms) before:
 *
 * - `cat`, which exits at once at the end of its stdin;
 * - a Node server (`node -e`) that exits at the end of its stdin, as a well-behaved MCP server does.
 *
 * One server of ours stays open meanwhile, as in a host with several servers (the first `start()` of a process builds
 * the transport's runtime and sweeps the journal; the last `close()` disposes it).
 *
 * Run with `pnpm bench mcp` or `pnpm tsx bench/mcp.ts --repeats=20`.
 */
import * as Sdk from "@modelcontextprotocol/sdk/client/stdio.js"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import * as Lifeline from "../packages/mcp/src/StdioClientTransport.js"
import { cell, spreadOf } from "./spread.js"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const servers: ReadonlyArray<readonly [string, Sdk.StdioServerParameters]> = [
  ["close of `cat`", { command: "cat" }],
  ["close of a Node server that exits at the end of stdin", {
    command: process.execPath,
    args: ["-e", "process.stdin.resume(); process.stdin.on('end', () => process.exit(0))"]
  }]
]

/** Measures both transports, one close of each in turn. */
export const run = async (repeats = 100) => {
  const journalDirectory = mkdtempSync(join(tmpdir(), "lifeline-bench-mcp-"))
  const keep = new Lifeline.StdioClientTransport({ command: "cat", journalDirectory })
  await keep.start()
  try {
    const rows = []
    for (const [measure, parameters] of servers) {
      const sample = async (which: "sdk" | "ours") => {
        const transport = which === "sdk"
          ? new Sdk.StdioClientTransport(parameters)
          : new Lifeline.StdioClientTransport({ ...parameters, journalDirectory })
        await transport.start()
        await sleep(20)
        const start = performance.now()
        await transport.close()
        return performance.now() - start
      }
      const times = { sdk: [] as Array<number>, ours: [] as Array<number> }
      // A warm-up of each, not counted.
      await sample("sdk")
      await sample("ours")
      for (let i = 0; i < repeats; i++) {
        times.sdk.push(await sample("sdk"))
        times.ours.push(await sample("ours"))
      }
      const [sdk, ours] = [spreadOf(times.sdk), spreadOf(times.ours)]
      rows.push({ measure, sdk, ours, ratio: ours.median / sdk.median })
    }
    return rows
  } finally {
    await keep.close()
    rmSync(journalDirectory, { recursive: true, force: true })
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const repeats = Number(
    /^--repeats=(\d+)$/.exec(process.argv.find((arg) => arg.startsWith("--repeats=")) ?? "")?.[1] ?? 100
  )
  run(repeats).then((rows) => {
    process.stdout.write(
      `| measure (n=${repeats}) | SDK StdioClientTransport | @lifeline/mcp | ratio |\n| --- | --- | --- | --- |\n`
    )
    for (const row of rows) {
      process.stdout.write(`| ${row.measure} | ${cell(row.sdk)} | ${cell(row.ours)} | ${row.ratio.toFixed(2)}× |\n`)
    }
  })
}
