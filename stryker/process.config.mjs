// Mutation testing of the stop ladder: `pnpm mutate process` (see scripts/mutate.ts).
import { packageConfig } from "./shared.mjs"

export default packageConfig({
  name: "process",
  files: [
    "packages/process/src/StopSequence.ts",
    "packages/process/src/internal/stopSequence.ts"
  ]
})
