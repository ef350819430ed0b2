// Mutation testing of the journal's recovery decisions: `pnpm mutate journal` (see scripts/mutate.ts).
// Only the recovery tests run (stryker/journal.vitest.mjs): they are what decide these files' mutants.
import { packageConfig } from "./shared.mjs"

export default packageConfig({
  name: "journal",
  files: [
    "packages/journal/src/internal/journalRecovery.ts",
    "packages/journal/src/internal/recoverySteps.ts"
  ]
})
