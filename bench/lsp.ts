/**
 * A real language server, vscode-json-language-server (vscode-langservers-extracted, a devDependency of `test/`),
 * driven through its lifecycle by our client and by a vscode-jsonrpc client in the same run: spawn → `initialize`
 * answered and `initialized` sent (initialize→ready), and `shutdown` sent → process exited after `exit`
 * (shutdown→exit). Run with `pnpm tsx bench/lsp.ts`; `run()` returns the rows for `bench/index.ts`.
 *
 * Both clients spawn the same Node program with the same arguments and send the same params; each measurement is
 * repeated (ours and vscode-jsonrpc in turn, each going first every other round, after one warm-up round) and the median reported. Most of
 * initialize→ready is the server's own start-up, so the ratio says whether our client adds anything to it.
 */
import * as Cancellation from "@lifeline/kernel/Cancellation"
import * as Protocol from "@lifeline/kernel/Protocol"
import * as NodeChildProcess from "@lifeline/node/NodeChildProcess"
import * as Effect from "effect/Effect"
import * as Command from "effect/process/ChildProcess"
import * as References from "effect/References"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import * as Url from "node:url"
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node.js"
import { root } from "./root.js"

export interface Row {
  readonly measure: string
  readonly ours: number
  readonly vscode: number
  readonly ratio: number
}

interface Sample {
  readonly ready: number
  readonly exit: number
}

const server = Path.join(
  root,
  "test",
  "node_modules",
  "vscode-langservers-extracted",
  "bin",
  "vscode-json-language-server"
)
const argv = [server, "--stdio"]

const initializeParams = {
  processId: process.pid,
  clientInfo: { name: "lifeline-bench", version: "0.1.0" },
  rootUri: Url.pathToFileURL(root).href,
  workspaceFolders: [{ uri: Url.pathToFileURL(root).href, name: "lifeline" }],
  capabilities: {
    workspace: { configuration: true, workspaceFolders: true },
    window: { workDoneProgress: true },
    textDocument: { documentSymbol: { hierarchicalDocumentSymbolSupport: true } }
  }
}

const ours = (): Promise<Sample> =>
  Effect.gen(function*() {
    const start = performance.now()
    const { child, peer } = yield* NodeChildProcess.makePeer({
      command: Command.make(process.execPath, argv),
      protocol: Protocol.make({ cancellation: Cancellation.lsp }),
      handlers: {},
      requestTimeout: "30 seconds",
      stderrLogLevel: "None",
      onUnknownRequest: () => Effect.succeed(null)
    })
    yield* peer.callUntyped("initialize", initializeParams)
    yield* peer.notifyUntyped("initialized", {})
    const ready = performance.now() - start
    const shutdownStart = performance.now()
    yield* peer.callUntyped("shutdown")
    yield* peer.notifyUntyped("exit")
    yield* child.exit
    return { ready, exit: performance.now() - shutdownStart }
  }).pipe(Effect.scoped, Effect.provideService(References.MinimumLogLevel, "None"), Effect.runPromise)

const vscode = async (): Promise<Sample> => {
  const start = performance.now()
  const child = ChildProcess.spawn(process.execPath, argv, { stdio: ["pipe", "pipe", "ignore"] })
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const connection = createMessageConnection(
    new StreamMessageReader(child.stdout),
    new StreamMessageWriter(child.stdin)
  )
  connection.onRequest(() => null)
  connection.listen()
  await connection.sendRequest("initialize", initializeParams)
  await connection.sendNotification("initialized", {})
  const ready = performance.now() - start
  const shutdownStart = performance.now()
  await connection.sendRequest("shutdown")
  await connection.sendNotification("exit")
  await exited
  const exit = performance.now() - shutdownStart
  connection.dispose()
  return { ready, exit }
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

export const run = async (options: { readonly repeats?: number } = {}): Promise<Array<Row>> => {
  const repeats = options.repeats ?? 5
  const samples: { ours: Array<Sample>; vscode: Array<Sample> } = { ours: [], vscode: [] }
  for (let i = 0; i < repeats + 1; i++) {
    // Alternating which goes first, so that neither always meets a machine the other has just warmed or loaded.
    let a: Sample
    let b: Sample
    if (i % 2 === 0) {
      a = await ours()
      b = await vscode()
    } else {
      b = await vscode()
      a = await ours()
    }
    if (i === 0) continue // warm-up
    samples.ours.push(a)
    samples.vscode.push(b)
  }
  const row = (measure: string, pick: (sample: Sample) => number): Row => {
    const o = median(samples.ours.map(pick))
    const v = median(samples.vscode.map(pick))
    return { measure, ours: o, vscode: v, ratio: o / v }
  }
  return [
    row("vscode-json-language-server: spawn → initialize→ready (ms)", (sample) => sample.ready),
    row("vscode-json-language-server: shutdown → exit (ms)", (sample) => sample.exit)
  ]
}

export const format = (rows: ReadonlyArray<Row>): string =>
  [
    "| real language server | ours | vscode-jsonrpc | ours / vscode |",
    "|---|---:|---:|---:|",
    ...rows.map((r) => `| ${r.measure} | ${r.ours.toFixed(1)} | ${r.vscode.toFixed(1)} | ${r.ratio.toFixed(2)} |`)
  ].join("\n")

if (import.meta.url === `file://${process.argv[1]}`) {
  run().then((rows) => process.stdout.write(format(rows) + "\n"))
}
