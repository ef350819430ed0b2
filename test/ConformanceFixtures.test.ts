/**
 * `hermes-host --conformance` against extensions that each break one rule of docs/protocol.md on purpose
 * (test/fixtures/conformance-extension.mjs, plain JavaScript without Lifeline): each fails exactly the checks it
 * should and no other, within bounded time, and leaves no process behind; a well-behaved one passes everything.
 * SIGTERM to the kit mid-run kills every process it started.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Url from "node:url"
import { checkIds } from "../packages/hermes-node/src/internal/conformanceChecks.js"
import { eventually } from "./support/processes.js"

const root = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "..")
const bin = Path.join(root, "examples", "headless-host", "bin", "hermes-host")

interface KitRun {
  readonly code: number | null
  readonly report: any
  readonly stderr: string
  readonly elapsedMs: number
}

/** `hermes-host --conformance --json --extension EXTENSION` to its end (killed after `timeoutMs`). */
const runKit = (extension: string, timeoutMs = 45_000) =>
  Effect.callback<KitRun>((resume) => {
    const startedAt = Date.now()
    const child = ChildProcess.execFile(
      bin,
      ["--conformance", "--json", "--extension", extension],
      { cwd: root, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, encoding: "utf8" },
      (_error, stdout, stderr) => {
        let report: any
        try {
          report = JSON.parse(stdout)
        } catch {
          report = { checks: [], unparsed: stdout }
        }
        resume(Effect.succeed({ code: child.exitCode, report, stderr, elapsedMs: Date.now() - startedAt }))
      }
    )
  })

/** The live processes whose command line holds `token`. */
const withToken = (token: string): Array<number> =>
  Fs.readdirSync("/proc").filter((entry) => /^\d+$/.test(entry)).filter((pid) => {
    try {
      return Fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").includes(token) &&
        !/^[ZX]$/.test(Fs.readFileSync(`/proc/${pid}/stat`, "latin1").split(") ")[1]?.[0] ?? "")
    } catch {
      return false
    }
  }).map(Number)

/** Whether `pid` is the kit itself (or its launcher): its command line holds `--conformance`. */
const isKit = (pid: number): boolean => {
  try {
    return Fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").includes("--conformance")
  } catch {
    return false
  }
}

/** The fixture's command line, with a token that names its processes. */
const fixture = (mode: string, token: string) =>
  [process.execPath, Path.join(root, "test", "fixtures", "conformance-extension.mjs"), mode, token].join(" ")

const answered = ["closing", "disabled", "reload", "error", "unknown"].map((r) => `shutdown.${r}.answered-within-5s`)
const handshakeFailures = [
  "handshake.initialize-within-10s",
  "handshake.literal-example",
  "handshake.no-params",
  "handshake.params-typed"
]

/** Per mode: the checks that fail, and every other check that does not pass (warn or n/a). */
const expected: ReadonlyArray<{
  readonly mode: string
  readonly fail: ReadonlyArray<string>
  readonly warn?: ReadonlyArray<string>
  readonly na?: ReadonlyArray<string>
  /** Something the first failing check's evidence must say. */
  readonly says?: RegExp
  readonly maxMs?: number
}> = [
  { mode: "good", fail: [] },
  {
    mode: "silent",
    fail: handshakeFailures,
    // Past a handshake that never completes, only the wire checks over what was (not) written still apply.
    na: checkIds.filter((id) =>
      !handshakeFailures.includes(id) &&
      !["wire.stdout-only-frames", "wire.content-length-exact", "wire.notification-not-answered"].includes(id)
    ),
    says: /no answer within 10 s/,
    maxMs: 25_000
  },
  { mode: "junk", fail: ["wire.stdout-only-frames"], says: /byte\(s\) outside frames.*conformance fixture starting/ },
  { mode: "wrong-length", fail: ["wire.content-length-exact"], says: /Content-Length: \d+ for a body of \d+ bytes/ },
  {
    mode: "ignore-shutdown",
    fail: answered,
    na: ["shutdown.exits-after-answer", "shutdown.state-read-back"],
    says: /no answer within 5 s/
  },
  {
    mode: "exit-before-answer",
    fail: answered,
    na: ["shutdown.exits-after-answer"],
    says: /no answer; the process exited \d+ ms after the request/
  },
  { mode: "never-exit", fail: ["shutdown.exits-after-answer"], says: /still running 2 s after its answer/ },
  { mode: "ignore-sigterm", fail: ["abnormal.sigterm"], says: /still running 1000 ms after SIGTERM: SIGKILL/ },
  {
    mode: "no-state",
    fail: [],
    warn: ["shutdown.state-written-atomically"],
    na: ["shutdown.state-read-back"]
  },
  { mode: "non-atomic", fail: ["shutdown.state-written-atomically"], says: /rewrote .*state\.json in place/ }
]

const ids = (report: any, status: string): Array<string> =>
  report.checks.filter((check: any) => check.status === status).map((check: any) => check.id).sort()

describe.concurrent("hermes-host --conformance against misbehaving extensions", () => {
  for (const { fail, maxMs = 20_000, mode, na = [], says, warn = [] } of expected) {
    it.live(`${mode}: fails ${fail.length === 0 ? "nothing" : fail.join(", ")}`, () =>
      Effect.gen(function*() {
        const token = `conformance-${mode}-${Crypto.randomBytes(6).toString("hex")}`
        const run = yield* runKit(fixture(mode, token))
        const { report } = run
        assert.deepStrictEqual(
          report.checks.map((check: any) => check.id),
          checkIds,
          `every check, in order (exit ${run.code}; stderr: ${run.stderr}; ${report.unparsed ?? ""})`
        )
        assert.deepStrictEqual(ids(report, "fail"), [...fail].sort(), JSON.stringify(report.checks, null, 1))
        assert.deepStrictEqual(ids(report, "warn"), [...warn].sort())
        assert.deepStrictEqual(ids(report, "n/a"), [...na].sort())
        assert.strictEqual(report.failed, fail.length)
        assert.strictEqual(run.code, fail.length === 0 ? 0 : 1)
        if (says !== undefined) {
          const first = report.checks.find((check: any) => check.id === fail[0])
          assert.match(first.evidence.join("\n"), says)
        }
        for (const check of report.checks) assert.isArray(check.evidence)
        assert.isBelow(run.elapsedMs, maxMs, "a run of the kit is bounded")
        // Every process the kit started is gone, the stand-in host's and the extension's alike.
        yield* eventually(() => withToken(token).length === 0, `no process of ${token} left`, 2_000)
      }), 60_000)
  }
})

describe("hermes-host --conformance and signals", () => {
  it.live("SIGTERM mid-run: the kit kills every process it started and exits 143", () =>
    Effect.gen(function*() {
      const token = `conformance-signal-${Crypto.randomBytes(6).toString("hex")}`
      const child = ChildProcess.spawn(bin, ["--conformance", "--extension", fixture("good", token)], {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"]
      })
      child.stdout.resume()
      child.stderr.resume()
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
      // The withheld answer keeps the kit busy for 5.5 s: its extensions are running now. Counted without the kit's own
      // command line: the launcher script's subshells carry the token too, before the kit has its signal handlers.
      const extensions = () => withToken(token).filter((pid) => !isKit(pid))
      yield* eventually(() => extensions().length >= 3, "the kit's runs started", 15_000)
      child.kill("SIGTERM")
      const code = yield* Effect.promise(() => exited).pipe(Effect.timeout("10 seconds"))
      assert.strictEqual(code, 143)
      yield* eventually(() => withToken(token).length === 0, "no process left after SIGTERM", 2_000)
    }), 30_000)
})
