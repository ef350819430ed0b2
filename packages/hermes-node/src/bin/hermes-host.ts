#!/usr/bin/env node
/**
 * The `hermes-host` bin of `@lifeline/hermes-node`: a headless Hermes host that runs one extension, in any language,
 * and prints what happened (`hermes-host --extension "<command line>"`), and the conformance kit that checks an
 * extension against docs/protocol.md (`hermes-host --conformance --extension "<command line>"`). `--help` shows the
 * options; docs/hosting.md and docs/writing-an-extension.md tell the rest.
 *
 *   npm install @lifeline/hermes-node effect @effect/platform-node
 *   npx hermes-host --conformance --extension "python3 my_extension.py"
 *
 * @since 0.1.0
 */
// The host records its extensions in `node:sqlite` and runs on `@effect/platform-node`: both need Node 22.19. On an
// older Node, say so in one line (exit 2, as for bad arguments) instead of failing on a missing built-in module; the
// host is imported only after the check for that reason.
const [major = 0, minor = 0] = process.versions.node.split(".").map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(`hermes-host needs Node >= 22.19; this is Node ${process.versions.node}\n`)
  process.exit(2)
}
const HermesHost = await import("../HermesHost.js")
await HermesHost.main(process.argv.slice(2), {})
