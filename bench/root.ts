/**
 * The repository's root, found from this module's location: the benchmarks run from their sources (through tsx) or
 * from an esbuild bundle in `node_modules/.cache`, and both lie under the root.
 */
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const find = (from: string): string => {
  for (let dir = from;; dir = dirname(dir)) {
    if (existsSync(join(dir, "pnpm-workspace.yaml"))) return dir
    if (dirname(dir) === dir) throw new Error(`no pnpm-workspace.yaml above ${from}`)
  }
}

export const root: string = find(dirname(fileURLToPath(import.meta.url)))

/**
 * How to run a TypeScript program of the workspace with `node`: as a cached esbuild bundle (`scripts/run-bundled.mjs`),
 * the way vscode-jsonrpc runs from its compiled JavaScript. Through tsx, every function would be wrapped for
 * `keepNames` and every module would load through its hooks, which is not what an application ships.
 */
export const nodeArgs = (program: string): Array<string> => [join(root, "scripts", "run-bundled.mjs"), program]
