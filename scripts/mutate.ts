/**
 * Mutation testing (StrykerJS with the vitest runner) of the modules where a wrong line is a lost message or a hung
 * shutdown. Runs outside CI: `pnpm mutate`.
 *
 * How to run:
 * - everything: `pnpm mutate` (each `stryker/*.config.mjs` in turn, one Stryker run per listed file);
 * - one package: `pnpm mutate kernel`;
 * - one file: `pnpm mutate packages/kernel/src/Lifecycle.ts` (it must be listed in its package's config);
 * - only print the table of the last reports: `pnpm mutate --report [kernel | file…]`;
 * - any other flag goes to Stryker, e.g. `pnpm mutate kernel --concurrency 1` or `--force` (ignore the incremental
 *   file and run every mutant again).
 *
 * Each file has its own incremental file and reports under `build/mutation/<package>/<file>/` (`index.html` to read
 * the survivors, `mutation.json` for this table; the paths come from the config, evaluated for that file), so a
 * rerun only tests the mutants whose code or tests changed.
 * Prints a table per mutated file (score, killed, timed out, survived, no coverage) and exits with 1 when a listed
 * file scores under 90% (or has no report, or its Stryker run failed). Equivalent mutants that cannot be killed are
 * listed, with the reason, in `stryker/equivalent-mutants.md`.
 *
 * Score = (killed + timed out) / (killed + timed out + survived + no coverage), as Stryker counts it.
 *
 * @since 0.1.0
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import * as Url from "node:url"

const root = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "..")
const strykerDir = Path.join(root, "stryker")
const threshold = 90

interface Config {
  readonly name: string
  readonly files: ReadonlyArray<string>
}

interface Row {
  readonly file: string
  readonly killed: number
  readonly timeout: number
  readonly survived: number
  readonly noCoverage: number
  readonly errors: number
  readonly score: number | undefined
}

/** A config module's default export, evaluated afresh with `LIFELINE_MUTATE_FILE` set to `file` (or unset). */
const evaluate = async (configFile: string, file: string | undefined): Promise<StrykerConfig> => {
  const previous = process.env.LIFELINE_MUTATE_FILE
  if (file === undefined) delete process.env.LIFELINE_MUTATE_FILE
  else process.env.LIFELINE_MUTATE_FILE = file
  try {
    // A query string per file: the module cache would otherwise return the first evaluation.
    const url = `${Url.pathToFileURL(Path.join(strykerDir, configFile)).href}?file=${encodeURIComponent(file ?? "")}`
    return ((await import(url)) as { readonly default: StrykerConfig }).default
  } finally {
    if (previous === undefined) delete process.env.LIFELINE_MUTATE_FILE
    else process.env.LIFELINE_MUTATE_FILE = previous
  }
}

interface StrykerConfig {
  readonly mutate?: ReadonlyArray<string>
  readonly jsonReporter?: { readonly fileName?: string }
}

const loadConfigs = async (): Promise<ReadonlyArray<Config>> => {
  const names = Fs.readdirSync(strykerDir).filter((file) => file.endsWith(".config.mjs")).sort()
  const configs: Array<Config> = []
  for (const file of names) {
    const config = await evaluate(file, undefined)
    configs.push({ name: file.slice(0, -".config.mjs".length), files: config.mutate ?? [] })
  }
  return configs
}

/** The row of `file` from the JSON report its config writes when run for that file alone. */
const readRow = async (config: Config, file: string): Promise<Row | undefined> => {
  const fileName = (await evaluate(`${config.name}.config.mjs`, file)).jsonReporter?.fileName
  if (fileName === undefined) return undefined
  const report = Path.resolve(root, fileName)
  if (!Fs.existsSync(report)) return undefined
  const json = JSON.parse(Fs.readFileSync(report, "utf8")) as {
    readonly files: Record<string, { readonly mutants: ReadonlyArray<{ readonly status: string }> }>
  }
  const count = { Killed: 0, Timeout: 0, Survived: 0, NoCoverage: 0, RuntimeError: 0, CompileError: 0 }
  for (const entry of Object.values(json.files)) {
    for (const mutant of entry.mutants) {
      if (mutant.status in count) count[mutant.status as keyof typeof count]++
    }
  }
  const detected = count.Killed + count.Timeout
  const valid = detected + count.Survived + count.NoCoverage
  return {
    file,
    killed: count.Killed,
    timeout: count.Timeout,
    survived: count.Survived,
    noCoverage: count.NoCoverage,
    errors: count.RuntimeError + count.CompileError,
    score: valid === 0 ? undefined : (100 * detected) / valid
  }
}

const runStryker = (config: Config, file: string, flags: ReadonlyArray<string>): boolean => {
  const bin = Path.join(
    Path.dirname(createRequire(import.meta.url).resolve("@stryker-mutator/core/package.json")),
    "bin",
    "stryker.js"
  )
  console.error(`\n== stryker ${config.name}: ${file}`)
  const started = Date.now()
  const result = ChildProcess.spawnSync(
    process.execPath,
    [bin, "run", Path.join("stryker", `${config.name}.config.mjs`), ...flags],
    { cwd: root, stdio: "inherit", env: { ...process.env, LIFELINE_MUTATE_FILE: file } }
  )
  console.error(`== ${file}: ${((Date.now() - started) / 1000).toFixed(0)} s, exit ${result.status ?? result.signal}`)
  return result.status === 0
}

const main = async (): Promise<number> => {
  const args = process.argv.slice(2)
  const reportOnly = args.includes("--report")
  const configs = await loadConfigs()
  const selectors: Array<string> = []
  const flags: Array<string> = []
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (arg === "--report") continue
    if (arg.startsWith("-")) {
      flags.push(arg)
      if (!arg.includes("=") && i + 1 < args.length && !args[i + 1].startsWith("-")) flags.push(args[++i])
    } else selectors.push(arg)
  }

  const selected: Array<{ readonly config: Config; readonly file: string }> = []
  for (const config of configs) {
    for (const file of config.files) {
      if (selectors.length === 0 || selectors.includes(config.name) || selectors.includes(file)) {
        selected.push({ config, file })
      }
    }
  }
  const unknown = selectors.filter((s) => !configs.some((c) => c.name === s || c.files.includes(s)))
  if (unknown.length > 0) {
    console.error(`Not a config in stryker/ nor a file listed in one: ${unknown.join(", ")}`)
    return 2
  }

  const failedRuns = new Set<string>()
  const started = Date.now()
  if (!reportOnly) {
    for (const { config, file } of selected) {
      if (!runStryker(config, file, flags)) failedRuns.add(file)
    }
  }

  const rows: Array<{ readonly file: string; readonly row: Row | undefined }> = []
  for (const { config, file } of selected) rows.push({ file, row: await readRow(config, file) })
  const header = "| file | mutation score | killed | timed out | survived | no coverage | errors |"
  console.log(`\n${header}\n|---|---:|---:|---:|---:|---:|---:|`)
  let failing = 0
  for (const { file, row } of rows) {
    if (row === undefined) {
      failing++
      console.log(`| ${file} | no report | | | | | |`)
      continue
    }
    const score = row.score === undefined ? "n/a" : `${row.score.toFixed(1)}%`
    const low = row.score !== undefined && row.score < threshold
    if (low || failedRuns.has(file)) failing++
    console.log(
      `| ${file} | ${
        low ? `**${score}**` : score
      } | ${row.killed} | ${row.timeout} | ${row.survived} | ${row.noCoverage} | ${row.errors} |`
    )
  }
  if (!reportOnly) console.log(`\nStryker wall time: ${((Date.now() - started) / 60_000).toFixed(1)} min`)
  if (failing > 0) {
    console.error(`${failing} file(s) under ${threshold}% or without a successful run`)
    return 1
  }
  return 0
}

process.exitCode = await main()
