/**
 * The conformance kit against an extension that attacks the kit itself (test/fixtures/conformance-extension.mjs):
 * 20,000 answers to no request and 2,001 commands with long ids still make a JSON report and an HTML page under
 * `maxReportBytes`, each check's evidence within its caps, with what was left out counted. And a kit killed with
 * SIGKILL while it judges an extension that ignores the end of its stdin and SIGTERM (test/fixtures/ignore-sigterm.mjs):
 * the next kit run kills what it left (its journal, conformanceJournal.ts), and leaves a live kit run's extension alone.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import {
  maxEvidenceBytes,
  maxEvidenceLines,
  maxListedCommands,
  maxReportBytes
} from "../packages/hermes-node/src/internal/conformanceVerdict.js"
import { root } from "./support/framed.js"
import { awaitGone, eventually, isAlive } from "./support/processes.js"

const bin = Path.join(root, "examples", "headless-host", "bin", "hermes-host")
const fixture = (mode: string) =>
  [process.execPath, Path.join(root, "test", "fixtures", "conformance-extension.mjs"), mode].join(" ")

describe("the conformance kit's reports stay bounded whatever the extension sends", () => {
  it.live(
    "20,000 answers to nothing and 2,001 commands: JSON and HTML under maxReportBytes, the rest counted",
    () =>
      Effect.gen(function*() {
        const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "conformance-hostile-"))
        const page = Path.join(dir, "report.html")
        const { code, stdout } = yield* Effect.callback<{ code: number | null; stdout: string }>((resume) => {
          const child = ChildProcess.execFile(
            bin,
            ["--conformance", "--json", "--html", page, "--extension", fixture("flood")],
            { cwd: root, timeout: 45_000, maxBuffer: 256 * 1024 * 1024, encoding: "utf8" },
            (_error, out) => resume(Effect.succeed({ code: child.exitCode, stdout: out }))
          )
        })
        assert.strictEqual(code, 1)
        const jsonBytes = Buffer.byteLength(stdout)
        const htmlBytes = Fs.statSync(page).size
        assert.isBelow(jsonBytes, maxReportBytes)
        assert.isBelow(htmlBytes, maxReportBytes)
        const report = JSON.parse(stdout)
        for (const check of report.checks) {
          assert.isAtMost(check.evidence.length, maxEvidenceLines, check.id)
          assert.isAtMost(Buffer.byteLength(check.evidence.join("")), maxEvidenceBytes, check.id)
        }
        const unanswered = report.checks.find((c: any) => c.id === "wire.notification-not-answered")
        assert.strictEqual(unanswered.status, "fail")
        assert.match(unanswered.evidence.at(-1), /^… and \d{2},\d{3} more \(\d+\.\d MB\) left out$/)
        const commands = report.checks.find((c: any) => c.id === "behaviour.commands-run")
        assert.match(commands.evidence[0], /^executed 2001 command\(s\) at \d+ ms: .* … and 1,981 more$/)
        assert.strictEqual(report.extension.commandCount, 2001)
        assert.strictEqual(report.extension.commands.length, maxListedCommands)
        assert.include(Fs.readFileSync(page, "utf8"), "left out")
        Fs.rmSync(dir, { recursive: true, force: true })
      }),
    60_000
  )
})

/** The live extension processes `node …/ignore-sigterm.mjs TOKEN` (not the kit, whose --extension names them too). */
const extensionsOf = (token: string): Array<number> =>
  Fs.readdirSync("/proc").filter((entry) => /^\d+$/.test(entry)).filter((pid) => {
    try {
      const args = Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
      return args[1]?.endsWith("ignore-sigterm.mjs") === true && args[2] === token && isAlive(Number(pid))
    } catch {
      return false
    }
  }).map(Number)

describe("a conformance kit killed with SIGKILL leaves nothing running for good", () => {
  it.live(
    "the next kit run kills the killed run's extension within ~1 s, and leaves a live run's alone",
    () =>
      Effect.gen(function*() {
        // Built once before the clock starts: the first start of a changed bundle takes seconds.
        ChildProcess.execFileSync(bin, ["--help"], { cwd: root, stdio: "ignore" })
        const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "conformance-journal-"))
        const journal = Path.join(dir, "journal.db")
        const kits: Array<ChildProcess.ChildProcess> = []
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            for (const kit of kits) if (kit.exitCode === null && kit.signalCode === null) kit.kill("SIGKILL")
            for (const token of ["live", "killed", "next"]) {
              for (const pid of extensionsOf(token)) process.kill(pid, "SIGKILL")
            }
            Fs.rmSync(dir, { recursive: true, force: true })
          })
        )
        const kit = (token: string) => {
          const child = ChildProcess.spawn(
            bin,
            [
              "--conformance",
              "--json",
              "--journal",
              journal,
              "--extension",
              `${process.execPath} ${Path.join(root, "test", "fixtures", "ignore-sigterm.mjs")} ${token}`
            ],
            { cwd: root, stdio: ["ignore", "ignore", "pipe"] }
          )
          child.stderr!.resume()
          kits.push(child)
          return child
        }
        const live = kit("live")
        yield* eventually(() => extensionsOf("live").length > 0, "the live kit's extension", 10_000)
        const killed = kit("killed")
        yield* eventually(
          () => extensionsOf("live").length > 0 && extensionsOf("killed").length > 0,
          "both kits' extensions",
          10_000
        )
        // Up and running (the fixture says so on stderr at its start: a write to a closed pipe would end it).
        yield* Effect.sleep("1 second")
        const orphans = extensionsOf("killed")
        const others = extensionsOf("live")
        killed.kill("SIGKILL")
        // It ignores the end of its stdin and SIGTERM: without a sweep it would run for good.
        yield* Effect.sleep("300 millis")
        assert.isTrue(orphans.every(isAlive), "the killed kit's extension outlives it")

        const startedAt = performance.now()
        kit("next")
        for (const pid of orphans) yield* awaitGone(pid, 5_000)
        const ms = performance.now() - startedAt
        assert.isBelow(ms, 1_500, `gone ${Math.round(ms)} ms after the next kit's start`)
        assert.isTrue(others.every(isAlive), "the live kit's extension is not touched")
        assert.isNull(live.exitCode)

        // The live kit ends as usual and takes its own extensions with it.
        live.kill("SIGTERM")
        yield* Effect.promise(() =>
          new Promise((resolve) => live.exitCode !== null ? resolve(null) : live.once("exit", resolve))
        )
        for (const pid of others) yield* awaitGone(pid, 3_000)
      }).pipe(Effect.scoped),
    40_000
  )
})
