/**
 * The conformance kit against an extension that attacks the kit itself (test/fixtures/conformance-extension.mjs):
 * 20,000 answers to no request and 2,001 commands with long ids still make a JSON report and an HTML page under
 * `maxReportBytes`, each check's evidence within its caps, with what was left out counted.
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
} from "../examples/headless-host/conformanceVerdict.js"
import { root } from "./support/framed.js"

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
