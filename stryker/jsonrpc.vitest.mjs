// The jsonrpc vitest project inside the Stryker sandbox (see vitest-sandbox.mjs): the framing tests only. The message
// tests never reach the framing files, and their long property tests only slow the run.
import project from "../packages/jsonrpc/vitest.config.ts"
import { sandboxProject } from "./vitest-sandbox.mjs"

export default sandboxProject(project, "jsonrpc", import.meta.url, [
  "test/Framing*.test.ts",
  "test/ContentLength*.test.ts",
  "test/Ndjson*.test.ts"
])
