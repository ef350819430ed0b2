// The kernel's vitest project inside the Stryker sandbox (see vitest-sandbox.mjs): every kernel test but the
// journal's and recovery's (Journal*, Recovery*: kernel-recovery.vitest.mjs runs them). They never reach the core's
// files, and their slow cases time out on a loaded machine, which fails Stryker's initial test run.
import project from "../packages/kernel/vitest.config.ts"
import { sandboxProject } from "./vitest-sandbox.mjs"

export default sandboxProject(project, "kernel", import.meta.url, ["test/[!JR]*.test.ts"])
