// The jsonrpc vitest project inside the Stryker sandbox (see vitest-sandbox.mjs).
import project from "../packages/jsonrpc/vitest.config.ts"
import { sandboxProject } from "./vitest-sandbox.mjs"

export default sandboxProject(project, "jsonrpc", import.meta.url)
