// The vitest project of one package, as Stryker runs it inside its sandbox.
//
// Tests import their package by name (`@lifeline/kernel`), which pnpm links to the work tree, not to the sandbox:
// without the aliases below, the tests would run against the unmutated sources and every mutant would "survive".
import { fileURLToPath } from "node:url"
import { mergeConfig } from "vitest/config"

/**
 * @param {import("vitest/config").UserConfig} project the package's own `vitest.config.ts`
 * @param {string} name the package folder under `packages/` (and the `@lifeline/<name>` package name)
 * @param {string} url `import.meta.url` of the wrapper (in the sandbox)
 */
export const sandboxProject = (project, name, url) => {
  const root = fileURLToPath(new URL(`../packages/${name}/`, url))
  return mergeConfig(project, {
    root,
    resolve: {
      alias: [
        { find: new RegExp(`^@lifeline/${name}$`), replacement: `${root}src/index.ts` },
        { find: new RegExp(`^@lifeline/${name}/(.+)$`), replacement: `${root}src/$1.ts` }
      ]
    }
  })
}
