/**
 * Type-checks every TypeScript snippet a reader sees: each ```ts block inside a JSDoc `@example` of
 * `packages/*\/src/**\/*.ts`, and each ```ts block of `README.md` and `docs/*.md`.
 *
 * Every block is written to `build/examples/` as its own module (with `export {}` appended, so top-level names of
 * different blocks never clash) and all of them are checked in one `tsc --noEmit -p build/examples/tsconfig.json`,
 * whose config extends `tsconfig.base.json` with `types: ["node"]` and `noUnusedLocals: false` (a snippet may define
 * something for the reader without using it). Errors are printed against the source file and line of the snippet.
 *
 * Conventions:
 * - Only fences opened as ```ts or ```typescript are checked; ```js, ```sh, ```json and bare fences are prose.
 * - Continuation (Markdown only): a block whose fence is directly preceded by the line
 *   `<!-- check-examples: continues -->` is appended to the previous checked block of the same file, and the two (or
 *   more) are checked as one module. Use it when a block relies on the imports or definitions of an earlier one.
 *   To continue an earlier block that is not the previous one, name it with `<!-- check-examples: name NAME -->`
 *   before its fence and continue it with `<!-- check-examples: continues NAME -->` (a chain keeps its name).
 * - JSDoc `@example` blocks are always standalone: each one imports what it uses.
 *
 * Usage: `pnpm tsx scripts/check-examples.ts` (run by `pnpm check`); exits with 1 when any block fails.
 *
 * @since 0.1.0
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Url from "node:url"

const root = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "..")
const outDir = Path.join(root, "build", "examples")

const marker = /^<!-- check-examples: (name|continues)(?: ([\w-]+))? -->$/

/**
 * Source files whose snippets are not checked for now, relative to the repository root; a trailing `/` excludes a
 * folder.
 */
const excludedSources: ReadonlyArray<string> = []

/**
 * Blocks known to fail, keyed `path:line` (the line of the opening fence), each with the reason it is not fixed yet.
 * A listed block that passes is reported, so the list cannot go stale silently.
 */
const allowList: Readonly<Record<string, string>> = {}

interface Block {
  readonly source: string
  /** For each line of `code`, the 1-based line of the source file it comes from. */
  readonly lines: Array<number>
  readonly code: Array<string>
  /** The line of the opening fence of the first block, the key of `allowList`. */
  readonly fence: number
}

const isTsFence = (line: string): boolean => /^```(ts|typescript)\s*$/.test(line.trim())
const isFence = (line: string): boolean => line.trim().startsWith("```")

const isExcluded = (source: string): boolean =>
  excludedSources.some((entry) => entry.endsWith("/") ? source.startsWith(entry) : source === entry)

/** The ```ts blocks of the `@example` sections of a TypeScript file's JSDoc comments. */
const jsdocBlocks = (source: string, text: string): Array<Block> => {
  const blocks: Array<Block> = []
  const lines = text.split("\n")
  let inComment = false
  let inExample = false
  let current: Block | undefined
  lines.forEach((raw, index) => {
    const trimmed = raw.trim()
    if (!inComment) {
      if (trimmed.startsWith("/**")) {
        inComment = !trimmed.includes("*/", 3)
        inExample = false
      }
      return
    }
    if (trimmed.startsWith("*/")) {
      inComment = false
      current = undefined
      return
    }
    const line = raw.replace(/^\s*\* ?/, "")
    if (current !== undefined) {
      if (isFence(line)) {
        blocks.push(current)
        current = undefined
      } else {
        current.code.push(line)
        current.lines.push(index + 1)
      }
      return
    }
    if (line.startsWith("@")) inExample = line.startsWith("@example")
    if (inExample && isTsFence(line)) current = { source, lines: [], code: [], fence: index + 1 }
  })
  return blocks
}

/** The ```ts blocks of a Markdown file, continued blocks merged into the block they continue. */
const markdownBlocks = (source: string, text: string): Array<Block> => {
  const blocks: Array<Block> = []
  const lines = text.split("\n")
  const named = new Map<string, Block>()
  let current: Block | undefined
  let inOtherFence = false
  lines.forEach((line, index) => {
    if (current !== undefined) {
      if (isFence(line)) {
        blocks.push(current)
        current = undefined
      } else {
        current.code.push(line)
        current.lines.push(index + 1)
      }
      return
    }
    if (inOtherFence) {
      if (isFence(line)) inOtherFence = false
      return
    }
    if (isTsFence(line)) {
      const directive = index > 0 ? marker.exec(lines[index - 1].trim()) : null
      if (directive !== null && directive[1] === "continues") {
        const name = directive[2]
        const previous = name === undefined ? blocks.at(-1) : named.get(name)
        if (previous === undefined) throw new Error(`${source}:${index + 1}: continues a block that is not there`)
        blocks.splice(blocks.indexOf(previous), 1)
        current = previous
      } else {
        current = { source, lines: [], code: [], fence: index + 1 }
        if (directive !== null && directive[2] !== undefined) named.set(directive[2], current)
        else if (directive !== null) throw new Error(`${source}:${index}: \`name\` needs a name`)
      }
    } else if (isFence(line)) {
      inOtherFence = true
    }
  })
  return blocks
}

const walk = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    return entry.isDirectory() ? walk(path) : [path]
  })

const collect = (): Array<Block> => {
  const relative = (path: string): string => Path.relative(root, path).split(Path.sep).join("/")
  const packagesDir = Path.join(root, "packages")
  const tsFiles = Fs.readdirSync(packagesDir)
    .map((name) => Path.join(packagesDir, name, "src"))
    .filter((dir) => Fs.existsSync(dir))
    .flatMap(walk)
    .filter((path) => path.endsWith(".ts") && !path.endsWith(".d.ts"))
  const docsDir = Path.join(root, "docs")
  const mdFiles = [
    Path.join(root, "README.md"),
    ...Fs.readdirSync(docsDir).filter((name) => name.endsWith(".md")).map((name) => Path.join(docsDir, name))
  ]
  return [
    ...tsFiles.map(relative).filter((source) => !isExcluded(source)).sort().flatMap((source) =>
      jsdocBlocks(source, Fs.readFileSync(Path.join(root, source), "utf8"))
    ),
    ...mdFiles.map(relative).filter((source) => !isExcluded(source)).flatMap((source) =>
      markdownBlocks(source, Fs.readFileSync(Path.join(root, source), "utf8"))
    )
  ]
}

const main = (): number => {
  const started = Date.now()
  const blocks = collect()
  Fs.rmSync(outDir, { recursive: true, force: true })
  Fs.mkdirSync(outDir, { recursive: true })
  const byFile = new Map<string, Block>()
  blocks.forEach((block, index) => {
    const name = `${String(index).padStart(4, "0")}-${block.source.replace(/[/.]/g, "_")}-${block.fence}.ts`
    byFile.set(name, block)
    Fs.writeFileSync(Path.join(outDir, name), [...block.code, "export {}", ""].join("\n"))
  })
  const tsconfig = {
    extends: "../../tsconfig.base.json",
    include: ["*.ts"],
    compilerOptions: {
      composite: false,
      incremental: false,
      declaration: false,
      emitDeclarationOnly: false,
      noEmit: true,
      types: ["node"],
      noUnusedLocals: false
    }
  }
  Fs.writeFileSync(Path.join(outDir, "tsconfig.json"), JSON.stringify(tsconfig, null, 2) + "\n")

  const tsc = ChildProcess.spawnSync(
    process.execPath,
    [Path.join(root, "node_modules", "typescript", "bin", "tsc"), "--noEmit", "--pretty", "false", "-p", outDir],
    { cwd: root, encoding: "utf8" }
  )
  if (tsc.error !== undefined) throw tsc.error

  const failures = new Map<Block, Array<string>>()
  const elsewhere: Array<string> = []
  let last: Array<string> | undefined
  for (const line of tsc.stdout.split("\n")) {
    if (line.trim() === "") continue
    const match = /^(.*?)\((\d+),(\d+)\): (.*)$/.exec(line)
    const block = match === null ? undefined : byFile.get(Path.basename(match[1]))
    if (match !== null && block !== undefined && Path.resolve(root, match[1]).startsWith(outDir)) {
      const generated = Number(match[2])
      const sourceLine = block.lines[generated - 1] ?? block.lines.at(-1) ?? block.fence
      const messages = failures.get(block) ?? []
      failures.set(block, messages)
      last = messages
      messages.push(`  ${block.source}:${sourceLine}:${match[3]}: ${match[4]}`)
    } else if (match === null && last !== undefined && line.startsWith(" ")) {
      last.push(`  ${line}`)
    } else {
      last = elsewhere
      elsewhere.push(`  ${line}`)
    }
  }

  let failed = 0
  let allowed = 0
  const key = (block: Block): string => `${block.source}:${block.fence}`
  for (const [block, messages] of failures) {
    const reason = allowList[key(block)]
    if (reason !== undefined) {
      allowed++
      continue
    }
    failed++
    console.error(`✗ ${key(block)} (the block opened at that line)`)
    messages.forEach((message) => console.error(message))
  }
  const failingKeys = new Set([...failures.keys()].map(key))
  const stale = Object.keys(allowList).filter((entry) => !failingKeys.has(entry))
  stale.forEach((entry) => console.error(`✗ ${entry} is allow-listed but passes (or no longer exists): unlist it`))
  if (elsewhere.length > 0) {
    console.error("✗ tsc reported errors outside the snippets:")
    elsewhere.forEach((message) => console.error(message))
  }
  const ok = failed === 0 && stale.length === 0 && elsewhere.length === 0 && (tsc.status === 0 || failures.size > 0)
  console.error(
    `check-examples: ${blocks.length} blocks, ${failed} failing, ${allowed} allow-listed, ` +
      `${((Date.now() - started) / 1000).toFixed(1)}s`
  )
  return ok ? 0 : 1
}

process.exitCode = main()
