// Shared StrykerJS settings for the per-package configs in this folder (`stryker/<package>.config.mjs`).
//
// A package config is `export default packageConfig({ name: "<package>", files: [...] })`, next to a vitest wrapper
// `stryker/<package>.vitest.mjs` (see vitest-sandbox.mjs). `scripts/mutate.ts` runs one Stryker process per entry of
// `files` (it sets LIFELINE_MUTATE_FILE), so each mutated file has its own incremental file and report under
// `build/mutation/<package>/<file>/`; a plain `stryker run stryker/<package>.config.mjs` mutates every file at once
// and writes under `build/mutation/<package>/all/`.

/** The directory of one run's incremental file and HTML/JSON reports. */
export const reportDir = (name, file) =>
  `build/mutation/${name}/${
    file === undefined ? "all" : file.replace(/^packages\/[^/]+\/src\//, "").replace(/[/:]/g, "_")
  }`

/**
 * Stryker copies only what the tests of package `name` need into its sandbox: the package itself, the root vitest
 * and TypeScript settings, and this folder. Other workspace packages resolve to the work tree through the symlinked
 * node_modules (they are not mutated in this run).
 */
const sandboxFiles = (name) => [
  "/*",
  "!/package.json",
  "!/tsconfig.base.json",
  "!/vitest.shared.ts",
  "!/vitest.setup.ts",
  "!/stryker",
  "!/packages",
  "/packages/*",
  `!/packages/${name}`,
  "/packages/*/build",
  "/packages/*/dist"
]

/**
 * @param {{ readonly name: string; readonly files: ReadonlyArray<string> }} options
 * @returns {import("@stryker-mutator/api/core").PartialStrykerOptions}
 */
export const packageConfig = ({ files, name }) => {
  const only = process.env.LIFELINE_MUTATE_FILE
  const dir = reportDir(name, only)
  return {
    $schema: "../node_modules/@stryker-mutator/core/schema/stryker-schema.json",
    packageManager: "pnpm",
    testRunner: "vitest",
    plugins: ["@stryker-mutator/vitest-runner"],
    vitest: { configFile: `stryker/${name}.vitest.mjs`, related: true },
    coverageAnalysis: "perTest",
    mutate: only === undefined ? [...files] : [only],
    ignorePatterns: sandboxFiles(name),
    tempDirName: ".stryker-tmp",
    cleanTempDir: true,
    incremental: true,
    incrementalFile: `${dir}/incremental.json`,
    reporters: ["json", "html", "clear-text", "progress-append-only"],
    jsonReporter: { fileName: `${dir}/mutation.json` },
    htmlReporter: { fileName: `${dir}/index.html` },
    clearTextReporter: { allowColor: false, logTests: false, reportMutants: true, reportScoreTable: true },
    thresholds: { high: 90, low: 80, break: null },
    concurrency: 2,
    timeoutMS: 5_000,
    logLevel: "info",
    fileLogLevel: "off"
  }
}
