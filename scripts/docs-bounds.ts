/**
 * docs/shutdown.md's table of bounds, generated from the kernel's one table of default times (`Bounds.ts`), so the
 * page cannot drift from the code. The table lies between `<!-- bounds:begin -->` and `<!-- bounds:end -->`.
 *
 * Usage: `pnpm tsx scripts/docs-bounds.ts` rewrites the table; `--check` (run by `pnpm check`) exits with 1 when the
 * page differs from what the code says.
 *
 * @since 0.2.0
 */
import * as Duration from "effect/Duration"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Url from "node:url"
import * as Bounds from "../packages/kernel/src/Bounds.js"

const root = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "..")
const page = Path.join(root, "docs", "shutdown.md")
const begin = "<!-- bounds:begin -->"
const end = "<!-- bounds:end -->"

const s = (duration: Duration.Duration): string => {
  const millis = Duration.toMillis(duration)
  return millis % 1000 === 0 ? `${millis / 1000} s` : `${millis} ms`
}

const rows: ReadonlyArray<readonly [option: string, fallback: string, bounds: string]> = [
  [
    "handshake timeout",
    `${s(Bounds.handshakeTimeout)} (\`Connection.initiate\`; Hermes' \`initialize\`)`,
    "the handshake, and each of its calls that has no shorter timeout of its own"
  ],
  [
    "`requestTimeout`",
    `${s(Bounds.requestTimeout)} (the peer's)`,
    "a call's answer, when the call gives no timeout of its own"
  ],
  [
    "drain timeout",
    `the policy's (\`LIFELINE_DRAIN_TIMEOUT\`, default ${s(Bounds.drainTimeout)})`,
    "work in flight, both directions"
  ],
  [
    "`shutdownTimeout`",
    `${s(Bounds.shutdownTimeout)} (Hermes, docs/protocol.md)`,
    "the answer to the protocol's shutdown request"
  ],
  [
    "`closeTimeout`",
    `the policy's drain timeout + \`flushTimeout\` + ${s(Bounds.closeSlack)}`,
    "closing the connection under its policy; a smaller value is raised to drain + flush, so a drain is never cut short"
  ],
  [
    "`flushTimeout`",
    `${s(Bounds.flushTimeout)} (the peer's own option)`,
    "writing queued frames before the input ends"
  ],
  [
    "`exitGrace`",
    s(Bounds.exitGrace),
    "after the end of input, before SIGTERM (`killGrace` instead when the shutdown request failed: Hermes' rule)"
  ],
  ["`killGrace`", s(Bounds.killGrace), "after SIGTERM, before SIGKILL; the same for descendants left in the group"],
  [
    "`verifyTimeout`",
    s(Bounds.verifyTimeout),
    "after SIGKILL, before the child is reported `Unkillable` (or its group `Survived`)"
  ],
  [
    "`forceTimeout`",
    `${s(Bounds.forceTimeout)} (\`runMain\`)`,
    "after the second signal, before exiting with 3 anyway"
  ],
  [
    "Hermes host `exitGrace`",
    `${s(Bounds.hostExitGrace)} (\`ExtensionHost\`; docs/protocol.md)`,
    "after the end of an extension's input, before SIGTERM; its `verifyTimeout` after SIGKILL is `killGrace` + 1 s"
  ],
  [
    "`shutdownBudget`",
    `\`shutdownTimeout\` − ${s(Bounds.answerMargin)} = ${s(Bounds.extensionShutdownBudget)} (the Hermes extension SDK)`,
    "the extension's whole shutdown checklist; its drain is the policy's, cut to what is left of the budget minus 1 s"
  ],
  [
    "fleet `drainTimeout`",
    `the option, else \`LIFELINE_DRAIN_TIMEOUT\`, else ${s(Bounds.fleetDrainTimeout)}`,
    "an operation in flight on a runner that stops, before it is left to the next runner"
  ],
  [
    "fleet claim wait",
    `the session's drain + ${s(Bounds.recordRetryWindow)} (record retries) + ${s(Bounds.claimWaitSlack)}`,
    "how long a stopping session keeps its claim for the operations still running"
  ],
  [
    "reaper `grace`",
    `${s(Bounds.reapGrace)} (\`NodeReaper.reapProcess\`)`,
    "an orphan of a crashed host: after SIGTERM before SIGKILL, and after SIGKILL before `Survived`"
  ],
  [
    "MCP `exitTimeout`",
    `${s(Bounds.mcp.exitTimeout)} (\`@lifeline/mcp\`, the MCP SDK's)`,
    "after `close()` ends an MCP server's stdin, before SIGTERM to its process group"
  ],
  [
    "MCP `killGrace`",
    `${s(Bounds.mcp.killGrace)} (the MCP SDK's)`,
    "after SIGTERM to the server's group, before SIGKILL"
  ],
  [
    "MCP `restartBudget`",
    `${Bounds.mcp.restartBudget} restarts (\`Reconnect.reconnecting\`)`,
    "restarts of a crashed server in a row, with no stable run between them, before giving up"
  ],
  [
    "MCP `initialDelay`, `factor`, `maxDelay`",
    `${s(Bounds.mcp.restartInitialDelay)} × ${Bounds.mcp.restartFactor}ⁿ, at most ${s(Bounds.mcp.restartMaxDelay)}`,
    "the wait before restart n + 1 of a series: 1, 2, 4, 8, 16 s by default"
  ],
  [
    "MCP `stableAfter`",
    s(Bounds.mcp.restartStableAfter),
    "a connection that lived this long resets the restart budget and the backoff"
  ],
  [
    "MCP `connectTimeout`",
    `${s(Bounds.mcp.restartConnectTimeout)} (the handshake timeout)`,
    "a restarted server's `initialize`, before the restart counts as failed"
  ]
]

const table = [
  "| option | default | bounds |",
  "| --- | --- | --- |",
  ...rows.map(([option, fallback, bounds]) => `| ${option} | ${fallback} | ${bounds} |`)
].join("\n")

const text = Fs.readFileSync(page, "utf8")
const from = text.indexOf(begin)
const to = text.indexOf(end)
if (from < 0 || to < from) {
  process.stderr.write(`docs-bounds: ${Path.relative(root, page)} has no ${begin} … ${end} block\n`)
  process.exit(1)
}
const next = `${text.slice(0, from + begin.length)}\n${table}\n${text.slice(to)}`
if (process.argv.includes("--check")) {
  if (next !== text) {
    process.stderr.write(
      `docs-bounds: the table of bounds in ${Path.relative(root, page)} differs from packages/kernel/src/Bounds.ts; ` +
        "run `pnpm tsx scripts/docs-bounds.ts`\n"
    )
    process.exit(1)
  }
  process.stderr.write(`docs-bounds: ${rows.length} bounds in ${Path.relative(root, page)} match Bounds.ts\n`)
} else {
  Fs.writeFileSync(page, next)
  process.stderr.write(`docs-bounds: wrote ${rows.length} bounds to ${Path.relative(root, page)}\n`)
}
