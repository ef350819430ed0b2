// The kernel's vitest project inside the Stryker sandbox (see vitest-sandbox.mjs): every kernel test (the journal's
// and recovery's tests moved to @lifeline/journal with their code: stryker/journal.vitest.mjs).
import project from "../packages/kernel/vitest.config.ts"
import { sandboxProject } from "./vitest-sandbox.mjs"

export default sandboxProject(project, "kernel", import.meta.url)
