/**
 * Fails when a module of `packages/*\/src` is part of an import cycle that carries values (run by `pnpm check`).
 * Type-only imports (`import type`, `export type`, and `import { type A }` when every name is a type) are erased by the
 * compiler and do not count: a public module may import its internal body's types and the other way round. A value
 * cycle means modules that need each other to be loaded first, an order the bundler and Node settle by chance.
 *
 * Usage: `pnpm tsx scripts/check-cycles.ts` prints each cycle (its modules in import order) and exits with 1 if there is
 * one. `--all` also prints the cycles through type-only imports, for reading, without failing on them.
 *
 * Allowlist: `scripts/check-cycles.allow` (or the file given with `--allow <file>`) names modules, one path a line from
 * the repository root (`#` starts a comment). A cycle whose modules are all listed is printed but does not fail the
 * check: it is for a cycle someone is removing right now, and its lines go when that work lands. A listed module that is
 * in no cycle any more is reported, so the list only shrinks.
 *
 * @since 0.2.0
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Url from "node:url"
import ts from "typescript"

const root = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "..")
const packagesDir = Path.join(root, "packages")

const sourcesOf = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    if (entry.isDirectory()) return sourcesOf(path)
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [path] : []
  })

/** Which package directory a `@lifeline/<name>` specifier points to, and its source file for `@lifeline/<name>/<M>`. */
const packageDirs = new Map(
  Fs.readdirSync(packagesDir).filter((dir) => Fs.existsSync(Path.join(packagesDir, dir, "package.json"))).map(
    (dir) => [JSON.parse(Fs.readFileSync(Path.join(packagesDir, dir, "package.json"), "utf8")).name as string, dir]
  )
)

const resolve = (from: string, specifier: string): string | undefined => {
  if (specifier.startsWith(".")) {
    const target = Path.resolve(Path.dirname(from), specifier.replace(/\.js$/, ".ts"))
    return Fs.existsSync(target) ? target : undefined
  }
  const match = /^(@lifeline\/[^/]+)(?:\/(.+))?$/.exec(specifier)
  if (match === null) return undefined
  const dir = packageDirs.get(match[1])
  if (dir === undefined) return undefined
  const target = Path.join(packagesDir, dir, "src", `${match[2] ?? "index"}.ts`)
  if (Fs.existsSync(target)) return target
  // An entry point that is a folder of its own (`@lifeline/<name>/testing`): its index.
  const index = Path.join(packagesDir, dir, "src", match[2] ?? "", "index.ts")
  return Fs.existsSync(index) ? index : undefined
}

interface Edge {
  readonly to: string
  readonly typeOnly: boolean
}

const edgesOf = (file: string): Array<Edge> => {
  const source = ts.createSourceFile(file, Fs.readFileSync(file, "utf8"), ts.ScriptTarget.Latest, false)
  const edges: Array<Edge> = []
  for (const statement of source.statements) {
    let specifier: ts.Expression | undefined
    let typeOnly = false
    if (ts.isImportDeclaration(statement)) {
      specifier = statement.moduleSpecifier
      const clause = statement.importClause
      if (clause === undefined) typeOnly = false // a side-effect import runs the module
      else if (clause.isTypeOnly) typeOnly = true
      else {
        const bindings = clause.namedBindings
        typeOnly = clause.name === undefined && bindings !== undefined && ts.isNamedImports(bindings) &&
          bindings.elements.length > 0 && bindings.elements.every((element) => element.isTypeOnly)
      }
    } else if (ts.isExportDeclaration(statement) && statement.moduleSpecifier !== undefined) {
      specifier = statement.moduleSpecifier
      const clause = statement.exportClause
      typeOnly = statement.isTypeOnly ||
        (clause !== undefined && ts.isNamedExports(clause) && clause.elements.length > 0 &&
          clause.elements.every((element) => element.isTypeOnly))
    }
    if (specifier === undefined || !ts.isStringLiteral(specifier)) continue
    const to = resolve(file, specifier.text)
    if (to !== undefined) edges.push({ to, typeOnly })
  }
  return edges
}

/** Strongly connected components of more than one module (or a module importing itself), by Tarjan's algorithm. */
const cyclesOf = (graph: Map<string, Array<string>>): Array<Array<string>> => {
  let index = 0
  const indices = new Map<string, number>()
  const lowlinks = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const components: Array<Array<string>> = []
  const connect = (node: string) => {
    indices.set(node, index)
    lowlinks.set(node, index)
    index++
    stack.push(node)
    onStack.add(node)
    for (const next of graph.get(node) ?? []) {
      if (!indices.has(next)) {
        connect(next)
        lowlinks.set(node, Math.min(lowlinks.get(node)!, lowlinks.get(next)!))
      } else if (onStack.has(next)) lowlinks.set(node, Math.min(lowlinks.get(node)!, indices.get(next)!))
    }
    if (lowlinks.get(node) === indices.get(node)) {
      const component: Array<string> = []
      let member: string
      do {
        member = stack.pop()!
        onStack.delete(member)
        component.push(member)
      } while (member !== node)
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) components.push(component.sort())
    }
  }
  for (const node of graph.keys()) if (!indices.has(node)) connect(node)
  return components
}

const files = Fs.readdirSync(packagesDir).flatMap((dir) => {
  const src = Path.join(packagesDir, dir, "src")
  return Fs.existsSync(src) ? sourcesOf(src) : []
})
const valueGraph = new Map<string, Array<string>>()
const anyGraph = new Map<string, Array<string>>()
for (const file of files) {
  const edges = edgesOf(file)
  valueGraph.set(file, edges.filter((edge) => !edge.typeOnly).map((edge) => edge.to))
  anyGraph.set(file, edges.map((edge) => edge.to))
}

const allowFlag = process.argv.indexOf("--allow")
const allowFile = allowFlag >= 0
  ? Path.resolve(process.argv[allowFlag + 1])
  : Path.join(root, "scripts", "check-cycles.allow")
const allowed = new Set(
  Fs.existsSync(allowFile)
    ? Fs.readFileSync(allowFile, "utf8").split("\n").map((line) => line.replace(/#.*/, "").trim()).filter((line) =>
      line.length > 0
    ).map((line) => Path.resolve(root, line))
    : []
)

const show = (cycle: ReadonlyArray<string>) => cycle.map((file) => Path.relative(root, file)).join(", ")
const allCycles = cyclesOf(valueGraph)
const isAllowed = (cycle: ReadonlyArray<string>) => cycle.every((file) => allowed.has(file))
const valueCycles = allCycles.filter((cycle) => !isAllowed(cycle))
const allowedCycles = allCycles.filter(isAllowed)
for (const cycle of allowedCycles) process.stderr.write(`check-cycles: allowed (being removed): ${show(cycle)}\n`)
const inCycles = new Set(allowedCycles.flat())
for (const file of allowed) {
  if (!inCycles.has(file)) {
    process.stderr.write(
      `check-cycles: ${Path.relative(root, file)} is in no value cycle now: remove it from the allowlist\n`
    )
  }
}
if (process.argv.includes("--all")) {
  const typeCycles = cyclesOf(anyGraph)
  process.stdout.write(`${typeCycles.length} cycles through any import (type-only included):\n`)
  for (const cycle of typeCycles) process.stdout.write(`  ${show(cycle)}\n`)
}
if (valueCycles.length === 0) {
  process.stderr.write(
    `check-cycles: ${files.length} modules, no cycle through value imports${
      allowedCycles.length > 0 ? ` outside the allowlist (${allowedCycles.length} allowed)` : ""
    }\n`
  )
} else {
  process.stderr.write(`check-cycles: ${valueCycles.length} cycle(s) through value imports:\n`)
  for (const cycle of valueCycles) process.stderr.write(`  ${show(cycle)}\n`)
  process.stderr.write(
    "Move what both sides need into a small module that imports neither, or import only types across the cycle.\n"
  )
  process.exit(1)
}
