// The kernel's vitest project inside the Stryker sandbox (see vitest-sandbox.mjs), for the journal's recovery
// decisions: the recovery tests only, which are what decide those files' mutants.
import project from "../packages/kernel/vitest.config.ts"
import { sandboxProject } from "./vitest-sandbox.mjs"

export default sandboxProject(project, "kernel", import.meta.url, ["test/Recovery*.test.ts"])
