// The hermes vitest project inside the Stryker sandbox (see vitest-sandbox.mjs): the SDK's own tests. The package's
// other suites (the host, HL7, the store) never run an extension, and their long property tests only slow the run.
import project from "../packages/hermes/vitest.config.ts"
import { sandboxProject } from "./vitest-sandbox.mjs"

export default sandboxProject(project, "hermes", import.meta.url, ["test/Extension*.test.ts"])
