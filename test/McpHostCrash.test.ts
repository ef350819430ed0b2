/**
 * A host program written with Promises only (fixtures/mcp-host.ts: the SDK's `Client` to six servers, two of which
 * ignore the end of their stdin and SIGTERM) SIGKILLed: with `@lifeline/mcp`'s transport, the next start of a host
 * sweeps the first host's servers (0 left within 1 s), and a host that runs meanwhile keeps its own; with the SDK's
 * transport, what survives the kill survives the next start too. A host SIGKILLed and never started again: its
 * guardian (`NodeGuardian`) stops its servers. The same sweep from a SQLite journal (`journal` option). The figures are
 * printed on stderr (docs/mcp.md).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as NodeProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Fixtures from "./support/fixtures.js"
import { alive, everything, filesystem, killAll, stubborn, type Which } from "./support/mcp.js"

const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-mcp-hosts-"))
const bundle = Path.join(work, "mcp-host.mjs")
const everyone: Array<number> = []
const measured = (line: string) => process.stderr.write(`[mcp measured] ${line}\n`)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

beforeAll(async () => {
  // The host bundled once (loading it through tsx takes seconds per process on a busy machine). The SDK is CommonJS
  // inside: the banner gives the ESM bundle the `require` its Node built-ins are loaded with.
  await Fixtures.bundleFixture("mcp-host", bundle, { requireShim: true })
}, 60_000)

afterAll(() => {
  killAll(alive(everyone))
  Fs.rmSync(work, { recursive: true, force: true })
})

interface Host {
  readonly child: NodeProcess.ChildProcess
  readonly pids: ReadonlyArray<number>
  /** The host's guardian process (`NodeGuardian`), when it has one. */
  readonly guardian: number | null
  readonly exited: Promise<void>
}

/** Starts a host; resolves with its servers' processes once all six are connected. */
const startHost = (
  transport: Which,
  journal: string,
  options: { forward?: boolean; ownSigint?: boolean; guardian?: boolean; sqlite?: string } = {}
): Promise<Host> =>
  new Promise((resolve, reject) => {
    const child = NodeProcess.spawn(process.execPath, [bundle], {
      env: {
        ...process.env,
        MCP_TRANSPORT: transport,
        MCP_JOURNAL: journal,
        MCP_EVERYTHING: everything,
        MCP_FILESYSTEM: filesystem,
        MCP_ROOT: work,
        MCP_STUBBORN: stubborn,
        MCP_FORWARD: String(options.forward ?? true),
        MCP_OWN_SIGINT: String(options.ownSigint ?? false),
        MCP_GUARDIAN: String(options.guardian ?? true),
        MCP_SQLITE: options.sqlite ?? ""
      },
      // A process group of its own, as a terminal's job: SIGINT to the group is a Ctrl-C.
      detached: true,
      stdio: ["ignore", "pipe", "pipe"]
    })
    const exited = new Promise<void>((done) => child.once("exit", () => done()))
    signals.set(child, new Promise((done) => child.once("exit", (_code, signal) => done(signal))))
    let stderr = ""
    child.stderr.on("data", (chunk) => (stderr += String(chunk)))
    let stdout = ""
    child.stdout.on("data", (chunk) => {
      stdout += String(chunk)
      const end = stdout.indexOf("\n")
      if (end < 0) return
      const { guardian, pids } = JSON.parse(stdout.slice(0, end)) as { pids: Array<number>; guardian: number | null }
      // The host too: a test that fails before it kills its hosts must not leave them running.
      everyone.push(child.pid!, ...pids, ...(guardian === null ? [] : [guardian]))
      resolve({ child, pids, guardian, exited })
    })
    child.once("exit", (code) => reject(new Error(`the host exited (${code}): ${stderr}`)))
  })

const signals = new WeakMap<NodeProcess.ChildProcess, Promise<NodeJS.Signals | null>>()

const kill = async (host: Host) => {
  host.child.kill("SIGKILL")
  await host.exited
}

describe("a host SIGKILLed, then started again", () => {
  it("lifeline: the next start sweeps the dead host's servers within 1 s; a running host's are untouched", async () => {
    const journal = Path.join(work, "lifeline-journal")
    // Without its guardian, which would have stopped them already: what is measured here is the sweep at start.
    const first = await startHost("lifeline", journal, { guardian: false })
    const bystander = await startHost("lifeline", journal)
    // server-everything and server-filesystem: 1 directly, 2 through sh -c; the stubborn server: 2 and 3 (its helper).
    assert.strictEqual(first.pids.length, 11)
    await kill(first)
    await sleep(300)
    const survivors = alive(first.pids)
    const start = performance.now()
    const starting = startHost("lifeline", journal)
    // The sweep runs when the new host starts its first server, before that server is spawned.
    while (alive(first.pids).length > 0 && performance.now() - start < 10_000) await sleep(10)
    const sweptAfter = performance.now() - start
    const restarted = await starting
    const readyAfter = performance.now() - start
    const left = alive(first.pids)
    measured(
      `lifeline host SIGKILL: ${survivors.length} of ${first.pids.length} left 300 ms after the kill, ` +
        `${left.length} left after the next host started: swept ${sweptAfter.toFixed(0)} ms after its spawn ` +
        `(its six servers connected after ${readyAfter.toFixed(0)} ms)`
    )
    assert.deepStrictEqual(left, [])
    assert.isBelow(sweptAfter, readyAfter)
    assert.deepStrictEqual(alive(bystander.pids), [...bystander.pids])
    assert.deepStrictEqual(alive(restarted.pids), [...restarted.pids])
    await kill(bystander)
    await kill(restarted)
  }, 40_000)

  it("sdk: what survives the kill survives the next start", async () => {
    const first = await startHost("sdk", "")
    await kill(first)
    await sleep(300)
    const survivors = alive(first.pids)
    const restarted = await startHost("sdk", "")
    await sleep(1000)
    const left = alive(first.pids)
    measured(
      `sdk host SIGKILL: ${survivors.length} of ${first.pids.length} left 300 ms after the kill, ` +
        `${left.length} left 1 s after the next host started`
    )
    assert.isAbove(left.length, 0)
    await kill(restarted)
  }, 40_000)
})

describe("Ctrl-C of a host that has no signal handler (SIGINT to its process group, as a terminal sends it)", () => {
  const cases: ReadonlyArray<readonly [string, Which, { forward: boolean; guardian: boolean }]> = [
    ["sdk", "sdk", { forward: true, guardian: true }],
    ["lifeline, forwardHostSignals and guardian off", "lifeline", { forward: false, guardian: false }],
    ["lifeline, forwardHostSignals off (the guardian alone)", "lifeline", { forward: false, guardian: true }],
    ["lifeline", "lifeline", { forward: true, guardian: true }]
  ]
  for (const [name, transport, options] of cases) {
    it(`${name}: how long the servers outlive the host`, async () => {
      const journal = Path.join(work, `ctrl-c-${transport}-${options.forward}-${options.guardian}`)
      const host = await startHost(transport, journal, options)
      const start = performance.now()
      process.kill(-host.child.pid!, "SIGINT")
      const signal = await signals.get(host.child)
      const hostGone = performance.now() - start
      // The guardian alone gives the stubborn servers the transport's `killGrace` (2 s) after its SIGTERM.
      const bound = options.forward || !options.guardian ? 1000 : 3000
      while (alive(host.pids).length > 0 && performance.now() - start < bound) await sleep(10)
      const left = alive(host.pids)
      const outlived = performance.now() - start
      measured(
        `${name} Ctrl-C: the host died of ${signal} after ${hostGone.toFixed(0)} ms; ` +
          (left.length === 0
            ? `its servers were gone ${outlived.toFixed(0)} ms after the signal`
            : `${left.length} of ${host.pids.length} processes still there ${bound} ms after the signal`)
      )
      killAll(left)
      assert.strictEqual(signal, "SIGINT")
      if (transport === "lifeline" && (options.forward || options.guardian)) {
        assert.deepStrictEqual(left, [])
        assert.isBelow(outlived, bound + 500)
      }
    }, 40_000)
  }

  it("lifeline: a host that listens for SIGINT itself keeps it: the transport passes nothing on", async () => {
    const host = await startHost("lifeline", Path.join(work, "own-sigint"), { ownSigint: true })
    process.kill(-host.child.pid!, "SIGINT")
    await sleep(500)
    assert.isTrue(alive([host.child.pid!]).length === 1, "the host is still running")
    assert.deepStrictEqual(alive(host.pids), [...host.pids])
    await kill(host)
  }, 40_000)
})

describe("a host SIGKILLed and never started again", () => {
  it("lifeline: its guardian stops its servers (SIGTERM, SIGKILL killGrace later) and exits", async () => {
    const everythingGone: Array<number> = []
    const allGone: Array<number> = []
    for (let run = 0; run < 3; run++) {
      const host = await startHost("lifeline", Path.join(work, `guardian-${run}`))
      assert.isNotNull(host.guardian)
      assert.strictEqual(alive([host.guardian!]).length, 1, "the guardian runs while the host does")
      // The first two servers are server-everything (directly and through `sh -c`): they stop at SIGTERM.
      const cooperative = host.pids.slice(0, 3)
      const start = performance.now()
      host.child.kill("SIGKILL")
      let cooperativeAfter: number | undefined
      while (alive(host.pids).length > 0 && performance.now() - start < 5000) {
        if (cooperativeAfter === undefined && alive(cooperative).length === 0) {
          cooperativeAfter = performance.now() - start
        }
        await sleep(5)
      }
      const after = performance.now() - start
      const left = alive(host.pids)
      killAll(left)
      assert.deepStrictEqual(left, [], `run ${run}: ${left.length} of ${host.pids.length} left 5 s after the kill`)
      everythingGone.push(cooperativeAfter ?? after)
      allGone.push(after)
      while (alive([host.guardian!]).length > 0 && performance.now() - start < 6000) await sleep(10)
      assert.deepStrictEqual(alive([host.guardian!]), [], "the guardian exits once it has swept")
    }
    const median = (values: Array<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
    measured(
      `lifeline host SIGKILL, never started again (guardian): server-everything gone after ` +
        `${everythingGone.map((ms) => ms.toFixed(0)).join(", ")} ms (median ${median(everythingGone).toFixed(0)}); ` +
        `all 8 processes (the stubborn ones need SIGKILL after killGrace, 2 s) after ` +
        `${allGone.map((ms) => ms.toFixed(0)).join(", ")} ms (median ${median(allGone).toFixed(0)})`
    )
    assert.isBelow(median(allGone), 3000)
  }, 60_000)
})

describe("a journal in SQLite", () => {
  it("lifeline: the servers of a host SIGKILLed are swept from the SQLite journal at the next start", async () => {
    const sqlite = Path.join(work, "sqlite", "journal.db")
    const first = await startHost("lifeline", Path.join(work, "unused-directory"), { guardian: false, sqlite })
    assert.isTrue(Fs.existsSync(sqlite), "the journal is the SQLite file")
    assert.isFalse(Fs.existsSync(Path.join(work, "unused-directory")), "no file journal was made")
    await kill(first)
    await sleep(300)
    assert.isAbove(alive(first.pids).length, 0, "the stubborn servers survive the kill (no guardian)")
    const start = performance.now()
    const restarted = await startHost("lifeline", Path.join(work, "unused-directory"), { guardian: false, sqlite })
    const left = alive(first.pids)
    measured(
      `lifeline host SIGKILL, SQLite journal: ${left.length} of ${first.pids.length} left once the next host ` +
        `(same SQLite file) had connected, ${(performance.now() - start).toFixed(0)} ms after its spawn`
    )
    assert.deepStrictEqual(left, [])
    assert.deepStrictEqual(alive(restarted.pids), [...restarted.pids])
    await kill(restarted)
  }, 40_000)
})
