#!/usr/bin/env node
// Packs every package (`pnpm --filter <pkg> pack`) into a temporary directory and checks each tarball as a user
// would get it: `exports` from `publishConfig` (types and import per entry, under dist/, every target in the
// tarball), no `workspace:` dependency, no `publishConfig` left. Prints each tarball's size. Run `pnpm build` first:
// `pnpm exec node scripts/pack-check.mjs`. Exits 1 on the first failed check.
import { execFileSync } from "node:child_process"
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const packages = ["jsonrpc", "kernel", "node", "sqlite", "hermes", "hermes-node"]
const destination = mkdtempSync(join(tmpdir(), "lifeline-pack-"))
const failures = []

try {
  for (const name of packages) {
    execFileSync("pnpm", ["--filter", `@lifeline/${name}`, "pack", "--pack-destination", destination], {
      cwd: root,
      stdio: ["ignore", "ignore", "inherit"]
    })
  }
  for (const tarball of readdirSync(destination).filter((file) => file.endsWith(".tgz")).sort()) {
    const path = join(destination, tarball)
    const files = new Set(execFileSync("tar", ["-tzf", path], { encoding: "utf8" }).trim().split("\n"))
    const manifest = JSON.parse(execFileSync("tar", ["-xzOf", path, "package/package.json"], { encoding: "utf8" }))
    const fail = (message) => failures.push(`${tarball}: ${message}`)
    const entry = manifest.exports?.["."]
    if (entry?.types !== "./dist/index.d.ts" || entry?.import !== "./dist/index.js") fail("exports[\".\"] not in dist")
    if (manifest.exports?.["./internal/*"] !== null) fail("exports[\"./internal/*\"] is not null")
    if (manifest.publishConfig !== undefined) fail("publishConfig left in the packed manifest")
    for (const target of [entry?.types, entry?.import, `${entry?.import}.map`]) {
      if (typeof target === "string" && !files.has(`package/${target.slice(2)}`)) {
        fail(`${target} missing (pnpm build?)`)
      }
    }
    for (const field of ["dependencies", "peerDependencies", "optionalDependencies"]) {
      for (const [dependency, version] of Object.entries(manifest[field] ?? {})) {
        if (String(version).startsWith("workspace:")) fail(`${field}.${dependency} is ${version}`)
      }
    }
    process.stdout.write(`${tarball}  ${(statSync(path).size / 1024).toFixed(1)} KiB  ${files.size} files\n`)
  }
} finally {
  rmSync(destination, { recursive: true, force: true })
}
if (failures.length > 0) {
  process.stderr.write(`${failures.join("\n")}\n`)
  process.exit(1)
}
