// Mutation testing of the kernel's lifecycle core: `pnpm mutate kernel` (see scripts/mutate.ts).
// The journal's recovery decisions (@lifeline/journal) and the stop ladder (@lifeline/process) have configs of their
// own: stryker/journal.config.mjs, stryker/process.config.mjs.
// The files run in this order, one Stryker run each; the peer's pending table and its detach come last.
import { packageConfig } from "./shared.mjs"

const config = packageConfig({
  name: "kernel",
  files: [
    "packages/kernel/src/Connection.ts",
    "packages/kernel/src/internal/connection.ts",
    "packages/kernel/src/internal/connectionHandshake.ts",
    "packages/kernel/src/internal/connectionLayer.ts",
    "packages/kernel/src/Lifecycle.ts",
    // Lifecycle's bodies: the state table, the gates, the state machine, the handshake.
    "packages/kernel/src/internal/lifecycleState.ts",
    "packages/kernel/src/internal/lifecycleGate.ts",
    "packages/kernel/src/internal/lifecycle.ts",
    "packages/kernel/src/internal/lifecycleHandshake.ts",
    "packages/kernel/src/ShutdownPolicy.ts",
    // The peer's deadline heap and pending table (outbound calls, their timer, answers matched by id).
    "packages/kernel/src/internal/deadlines.ts",
    "packages/kernel/src/internal/peer/outbound.ts",
    // The end of every pending call at once: the table detached (tombstoned, cut-off list) and the callers woken later,
    // 1,024 at a time with a turn of the event loop between batches, after a teardown ended the transport.
    "packages/kernel/src/internal/peer/detach.ts"
  ]
})

export default {
  ...config
  // Which tests run is set in stryker/kernel.vitest.mjs, never with `testFiles`: see vitest-sandbox.mjs.
}
