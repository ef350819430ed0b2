/**
 * The conformance kit's checks of the end of an extension's life: `shutdown` once per reason, the exit after the
 * answer, the state file (valid JSON, no temporary file left, replaced rather than rewritten, read back by the next
 * start), and the abnormal ends (SIGTERM, the end of stdin, the host's pid gone).
 */
import * as HermesProtocol from "@lifeline/hermes/HermesProtocol"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type { Observations, Run, RunName, StateSnapshot } from "./conformanceRun.js"
import { abnormalWaitMs, reasonOf, unknownReason } from "./conformanceRun.js"
import type { Check, Verdict } from "./conformanceVerdict.js"
import {
  answerOf,
  canonical,
  cut,
  exitText,
  latency,
  messageOf,
  noAnswer,
  notReached,
  parseOr,
  show,
  verdict
} from "./conformanceVerdict.js"

/** The runs that ended with `shutdown`, and got that far. */
const stopped = (o: Observations): Array<Run> => Object.values(o).filter((run): run is Run => run?.stop !== undefined)

const decodeShutdown = Schema.decodeUnknownResult(HermesProtocol.ShutdownResult)

/** docs/protocol.md, "shutdown": `{ success: true }` within 5 s, whatever the reason. */
const answeredWithin5s = (reason: string, label: string): Check => ({
  id: `shutdown.${label}.answered-within-5s`,
  rule: "docs/protocol.md § Lifecycle (answer to shutdown: 5 s), § shutdown (ShutdownResult" +
    (label === "unknown" ? "; \"Any other reason (defined here) is accepted, never refused\")" : ")"),
  judge: (o) => {
    const runs = (Object.keys(reasonOf) as Array<RunName>).filter((name) => reasonOf[name] === reason)
      .map((name) => o[name]).filter((run): run is Run => run?.stop !== undefined)
    if (runs.length === 0) return verdict("n/a", [`not reached: no run with reason ${reason} got to its shutdown`])
    const evidence: Array<string> = []
    let failed = false
    let slowest = 0
    for (const run of runs) {
      const { shutdown } = run.stop!
      const answer = answerOf(shutdown)
      if (answer === undefined) {
        failed = true
        evidence.push(`${run.name}: shutdown {reason: "${reason}"}`, ...noAnswer(run, shutdown, 5_000))
        continue
      }
      const ms = latency(shutdown, answer)
      slowest = Math.max(slowest, ms)
      const decoded = "result" in messageOf(answer) ? decodeShutdown(messageOf(answer).result) : undefined
      const ok = decoded !== undefined && Result.isSuccess(decoded) && decoded.success.success
      if (!ok) failed = true
      evidence.push(`${run.name}: answered in ${ms} ms${ok ? "" : ", not { success: true }"}: ${show(answer)}`)
    }
    return verdict(failed ? "fail" : "pass", evidence, slowest)
  }
})

/** Files that look like a temporary copy of the state: anything but `state.json` and its set-aside copies. */
const temporary = (snapshot: StateSnapshot): Array<string> =>
  snapshot.entries.filter((name) =>
    name !== "state.json" && !name.startsWith("state.json.bad-") &&
    (/state\.json/i.test(name) || /(\.tmp|\.temp|\.part|~|\.swp)$/i.test(name) || /^\.?tmp/i.test(name))
  )

/** Whether the extension keeps state at all: a state file after any run that shut down. */
const keepsState = (o: Observations): boolean => stopped(o).some((run) => run.state?.file !== undefined)

const stateWritten: Check = {
  id: "shutdown.state-written-atomically",
  rule: "docs/protocol.md § shutdown (the checklist persists state), § A state file that could not be read " +
    "(`<dataDir>/extensions/<name>/state.json`; \"the file may be all the user has\"); written to a temporary file " +
    "and renamed: docs/writing-an-extension.md § Resources and state",
  judge: (o) => {
    const runs = Object.values(o).filter((run): run is Run => run?.state !== undefined)
    if (runs.length === 0) return verdict("n/a", ["not reached: no run got past initialize"])
    const evidence: Array<string> = []
    let failed = false
    let files = 0
    for (const run of runs) {
      const state = run.state!
      const left = temporary(state)
      if (left.length > 0) {
        failed = true
        evidence.push(`${run.name}: left ${left.join(", ")} in ${state.dir}`)
      }
      if (state.file === undefined) continue
      files++
      if (!state.file.json) {
        failed = true
        evidence.push(`${run.name}: ${state.dir}/state.json is not JSON: ${cut(JSON.stringify(state.file.text), 160)}`)
      }
    }
    if (files === 0 && !failed) {
      return verdict("warn", ["no state.json in any run: fine for an extension that keeps no state"])
    }
    const back = o["read-back"]
    const replaced = back?.replaced
    if (replaced === undefined) {
      evidence.push("not checked whether a second start replaces state.json: no read-back run wrote one")
    } else if (replaced.rewritten) {
      failed = true
      evidence.push(
        `read-back: the next start rewrote ${back!.state?.dir}/state.json in place (inode ${replaced.ino}): a crash ` +
          "or a full disk mid-write leaves it cut short; write a temporary file and rename it over state.json"
      )
    } else {
      evidence.push(
        replaced.unlinked
          ? `read-back: the next start replaced state.json (inode ${replaced.ino} unlinked), not rewrote it`
          : "read-back: the next start left state.json as it was"
      )
    }
    if (!failed) evidence.unshift(`state.json valid JSON in ${files} run(s), no temporary file left`)
    return verdict(failed ? "fail" : "pass", evidence)
  }
}

const stateReadBack: Check = {
  id: "shutdown.state-read-back",
  rule: "docs/protocol.md § A state file that could not be read (only a file that cannot be read is set aside; " +
    "`stateSetAside` in the shutdown answer)",
  judge: (o) => {
    const main = o.main
    const saved = main?.state?.file
    if (saved === undefined) return verdict("n/a", ["the main run left no state to read back"])
    const skip = notReached(o["read-back"], "read-back")
    if (skip !== undefined) return skip
    const back = o["read-back"]!
    const setAside = back.state?.entries.filter((name) => name.startsWith("state.json.bad-")) ?? []
    const answer = answerOf(back.stop?.shutdown)
    const reported = answer === undefined ? undefined : messageOf(answer).result?.data?.stateSetAside
    if (setAside.length > 0 || reported !== undefined) {
      return verdict("fail", [
        `the next start set its own state file aside (${setAside.join(", ") || "reported"})`,
        ...(answer === undefined ? [] : [show(answer)])
      ])
    }
    const first = canonical(parseOr(saved.text))
    const second = back.state?.file === undefined ? undefined : canonical(parseOr(back.state.file.text))
    if (second === undefined) return verdict("fail", ["the next start left no state.json behind"])
    // The state of a start on an empty data directory that ran no command: what ignoring the file would write.
    const initial = [o["no-params"], o.literal].map((run) => run?.state?.file?.text).find((t) => t !== undefined)
    const fresh = initial === undefined ? undefined : canonical(parseOr(initial))
    if (second === first) {
      return first === fresh
        ? verdict("warn", [`the state after the commands, ${cut(first)}, equals the initial state: cannot tell`])
        : verdict("pass", [`the main run saved ${cut(first)}; the next start, running no command, kept it`])
    }
    if (fresh !== undefined && second === fresh) {
      return verdict("fail", [
        `the main run saved ${cut(first)}; the next start wrote the initial state ${cut(second)}: it did not read it`
      ])
    }
    return verdict("warn", [`the state changed between two starts without a command: ${cut(first)} → ${cut(second)}`])
  }
}

const exitsAfterAnswer: Check = {
  id: "shutdown.exits-after-answer",
  rule: "docs/protocol.md § Lifecycle (exit after a successful answer: 2 s; after an error answer: 1 s; then " +
    "SIGTERM, and SIGKILL 1 s later)",
  judge: (o) => {
    const runs = stopped(o).filter((run) => answerOf(run.stop!.shutdown) !== undefined)
    if (runs.length === 0) return verdict("n/a", ["no shutdown was answered"])
    let failed = false
    let slowest = 0
    const evidence = runs.map((run) => {
      const { exit, killed, shutdown, terminated } = run.stop!
      const answered = answerOf(shutdown)!
      const bound = messageOf(answered).result?.success === true ? 2_000 : 1_000
      if (terminated || killed || exit === undefined) {
        failed = true
        return `${run.name}: still running ${bound / 1000} s after its answer and the end of its stdin: ` +
          (killed ? "SIGTERM, then SIGKILL" : "SIGTERM")
      }
      const ms = Math.round(exit.at - answered.at)
      slowest = Math.max(slowest, ms)
      return `${run.name}: exited ${ms} ms after its answer (${exitText(exit)})`
    })
    return verdict(failed ? "fail" : "pass", evidence, slowest)
  }
}

/** An abnormal end: the exit within `boundMs` of the trigger, with the state saved if the extension keeps any. */
const abnormal = (id: string, name: "sigterm" | "stdin-eof" | "host-pid", boundMs: number, rule: string): Check => ({
  id,
  rule,
  judge: (o): Verdict => {
    const skip = notReached(o[name], name)
    if (skip !== undefined) return skip
    const run = o[name]!
    const { at, escalated, exit, trigger } = run.abnormal!
    if (escalated || exit === undefined || exit.at - at > boundMs) {
      const waited = Math.min(boundMs, abnormalWaitMs[name])
      return verdict("fail", [
        exit !== undefined && !escalated
          ? `exited ${Math.round(exit.at - at)} ms after ${trigger}, more than ${boundMs} ms`
          : `still running ${waited} ms after ${trigger}: ${name === "sigterm" ? "SIGKILL" : "SIGTERM, SIGKILL"}`
      ])
    }
    const ms = exit.at - at
    const evidence = [`exited ${Math.round(ms)} ms after ${trigger} (${exitText(exit)})`]
    if (keepsState(o)) {
      const file = run.state?.file
      if (file === undefined || !file.json) {
        return verdict("fail", [...evidence, `but saved no state (it does at shutdown): ${run.state?.dir ?? ""}`])
      }
      evidence.push(`state saved: ${cut(file.text, 160)}`)
    }
    return verdict("pass", evidence, ms)
  }
})

/** Every end-of-life check, in scorecard order. */
export const shutdownChecks: ReadonlyArray<Check> = [
  ...HermesProtocol.ShutdownReason.literals.map((reason) => answeredWithin5s(reason, reason)),
  answeredWithin5s(unknownReason, "unknown"),
  exitsAfterAnswer,
  stateWritten,
  stateReadBack,
  abnormal(
    "abnormal.sigterm",
    "sigterm",
    1_000,
    "docs/protocol.md § Lifecycle (SIGTERM, then SIGKILL 1 s later); the checklist on SIGTERM: " +
      "docs/writing-an-extension.md § What the SDK does at shutdown"
  ),
  abnormal(
    "abnormal.stdin-eof",
    "stdin-eof",
    1_000,
    "docs/protocol.md § Lifecycle, \"The end of stdin\" (the checklist, and an exit \"at once when it is idle\")"
  ),
  // Noticing takes up to the check interval (the SDK's Node wiring checks every 250 ms), then the exit follows as at
  // the end of stdin: within 1 s in all.
  abnormal(
    "abnormal.host-pid-gone",
    "host-pid",
    1_000,
    "docs/protocol.md § initialize, \"The host's pid\" (once it is gone: the checklist, and exit; \"the Node " +
      "wiring checks every 250 ms\"), then as at \"The end of stdin\""
  )
]
