/**
 * One row of `bench/peer.ts` alone, for work on it: small notifications one way, in memory, ours (Effect and Promise
 * callers) against vscode-jsonrpc in one process, over interleaved rounds, with the ratio of each round and their
 * median. On a loaded machine the ratios of one process are what can be compared, not the rates.
 * `pnpm exec node scripts/run-bundled.mjs bench/notify.ts [--rounds=9] [--count=20000] [--only=ours|vscode] [--clock=cpu|wall]`
 * (`--only` runs one side, e.g. under `--cpu-prof`). Rates are per second of the process's CPU time (all threads), so
 * that other load on the machine counts less; `--clock=wall` gives wall-clock rates, as `bench/peer.ts` does.
 */
import { makeMemoryPair, oursInMemory, small, vscodeInMemory } from "./peer.js"

const arg = (name: string, fallback: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback
const rounds = Number(arg("rounds", "9"))
const count = Number(arg("count", "20000"))
const only = arg("only", "all")
const byCpu = arg("clock", "cpu") === "cpu"

const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

const main = async () => {
  const ours = await oursInMemory(makeMemoryPair())
  const vscode = vscodeInMemory()
  const clients = [
    ...(only === "vscode" ? [] : [["effect", ours.effect], ["promise", ours.promise]] as const),
    ...(only === "ours" ? [] : [["vscode", vscode]] as const)
  ]
  for (const [, client] of clients) {
    await client.ready()
    for (let i = 0; i < 3; i++) await client.notifications(small, count)
  }
  const rates = new Map<string, Array<number>>(clients.map(([name]) => [name, []]))
  for (let r = 0; r < rounds; r++) {
    const line: Array<string> = []
    for (let k = 0; k < clients.length; k++) {
      const [name, client] = clients[(r + k) % clients.length]
      const cpu = process.cpuUsage()
      const wall = await client.notifications(small, count)
      const used = process.cpuUsage(cpu)
      // CPU time of the process (every thread) rather than wall time: the machine is shared.
      rates.get(name)!.push(byCpu ? count / ((used.user + used.system) / 1e6) : wall)
    }
    for (const [name] of clients) line.push(`${name} ${Math.round(rates.get(name)![r]).toLocaleString("en-US")}/s`)
    if (only === "all") {
      line.push(`effect/vscode ${(rates.get("effect")![r] / rates.get("vscode")![r]).toFixed(2)}x`)
      line.push(`promise/vscode ${(rates.get("promise")![r] / rates.get("vscode")![r]).toFixed(2)}x`)
    }
    process.stdout.write(`round ${r + 1}: ${line.join("  ")}\n`)
  }
  const summary = [...rates].map(([name, xs]) => `${name} ${Math.round(median(xs)).toLocaleString("en-US")}/s`)
  if (only === "all") {
    const ratios = (name: string) => rates.get(name)!.map((x, i) => x / rates.get("vscode")![i])
    summary.push(`effect/vscode median ${median(ratios("effect")).toFixed(2)}x`)
    summary.push(`promise/vscode median ${median(ratios("promise")).toFixed(2)}x`)
  }
  if (only === "all") {
    // The least disturbed round of each: on a shared machine contention only ever adds CPU time.
    const best = (name: string) => Math.max(...rates.get(name)!)
    summary.push(`best effect/vscode ${(best("effect") / best("vscode")).toFixed(2)}x`)
    summary.push(`best promise/vscode ${(best("promise") / best("vscode")).toFixed(2)}x`)
  }
  process.stdout.write(`median: ${summary.join("  ")}  (load ${(await import("node:os")).loadavg()[0].toFixed(1)})\n`)
  await ours.effect.close()
  await vscode.close()
}

// A driver comparing two builds of the peer in one process imports each bundle with this list set, and runs the rows.
const library = (globalThis as { __notifyBuilds?: Array<unknown> }).__notifyBuilds
if (library !== undefined) library.push({ oursInMemory, makeMemoryPair, small, vscodeInMemory })
else {
  main().then(() => process.exit(0), (error) => {
    process.stderr.write(`${String(error?.stack ?? error)}\n`)
    process.exit(1)
  })
}
