// Mutation testing of the framing decoders: `pnpm mutate jsonrpc` (see scripts/mutate.ts).
import { packageConfig } from "./shared.mjs"

const config = packageConfig({
  name: "jsonrpc",
  files: [
    "packages/jsonrpc/src/internal/contentLength.ts",
    "packages/jsonrpc/src/internal/ndjson.ts",
    "packages/jsonrpc/src/Framing.ts"
  ]
})

export default {
  ...config,
  // Nothing but the package's sources and tests: a stray link inside the package would stop the sandbox copy.
  ignorePatterns: [
    ...config.ignorePatterns,
    "/packages/jsonrpc/*",
    "!/packages/jsonrpc/src",
    "!/packages/jsonrpc/test",
    "!/packages/jsonrpc/package.json",
    "!/packages/jsonrpc/vitest.config.ts",
    "!/packages/jsonrpc/tsconfig*.json"
  ],
  // Which tests run is set in stryker/jsonrpc.vitest.mjs (never with `testFiles`: see vitest-sandbox.mjs).
  // Its own sandbox folder (git-ignored under build/), so it can run while another package's run is in progress.
  tempDirName: "build/stryker-tmp/jsonrpc"
}
