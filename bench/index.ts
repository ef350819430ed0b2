/**
 * `pnpm bench`: every benchmark, one after the other, each in a process of its own so one's heap and JIT state do
 * not colour the next. Each prints its own table, with ratios to vscode-jsonrpc measured in the same run.
 * `pnpm bench framing shutdown` runs only those. Each runs as an esbuild bundle, as compiled JavaScript, like the
 * vscode-jsonrpc it is compared with (see `root.ts`).
 */
import { spawnSync } from "node:child_process"
import { join } from "node:path"
import { nodeArgs, root } from "./root.js"

const all = ["framing", "peer", "shutdown", "journal", "lsp", "spawner", "mcp"] as const
const wanted = process.argv.slice(2)
const chosen = wanted.length === 0 ? all : all.filter((name) => wanted.includes(name))

let failed = 0
for (const name of chosen) {
  process.stdout.write(`\n## ${name}\n\n`)
  const started = performance.now()
  const result = spawnSync(process.execPath, ["--expose-gc", ...nodeArgs(join(root, "bench", `${name}.ts`))], {
    stdio: "inherit",
    cwd: root
  })
  if (result.status !== 0) failed++
  process.stdout.write(`\n(${name}: ${((performance.now() - started) / 1000).toFixed(0)} s, exit ${result.status})\n`)
}
process.exit(failed === 0 ? 0 : 1)
