/**
 * The extension the fleet's tests run in their sessions: examples/fleet/extension.ts, run as a bundle, which works
 * `ms` milliseconds per call (a negative `ms` makes it fail) and writes `start <key> …` and `done <key> …` lines to an
 * effects file.
 */
import type { ExtensionSession } from "@lifeline/fleet"
import { Method } from "@lifeline/kernel"
import { Schema } from "effect"
import { ChildProcess } from "effect/process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"

export const root = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "../../../..")

/** The extension's one method; its timeout covers a slow start on a loaded machine. */
export const Work = Method.request("work", {
  params: Schema.Struct({ key: Schema.String, attempt: Schema.Int, ms: Schema.Number }),
  result: Schema.Struct({ key: Schema.String, pid: Schema.Int, runner: Schema.Int }),
  timeout: "60 seconds"
})

/** A new effects file in a temporary directory of its own (`prefix` names the directory). */
export const newEffectsFile = (prefix: string) =>
  Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), `lifeline-fleet-${prefix}-`)), "effects")

/** The command that starts the extension for `sessionId`, writing to `effectsFile`. */
export const command = (sessionId: string, effectsFile: string) =>
  ChildProcess.make(process.execPath, [
    Path.join(root, "scripts/run-bundled.mjs"),
    Path.join(root, "examples/fleet/extension.ts"),
    sessionId,
    effectsFile,
    String(process.pid)
  ])

/** `run` for `ExtensionSession.layer`: the operation's payload is `{ ms }`. */
export const run: ExtensionSession.Options<never, typeof Work, never>["run"] = (peer, operation) =>
  peer.call(Work, { key: operation.key, attempt: operation.attempt, ms: (operation.payload as { ms: number }).ms })

/** How many times the extension started `key`. */
export const starts = (effectsFile: string, key: string) =>
  Fs.existsSync(effectsFile)
    ? Fs.readFileSync(effectsFile, "utf8").split("\n").filter((l) => l.startsWith(`start ${key} `)).length
    : 0
