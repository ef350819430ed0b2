/**
 * Running the fixture programs of `test/fixtures/`: plain `.mjs` programs run as they are; TypeScript programs that use
 * Lifeline are bundled once per test file with esbuild (tsx's own copy), because loading them through `--import tsx`
 * takes seconds per process on a busy machine and a bundle starts in a fraction of one. Without esbuild they run
 * through `--import tsx`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ChildProcess from "effect/process/ChildProcess"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"

export const fixturesDir = Path.join(Path.dirname(Url.fileURLToPath(import.meta.url)), "..", "fixtures")

interface Esbuild {
  readonly build: (options: Record<string, unknown>) => Promise<unknown>
}

const loadEsbuild = (): Esbuild | undefined => {
  try {
    const require = createRequire(import.meta.url)
    return createRequire(require.resolve("tsx"))("esbuild") as Esbuild
  } catch {
    return undefined
  }
}

/**
 * Bundles one fixture (`fixtures/<name>.ts`) into `outfile` for tests written with Promises (the `layer` below is for
 * Effect tests). `requireShim` adds the `require` that CommonJS packages inside an ESM bundle load Node's modules with.
 */
export const bundleFixture = async (
  name: string,
  outfile: string,
  options: { readonly requireShim?: boolean } = {}
): Promise<void> => {
  const esbuild = loadEsbuild()
  if (esbuild === undefined) throw new Error("esbuild (tsx's own copy) is not installed")
  await esbuild.build({
    entryPoints: [Path.join(fixturesDir, `${name}.ts`)],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node24",
    outfile,
    ...(options.requireShim === true
      ? {
        banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" }
      }
      : { external: ["node:*"] }),
    logLevel: "error"
  })
}

/** How to run each fixture with the current Node: a bundle, the source through tsx, or an `.mjs` as it is. */
export class Programs extends Context.Service<Programs, {
  readonly argv: (name: string) => ReadonlyArray<string>
}>()("test/Programs") {}

/**
 * Bundles the TypeScript fixtures `names` into a temporary directory that is removed with the Scope, and answers how
 * to run each of them (and the `.mjs` ones) with the current Node.
 */
export const layer = (names: ReadonlyArray<string>): Layer.Layer<Programs> => Layer.effect(Programs, build(names))

const build = (names: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.promise(async (): Promise<{ readonly dir: string | undefined; readonly programs: Programs["Service"] }> => {
      const esbuild = loadEsbuild()
      if (esbuild === undefined) {
        return {
          dir: undefined,
          programs: {
            argv: (name) =>
              name.endsWith(".mjs")
                ? [Path.join(fixturesDir, name)]
                : ["--import", "tsx", Path.join(fixturesDir, `${name}.ts`)]
          }
        }
      }
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-fixtures-"))
      await esbuild.build({
        entryPoints: names.map((name) => Path.join(fixturesDir, `${name}.ts`)),
        bundle: true,
        platform: "node",
        format: "esm",
        target: "node24",
        outdir: dir,
        outExtension: { ".js": ".mjs" },
        // Node's own modules (`node:sqlite` has no unprefixed name) are imports of the runtime.
        external: ["node:*"],
        logLevel: "error"
      })
      return {
        dir,
        programs: {
          argv: (name) => name.endsWith(".mjs") ? [Path.join(fixturesDir, name)] : [Path.join(dir, `${name}.mjs`)]
        }
      }
    }),
    ({ dir }) => Effect.sync(() => dir !== undefined && Fs.rmSync(dir, { recursive: true, force: true }))
  ).pipe(Effect.map(({ programs }) => programs))

/**
 * A command that runs a fixture with the current Node, in the fixtures directory (where `tsx` resolves). Environment
 * variables added with `ChildProcess.setEnv` extend the test's own environment.
 */
export const command = (
  name: string,
  ...args: Array<string>
): Effect.Effect<ChildProcess.StandardCommand, never, Programs> =>
  Effect.map(
    Programs,
    (programs) =>
      ChildProcess.make(process.execPath, [...programs.argv(name), ...args], { cwd: fixturesDir, extendEnv: true })
  )
