// Mutation testing of the journal's recovery decisions: `pnpm mutate kernel-recovery` (see scripts/mutate.ts).
// A config of its own next to kernel.config.mjs: the same kernel sandbox and vitest wrapper, its own sandbox folder,
// and only the recovery tests, which are what decide these files' mutants.
import { packageConfig } from "./shared.mjs"

const config = packageConfig({
  name: "kernel",
  files: [
    "packages/kernel/src/internal/journalRecovery.ts",
    "packages/kernel/src/internal/recoverySteps.ts"
  ]
})

// A plain run (every file at once) writes under build/mutation/kernel-recovery/all, not over the kernel config's.
const all = (path) => path.replace("build/mutation/kernel/all/", "build/mutation/kernel-recovery/all/")

export default {
  ...config,
  incrementalFile: all(config.incrementalFile),
  jsonReporter: { fileName: all(config.jsonReporter.fileName) },
  htmlReporter: { fileName: all(config.htmlReporter.fileName) },
  // Its own vitest wrapper: the recovery tests only (never Stryker's `testFiles`: see vitest-sandbox.mjs).
  vitest: { ...config.vitest, configFile: "stryker/kernel-recovery.vitest.mjs" },
  tempDirName: "build/stryker-tmp/kernel-recovery"
}
