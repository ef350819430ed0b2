/**
 * The command line of `mcp-client`: its usage, its options read and checked (a mistake is one line on stderr, the
 * usage, and exit code 2), and the values the program runs with.
 */
import { splitCommandLine } from "@lifeline/hermes-node/NodeSpawner"
import { visible } from "@lifeline/hermes-node/TerminalText"
import * as DurationText from "@lifeline/kernel/DurationText"
import type * as Duration from "effect/Duration"
import * as Result from "effect/Result"
import * as Path from "node:path"
import * as Url from "node:url"
import * as Util from "node:util"

export const usage = `mcp-client: drive an MCP server over stdio through its whole lifecycle

  mcp-client --server "<command line>" [--tool NAME] [--arguments JSON] [--slow-tool NAME] [--slow-arguments JSON]
             [--cancel-after DURATION] [--root DIR]... [--roots-wait DURATION] [--close-timeout DURATION]
             [--protocol auto|2026-07-28|legacy] [--discover-timeout DURATION] [--journal-directory DIR]
             [--json] [--verbose]

  --server          the server's command line
  --protocol        auto (default): server/discover (MCP 2026-07-28), and initialize (up to 2025-11-25) when the
                    server refuses it or does not answer; 2026-07-28: no fallback; legacy: initialize only
  --discover-timeout  how long server/discover may go unanswered before the fallback (default 10s)
  --tool            the tool to call (default: the first one listed); --arguments its arguments (default {})
  --slow-tool       a tool to call and cancel with notifications/cancelled (default: none)
  --slow-arguments  its arguments (default {})
  --cancel-after    how long the slow call runs before it is cancelled (default 200ms)
  --root            a root to offer the server (repeatable): the client then declares the roots capability and
                    answers roots/list with them (up to 2025-11-25: 2026-07-28 has no server-to-client requests on
                    stdio); without --root it declares no roots
  --roots-wait      with --root: how long to wait, before closing, for the server's first roots/list if it has not
                    asked yet, so that the close does not strand the server's request (default 1s; 0: no wait)
  --close-timeout   how long each step of the close may take: end of stdin, SIGTERM, SIGKILL (default 1s)
  --journal-directory  where the server is recorded, and where servers of hosts that died are found and swept
                    (default: $XDG_STATE_HOME/lifeline/children, else ~/.local/state/lifeline/children)
  --json            print one JSON report instead of the transcript

  A DURATION is ${DurationText.forms}.
  Exit code 0 when the client's own steps succeeded (ok), whatever the server needed to exit (see serverExit).`

export const { values: args } = Util.parseArgs({
  options: {
    server: { type: "string" },
    tool: { type: "string" },
    arguments: { type: "string", default: "{}" },
    "slow-tool": { type: "string" },
    "slow-arguments": { type: "string", default: "{}" },
    "cancel-after": { type: "string", default: "200ms" },
    root: { type: "string", multiple: true },
    "roots-wait": { type: "string", default: "1s" },
    "close-timeout": { type: "string", default: "1s" },
    protocol: { type: "string", default: "auto" },
    "discover-timeout": { type: "string", default: "10s" },
    "journal-directory": { type: "string" },
    json: { type: "boolean", default: false },
    verbose: { type: "boolean", default: false },
    help: { type: "boolean", default: false }
  }
})

/** One line on stderr (then the usage) and exit code 2: a mistake on the command line is no crash. */
const fail = (message: string): never => {
  process.stderr.write(`mcp-client: ${visible(message.replace(/\s*\n\s*/g, " "))}\n\n${usage}\n`)
  process.exit(2)
}

if (args.help) {
  process.stdout.write(usage + "\n")
  process.exit(0)
}
export const serverLine = splitCommandLine(args.server ?? fail("--server is required"))
if (serverLine.length === 0) fail("--server is empty")
const parseJson = (name: string, text: string): Record<string, unknown> => {
  try {
    const value: unknown = JSON.parse(text)
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>
  } catch {
    // reported below
  }
  return fail(`--${name} is not a JSON object`)
}
export const toolArguments = parseJson("arguments", args.arguments)
export const slowArguments = parseJson("slow-arguments", args["slow-arguments"])
/** A duration from the command line, as `DurationText.parse` reads it. */
const duration = (name: string, text: string): Duration.Duration =>
  Result.getOrElse(DurationText.parse(text), (message) => fail(`--${name}: ${message}`))
export const cancelAfter = duration("cancel-after", args["cancel-after"])
export const closeTimeout = duration("close-timeout", args["close-timeout"])
export const rootsWait = duration("roots-wait", args["roots-wait"])
export const discoverTimeout = duration("discover-timeout", args["discover-timeout"])
const modes = { auto: "auto", "2026-07-28": "modern", legacy: "legacy" } as const
export const mode = Object.hasOwn(modes, args.protocol)
  ? modes[args.protocol as keyof typeof modes]
  : fail("--protocol is auto, 2026-07-28 or legacy")
export const roots = (args.root ?? []).map((dir) => {
  const path = Path.resolve(dir)
  return { uri: Url.pathToFileURL(path).href, name: Path.basename(path) }
})
