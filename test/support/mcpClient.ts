/**
 * Running the MCP client example (`examples/mcp-client`) as a user runs it, as its own process, and reading its
 * report; shared by the tests of its lifecycle and of its protocol versions. Its journal goes to a directory of the
 * test run (`--journal-directory`), never to the user's state directory.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"

import { everything as everythingEntry } from "./mcp.js"

const here = Path.dirname(Url.fileURLToPath(import.meta.url))
export const client = Path.join(here, "..", "..", "examples", "mcp-client", "bin", "mcp-client")

/** `@modelcontextprotocol/server-everything`'s stdio entry point (up to 2025-11-25), run with this test's Node. */
export const everythingMain = everythingEntry
export const everything = `${process.execPath} ${everythingMain} stdio`

export interface Report {
  readonly ok: boolean
  readonly serverExit: {
    readonly code: number | null
    readonly signal: string | null
    readonly after: number | null
    readonly needed: "eof" | "SIGTERM" | "SIGKILL" | "none" | "unkillable"
  }
  readonly roots: { readonly declared: boolean; readonly askedAtMs: number | null }
  readonly serverRequests: ReadonlyArray<string>
  readonly protocolVersion: string | null
  readonly era: "modern" | "legacy"
  readonly probe:
    | { readonly _tag: "Answered" | "Skipped" }
    | { readonly _tag: "Refused"; readonly code: number; readonly message: string }
    | { readonly _tag: "Silent" | "AnsweredOnRetry"; readonly timeoutMillis: number }
  readonly restartedAfterProbe: boolean
  readonly supportedVersions: ReadonlyArray<string>
  readonly serverInfo: { readonly name: string; readonly version: string } | null
  readonly negotiationMs: number
  readonly tools: ReadonlyArray<string>
  readonly call: { readonly name: string; readonly result: unknown } | null
  readonly cancelled: {
    readonly outcome: string
    readonly afterMs: number
    readonly serverNotifiedMs: number | null
  } | null
  readonly notifications: ReadonlyArray<{ readonly method: string; readonly params: unknown }>
  readonly lateResponses: number
  readonly closeMs: number
  readonly stop: { readonly endedBy: string }
  readonly exit: { readonly code: number | null; readonly signal: string | null } | null
  readonly stderrTail: ReadonlyArray<string>
}

export const journalDirectory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-mcp-client-"))
process.once("exit", () => Fs.rmSync(journalDirectory, { recursive: true, force: true }))

/** Runs the client to its end; its stdout is what a terminal would receive. */
export const runTranscript = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.callback<{ readonly code: number | null; readonly stdout: string }>((resume) => {
    const child = ChildProcess.execFile(
      client,
      [...args, "--journal-directory", journalDirectory],
      { timeout: 20_000, env: { ...process.env, ...env } },
      (_error, stdout) => resume(Effect.sync(() => ({ code: child.exitCode, stdout })))
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** Runs the client to its end and reads its report; its exit code says whether the report is ok. */
export const runClient = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.map(
    runTranscript([...args, "--json"], env),
    ({ code, stdout }) => ({ code, report: JSON.parse(stdout) as Report, stdout })
  )
