/**
 * `pnpm bench`: every benchmark, one after the other, each in a process of its own so one's heap and JIT state do
 * not colour the next. Each prints its own table, with ratios to vscode-jsonrpc measured in the same run.
 * `pnpm bench framing shutdown` runs only those.
 */
import { spawnSync } from "node:child_process"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))
const all = ["framing", "peer", "shutdown", "journal", "lsp"] as const
const wanted = process.argv.slice(2)
const chosen = wanted.length === 0 ? all : all.filter((name) => wanted.includes(name))

let failed = 0
for (const name of chosen) {
  process.stdout.write(`\n## ${name}\n\n`)
  const started = performance.now()
  const result = spawnSync(process.execPath, ["--expose-gc", "--import", "tsx", join(here, `${name}.ts`)], {
    stdio: "inherit",
    cwd: join(here, "..")
  })
  if (result.status !== 0) failed++
  process.stdout.write(`\n(${name}: ${((performance.now() - started) / 1000).toFixed(0)} s, exit ${result.status})\n`)
}
process.exit(failed === 0 ? 0 : 1)
