// The hermes vitest project inside the Stryker sandbox (see vitest-sandbox.mjs).
import project from "../packages/hermes/vitest.config.ts"
import { sandboxProject } from "./vitest-sandbox.mjs"

export default sandboxProject(project, "hermes", import.meta.url)
