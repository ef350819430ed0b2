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
import * as HermesHost from "../HermesHost.js"

await HermesHost.main(process.argv.slice(2), {})
