// The journal's vitest project inside the Stryker sandbox (see vitest-sandbox.mjs), for its recovery decisions: the
// recovery tests only, which are what decide those files' mutants.
import project from "../packages/journal/vitest.config.ts"
import { sandboxProject } from "./vitest-sandbox.mjs"

export default sandboxProject(project, "journal", import.meta.url, ["test/Recovery*.test.ts"])
