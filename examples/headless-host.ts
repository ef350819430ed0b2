/**
 * The demo (`pnpm demo`): hermes-host, the headless Hermes host of `@lifeline/hermes-node` (its `hermes-host` bin), run
 * from the workspace's sources with this repository's HL7 example extension and sample message as its defaults. It
 * spawns the extension as a real child process, initializes it, lists its commands, executes them, serves its editor
 * calls from the HL7 message, shows the windows it opens, shuts it down and prints what happened with timings.
 *
 *   pnpm demo                                              # the HL7 extension on the sample message
 *   examples/headless-host/bin/hermes-host --help          # the same, as one bundle on the pinned Node
 *   pnpm conformance                                       # the conformance kit against the HL7 extension
 *
 * In another project the same program is `npx hermes-host --extension "<command line>"` (docs/hosting.md).
 */
import { HermesHost } from "@lifeline/hermes-node"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Url from "node:url"

/** The repository: above this file, or above its bundle in node_modules/.cache (examples/headless-host/bin). */
const root = (() => {
  let dir = Path.dirname(Url.fileURLToPath(import.meta.url))
  while (!Fs.existsSync(Path.join(dir, "scripts", "run-bundled.mjs"))) {
    const up = Path.dirname(dir)
    if (up === dir) throw new Error("cannot find scripts/run-bundled.mjs above this program")
    dir = up
  }
  return dir
})()
const hl7 = Path.join(root, "examples", "hl7-extension")

await HermesHost.main(process.argv.slice(2), {
  extension: Path.join(hl7, "bin", "hl7-extension"),
  message: Path.join(hl7, "sample.hl7")
})
