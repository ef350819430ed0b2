#!/usr/bin/env node
// Runs a TypeScript program of this workspace as one esbuild bundle: `node scripts/run-bundled.mjs FILE.ts [args]`.
// Loading the sources through `--import tsx` takes seconds per process on a busy 2-core machine, which eats into a
// host's 10 s `initialize` bound; a bundle starts in a fraction of one. esbuild only reports errors, on stderr, so
// stdout stays the protocol channel.
import { build } from "esbuild"
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs"
import { builtinModules } from "node:module"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const [entry, ...args] = process.argv.slice(2)
if (entry === undefined) {
  process.stderr.write("usage: run-bundled.mjs FILE.ts [args...]\n")
  process.exit(2)
}
const cache = join(root, "node_modules", ".cache", "lifeline")
mkdirSync(cache, { recursive: true })
// Keyed by the entry's path in the repository: two programs may both be called main.ts.
const outfile = join(cache, `${relative(root, resolve(entry)).replace(/\.ts$/, "").replace(/[\\/]/g, "__")}.mjs`)
const metafile = `${outfile}.inputs.json`

// Node's own modules stay imports of the runtime, `node:`-prefixed or not: `node:sqlite` (the journal's SQLite) has no
// unprefixed name, and a builtin newer than esbuild's own list must not be looked up in node_modules.
const builtins = ["node:*", ...builtinModules.filter((name) => !name.startsWith("_"))]

/** The bundle is reused while none of the files it was built from changed since. */
const fresh = () => {
  if (!existsSync(outfile) || !existsSync(metafile)) return false
  const built = statSync(outfile).mtimeMs
  try {
    return JSON.parse(readFileSync(metafile, "utf8")).every((input) => statSync(join(root, input)).mtimeMs <= built)
  } catch {
    return false
  }
}

if (!fresh()) {
  // Written aside and renamed, so two processes starting at once never run a half-written bundle.
  const scratch = `${outfile}.${process.pid}.tmp.mjs`
  const result = await build({
    entryPoints: [resolve(entry)],
    absWorkingDir: root,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node24",
    outfile: scratch,
    metafile: true,
    logLevel: "error",
    external: builtins,
    banner: {
      js:
        "import { createRequire as __lifelineRequire } from 'node:module'; const require = __lifelineRequire(import.meta.url);"
    }
  })
  writeFileSync(`${metafile}.${process.pid}`, JSON.stringify(Object.keys(result.metafile.inputs)))
  renameSync(`${metafile}.${process.pid}`, metafile)
  renameSync(scratch, outfile)
}
process.argv = [process.argv[0], outfile, ...args]
await import(pathToFileURL(outfile).href)
