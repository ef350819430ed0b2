// The vitest project of one package, as Stryker runs it inside its sandbox.
//
// Tests import their package by name (`@lifeline/kernel`), which pnpm links to the work tree, not to the sandbox:
// without the aliases below, the tests would run against the unmutated sources and every mutant would "survive".
//
// Which test files run is chosen HERE (`include`), never with Stryker's own `testFiles` option: when `testFiles` is
// set, Stryker 10 plans every static mutant (code that runs when a module loads: a top-level `const f = () => …`, an
// object or a class defined at the top level) with `mutantActivation: "runtime"` (mutant-test-planner.js: `testFilter
// ? "runtime" : "static"`, and `testFiles` becomes that filter), so the vitest runner's setup file activates the
// mutant in a `beforeAll`, after the module was loaded unmutated, and every static mutant "survives". Without
// `testFiles`, static mutants run with `mutantActivation: "static"`: the mutant is active before the test file
// imports anything, and each test file loads its modules afresh (vitest's default `isolate: true`).
import { fileURLToPath } from "node:url"
import { mergeConfig } from "vitest/config"

/**
 * @param {import("vitest/config").UserConfig} project the package's own `vitest.config.ts`
 * @param {string} name the package folder under `packages/` (and the `@lifeline/<name>` package name)
 * @param {string} url `import.meta.url` of the wrapper (in the sandbox)
 * @param {ReadonlyArray<string>} [include] the test files to run, relative to the package (default: the project's)
 */
export const sandboxProject = (project, name, url, include) => {
  const root = fileURLToPath(new URL(`../packages/${name}/`, url))
  const config = mergeConfig(project, {
    root,
    resolve: {
      alias: [
        { find: new RegExp(`^@lifeline/${name}$`), replacement: `${root}src/index.ts` },
        { find: new RegExp(`^@lifeline/${name}/testing$`), replacement: `${root}src/testing/index.ts` },
        { find: new RegExp(`^@lifeline/${name}/(.+)$`), replacement: `${root}src/$1.ts` }
      ]
    }
  })
  // Replaced, not merged (mergeConfig concatenates arrays).
  if (include !== undefined) config.test = { ...config.test, include: [...include] }
  return config
}
