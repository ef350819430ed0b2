// Mutation testing of the extension SDK's shutdown checklist: `pnpm mutate hermes` (see scripts/mutate.ts).
// Line ranges of packages/hermes/src/internal/extension.ts: the bound on each step and its constants, the checklist
// itself, the `shutdown` handler that runs it and answers, and how the run's ending picks the connection's stop reason.
import { packageConfig } from "./shared.mjs"

const file = "packages/hermes/src/internal/extension.ts"

export default {
  ...packageConfig({
    name: "hermes",
    files: [`${file}:41-59`, `${file}:269-359`, `${file}:417-440`, `${file}:477-520`]
  }),
  // Which tests run is set in stryker/hermes.vitest.mjs (never with `testFiles`: see vitest-sandbox.mjs).
  // Its own sandbox folder (git-ignored under build/), so it can run while another package's run is in progress.
  tempDirName: "build/stryker-tmp/hermes"
}
