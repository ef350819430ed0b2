/**
 * The headless Hermes host and the conformance kit as a function, for programs that run them with defaults of their
 * own (the `hermes-host` bin is `main(process.argv.slice(2), {})`): it parses `argv` as the bin does (`--help` lists
 * the options), runs, prints the timeline or the report, and exits the process with the documented code
 * (docs/hosting.md, "Exit codes").
 *
 * @since 0.2.0
 */
import * as internal from "./internal/hermesHost.js"
import type * as Settings from "./internal/hermesHostSettings.js"

/**
 * What the command line may leave out: the extension's command line and the HL7 message file used when `--extension`
 * or `--message` is not given.
 *
 * @since 0.2.0
 * @category models
 */
export type Defaults = Settings.Defaults

/**
 * Runs the host (or, with `--conformance`, the kit) on `argv` and ends the process with its exit code.
 *
 * @example
 * ```ts
 * import { HermesHost } from "@lifeline/hermes-node"
 *
 * // A host whose default extension is ours: `my-host --conformance` checks it, `my-host --json` runs it.
 * await HermesHost.main(process.argv.slice(2), { extension: "python3 extension.py" })
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const main: (argv: ReadonlyArray<string>, defaults: Defaults) => Promise<void> = internal.main
