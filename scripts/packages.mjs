#!/usr/bin/env node
// Builds and packs the published packages, so that a clean checkout gives installable tarballs in one command.
//
//   node scripts/packages.mjs build [name ...]   compile each named package (default: all) and the packages it depends
//                                                on, in dependency order; one whose dist/ is newer than its sources and
//                                                whose dependencies were not rebuilt is skipped
//   node scripts/packages.mjs build --self       the package in the current directory (its `prepack` script)
//   node scripts/packages.mjs pack [--out DIR]   build everything, pack every package into DIR (default build/packs)
//                                                and check each tarball as a user gets it
//
// Root scripts: `pnpm build`, `pnpm pack:all`. Each package's `prepack` runs `build --self`, so `pnpm pack` of one
// package never ships a tarball whose `exports` point at a dist/ that is not there.
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { basename, dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const packagesDir = join(root, "packages")
const tsc = createRequire(join(root, "package.json")).resolve("typescript/bin/tsc")
// Outside dist/, so that it is never packed; build/ is ignored by git.
const stampOf = (dir) => join(root, "build", "stamps", dir)

const manifests = new Map(
  readdirSync(packagesDir)
    .filter((dir) => existsSync(join(packagesDir, dir, "tsconfig.build.json")))
    .map((dir) => [dir, JSON.parse(readFileSync(join(packagesDir, dir, "package.json"), "utf8"))])
)
const dirOf = new Map([...manifests].map(([dir, manifest]) => [manifest.name, dir]))

/** The @lifeline packages `dir` depends on (its published dependencies), as directory names. */
const dependenciesOf = (dir) =>
  Object.keys(manifests.get(dir).dependencies ?? {}).filter((name) => dirOf.has(name)).map((name) => dirOf.get(name))

/** `dirs` and everything they depend on, each after its dependencies. */
const inOrder = (dirs) => {
  const ordered = []
  const visit = (dir, path) => {
    if (ordered.includes(dir)) return
    if (path.includes(dir)) throw new Error(`a dependency cycle: ${[...path, dir].join(" -> ")}`)
    for (const dependency of dependenciesOf(dir)) visit(dependency, [...path, dir])
    ordered.push(dir)
  }
  for (const dir of dirs) visit(dir, [])
  return ordered
}

const newestIn = (path) => {
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  let newest = stat.mtimeMs
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestIn(join(path, entry)))
  return newest
}

const build = (dirs) => {
  const rebuilt = new Set()
  for (const dir of inOrder(dirs)) {
    const packageDir = join(packagesDir, dir)
    const stamp = stampOf(dir)
    const sources = Math.max(
      newestIn(join(packageDir, "src")),
      statSync(join(packageDir, "tsconfig.build.json")).mtimeMs,
      statSync(join(packageDir, "package.json")).mtimeMs
    )
    const upToDate = existsSync(stamp) && statSync(stamp).mtimeMs >= sources &&
      !dependenciesOf(dir).some((dependency) => rebuilt.has(dependency))
    if (upToDate) continue
    const started = performance.now()
    // A stale dist/ may hold modules whose source is gone: start from nothing.
    rmSync(join(packageDir, "dist"), { recursive: true, force: true })
    execFileSync(process.execPath, [tsc, "-p", join(packageDir, "tsconfig.build.json")], { stdio: "inherit" })
    mkdirSync(dirname(stamp), { recursive: true })
    writeFileSync(stamp, "")
    rebuilt.add(dir)
    process.stderr.write(`built ${manifests.get(dir).name} in ${((performance.now() - started) / 1000).toFixed(1)} s\n`)
  }
}

/** Checks a tarball as a user gets it; returns what is wrong. */
const check = (path) => {
  const failures = []
  const files = new Set(execFileSync("tar", ["-tzf", path], { encoding: "utf8" }).trim().split("\n"))
  const manifest = JSON.parse(execFileSync("tar", ["-xzOf", path, "package/package.json"], { encoding: "utf8" }))
  const entry = manifest.exports?.["."]
  if (entry?.types !== "./dist/index.d.ts" || entry?.import !== "./dist/index.js") {
    failures.push("exports[\".\"] is not in dist/")
  }
  if (manifest.exports?.["./internal/*"] !== null) failures.push("exports[\"./internal/*\"] is not null")
  // `require` matches `default`, not `import`: without it a CommonJS program cannot load the package (Node >= 20.19
  // and >= 22.12 load an ES module graph from `require`).
  for (const [subpath, target] of Object.entries(manifest.exports ?? {})) {
    if (target !== null && typeof target === "object" && target.default !== target.import) {
      failures.push(`exports["${subpath}"] has no default condition equal to its import condition`)
    }
  }
  if (manifest.publishConfig !== undefined) failures.push("publishConfig is left in the packed manifest")
  for (const target of [entry?.types, entry?.import, `${entry?.import}.map`]) {
    if (typeof target === "string" && !files.has(`package/${target.slice(2)}`)) failures.push(`${target} is missing`)
  }
  // A bin runs as a file of its own: it must be packed and start with the line that names its interpreter.
  for (const [name, target] of Object.entries(manifest.bin ?? {})) {
    const file = `package/${String(target).replace(/^\.\//, "")}`
    if (!files.has(file)) failures.push(`bin ${name}: ${target} is missing`)
    else if (!execFileSync("tar", ["-xzOf", path, file], { encoding: "utf8" }).startsWith("#!/usr/bin/env node\n")) {
      failures.push(`bin ${name}: ${target} does not start with #!/usr/bin/env node`)
    }
  }
  for (const field of ["dependencies", "peerDependencies", "optionalDependencies"]) {
    for (const [dependency, version] of Object.entries(manifest[field] ?? {})) {
      if (String(version).startsWith("workspace:")) failures.push(`${field}.${dependency} is ${version}`)
    }
  }
  return failures
}

const pack = (out) => {
  build([...manifests.keys()])
  mkdirSync(out, { recursive: true })
  for (const file of readdirSync(out).filter((file) => file.endsWith(".tgz"))) rmSync(join(out, file))
  const failures = []
  for (const [dir, manifest] of manifests) {
    if (manifest.private === true) continue
    execFileSync("pnpm", ["pack", "--pack-destination", out], {
      cwd: join(packagesDir, dir),
      stdio: ["ignore", "ignore", "inherit"]
    })
  }
  for (const tarball of readdirSync(out).filter((file) => file.endsWith(".tgz")).sort()) {
    const path = join(out, tarball)
    for (const failure of check(path)) failures.push(`${tarball}: ${failure}`)
    process.stdout.write(`${relative(process.cwd(), path)}  ${(statSync(path).size / 1024).toFixed(1)} KiB\n`)
  }
  if (failures.length > 0) {
    process.stderr.write(`${failures.join("\n")}\n`)
    process.exit(1)
  }
}

const [command, ...args] = process.argv.slice(2)
if (command === "build") {
  if (args[0] === "--self") build([basename(process.cwd())])
  else build(args.length === 0 ? [...manifests.keys()] : args)
} else if (command === "pack") {
  const at = args.indexOf("--out")
  pack(resolve(at === -1 ? join(root, "build", "packs") : args[at + 1]))
} else {
  process.stderr.write("usage: node scripts/packages.mjs build [name ...] | build --self | pack [--out DIR]\n")
  process.exit(2)
}
