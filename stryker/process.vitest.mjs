// The process package's vitest project inside the Stryker sandbox (see vitest-sandbox.mjs): every test of the stop
// ladder (it moved from the kernel with StopSequence.test.ts).
import project from "../packages/process/vitest.config.ts"
import { sandboxProject } from "./vitest-sandbox.mjs"

export default sandboxProject(project, "process", import.meta.url)
