// The kernel's vitest project inside the Stryker sandbox (see vitest-sandbox.mjs).
import project from "../packages/kernel/vitest.config.ts"
import { sandboxProject } from "./vitest-sandbox.mjs"

export default sandboxProject(project, "kernel", import.meta.url)
