/**
 * The conformance kit's checks of the handshake, the wire and the extension's behaviour, each with a stable id and
 * the place in docs/protocol.md that states its rule. `judge` runs every check (these and the shutdown ones) over
 * the runs' observations, in the order of the scorecard.
 */
import { behaviourChecks } from "./conformanceBehaviourChecks.js"
import type { Received } from "./conformanceDriver.js"
import { maxStdoutBytes } from "./conformanceDriver.js"
import type { Exchange } from "./conformanceHost.js"
import type { Observations, Run } from "./conformanceRun.js"
import { initializeProblem, literalExample } from "./conformanceRun.js"
import { shutdownChecks } from "./conformanceShutdownChecks.js"
import type { Check, CheckResult, Verdict } from "./conformanceVerdict.js"
import {
  answerOf,
  capEvidence,
  collector,
  cut,
  errorCodeOf,
  latency,
  messageOf,
  noAnswer,
  notReached,
  sessions,
  show,
  verdict
} from "./conformanceVerdict.js"

/** An `initialize` that must be answered with a valid result within 10 s. */
const initializeAnswered = (run: Run | undefined, what: string, how: string): Verdict => {
  if (run === undefined) return verdict("n/a", [`the ${what} run did not take place`])
  if (run.spawnError !== undefined) return verdict("fail", [`the process could not be started: ${run.spawnError}`])
  const init = run.initialize!
  const answer = answerOf(init)
  if (answer === undefined) return verdict("fail", [...noAnswer(run, init, 10_000), how])
  const problem = initializeProblem(answer)
  const ms = latency(init, answer)
  if (problem !== undefined) return verdict("fail", [`answered in ${ms} ms, but ${problem}`, show(answer), how], ms)
  const result = messageOf(answer).result
  return verdict("pass", [
    `answered in ${ms} ms: ${result.name} ${result.version}, ${result.commands.length} command(s)`,
    how,
    show(answer)
  ], ms)
}

/** A request that must be answered with error `code`. */
const answeredWith = (run: Run, exchange: Exchange | undefined, code: number, what: string): Array<string> => {
  if (exchange === undefined) return [`${what}: not sent`]
  const answer = answerOf(exchange)
  if (answer === undefined) return noAnswer(run, exchange, 5_000)
  const got = errorCodeOf(answer)
  return got === code
    ? []
    : [`${what}: answered ${got === undefined ? "with a result" : `error ${got}`}, not ${code}: ${show(answer)}`]
}

const handshake: ReadonlyArray<Check> = [
  {
    id: "handshake.initialize-within-10s",
    rule: "docs/protocol.md § Lifecycle (answer to initialize: 10 s), § initialize (InitializeResult: name pattern, " +
      "version, commands with id and title)",
    judge: (o) => initializeAnswered(o.main, "main", "initialize with every field (hostPid: the kit's pid)")
  },
  {
    id: "handshake.literal-example",
    rule: "docs/protocol.md § Transport (the example frame, Content-Length 58), § initialize (Defaults: `{}`)",
    judge: (o) => initializeAnswered(o.literal, "literal", `sent the protocol's frame byte for byte: ${literalExample}`)
  },
  {
    id: "handshake.no-params",
    rule: "docs/protocol.md § initialize (Defaults: accept initialize \"with no params at all\")",
    judge: (o) => initializeAnswered(o["no-params"], "no-params", "initialize without a params member")
  },
  {
    id: "handshake.params-typed",
    rule: "docs/protocol.md § initialize (Defaults: `{\"hostPid\": \"7\"}` is answered -32602)",
    judge: (o) => {
      const run = o["typed-params"]
      if (run === undefined || run.spawnError !== undefined) return verdict("n/a", ["the process could not be started"])
      const problems = answeredWith(run, run.initialize, -32602, "initialize {\"hostPid\":\"7\"}")
      const answer = answerOf(run.initialize)
      return problems.length > 0
        ? verdict("fail", problems)
        : verdict("pass", [`answered -32602 in ${latency(run.initialize!, answer!)} ms: ${show(answer!)}`])
    }
  },
  {
    id: "handshake.initialized-accepted",
    rule: "docs/protocol.md § initialized (a notification, sent once), § Transport (plain JSON-RPC 2.0)",
    judge: (o) => {
      const run = o.main
      const skip = notReached(run, "main")
      if (skip !== undefined) return skip
      const next = run!.steps.secondInitialize
      const answer = answerOf(next)
      if (answer === undefined) {
        return verdict("fail", ["after initialized, the next request went unanswered", ...noAnswer(run!, next!, 5_000)])
      }
      return verdict("pass", [
        `initialized sent; the next request (a second initialize) was answered ${latency(next!, answer)} ms later`
      ])
    }
  },
  {
    id: "handshake.second-initialize-refused",
    rule: "docs/protocol.md § Error codes (-32600: \"a second initialize is one\")",
    judge: (o) => {
      const skip = notReached(o.main, "main")
      if (skip !== undefined) return skip
      const run = o.main!
      const problems = answeredWith(run, run.steps.secondInitialize, -32600, "a second initialize")
      return problems.length > 0
        ? verdict("fail", problems)
        : verdict("pass", [`refused -32600: ${show(answerOf(run.steps.secondInitialize)!)}`])
    }
  }
]

/** Why a frame is not a JSON-RPC 2.0 message, or undefined. */
const notJsonRpc = (frame: Received): string | undefined => {
  if (!frame.json) return `a frame whose body is not JSON: ${cut(frame.text, 120)}`
  const m = frame.message
  if (typeof m !== "object" || m === null || Array.isArray(m)) return `a frame that is not a JSON-RPC message`
  if ((m as Record<string, unknown>).jsonrpc !== "2.0") return `a message without "jsonrpc": "2.0": ${show(frame)}`
  return undefined
}

const wire: ReadonlyArray<Check> = [
  {
    id: "wire.stdout-only-frames",
    rule: "docs/protocol.md § Transport (\"Nothing but frames may ever be written to stdout\")",
    judge: (o) => {
      const evidence: Array<string> = []
      let frames = 0
      let bytes = 0
      for (const run of sessions(o)) {
        const child = run.session!.child
        frames += child.received.length
        bytes += child.stdoutBytes()
        const junk = child.junk.reduce((n, j) => n + j.bytes, 0)
        if (junk > 0) {
          const first = child.junk[0]
          evidence.push(
            `${run.name}: ${junk} byte(s) outside frames, the first at ${run.session!.ms(first.at)} ms: ` +
              cut(JSON.stringify(first.sample), 120)
          )
        }
        const bad = child.received.map(notJsonRpc).filter((why) => why !== undefined)
        if (bad.length > 0) evidence.push(`${run.name}: ${bad.length} frame(s) not JSON-RPC, e.g. ${bad[0]}`)
        if (child.stdoutBytes() > maxStdoutBytes) {
          evidence.push(
            `${run.name}: ${child.stdoutBytes()} bytes on stdout, more than the kit reads (${maxStdoutBytes})`
          )
        }
      }
      return evidence.length > 0
        ? verdict("fail", evidence)
        : verdict("pass", [
          `${frames} frame(s), ${bytes} byte(s) on stdout over ${sessions(o).length} runs: all frames`
        ])
    }
  },
  {
    id: "wire.content-length-exact",
    rule: "docs/protocol.md § Transport (\"the length counts bytes, not characters\")",
    judge: (o) => {
      const evidence: Array<string> = []
      let frames = 0
      for (const run of sessions(o)) {
        for (const frame of run.session!.child.received) {
          frames++
          if (frame.json && frame.declared !== frame.actual) {
            evidence.push(
              `${run.name}: Content-Length: ${frame.declared} for a body of ${frame.actual} bytes (UTF-8): ${
                show(frame)
              }`
            )
          }
        }
      }
      return evidence.length > 0
        ? verdict("fail", evidence.slice(0, 5).concat(evidence.length > 5 ? [`… ${evidence.length - 5} more`] : []))
        : verdict("pass", [`${frames} frame(s): every Content-Length is the body's byte count`])
    }
  },
  {
    id: "wire.malformed-input-answered",
    rule: "docs/protocol.md § Error codes (-32700 parse error, answered with id null; -32600 invalid request), " +
      "§ Transport (plain JSON-RPC 2.0)",
    judge: (o) => {
      const skip = notReached(o.wire, "wire")
      if (skip !== undefined) return skip
      const run = o.wire!
      const problems = [
        ...answeredWith(run, run.steps.notJson, -32700, "a body that is not JSON"),
        ...answeredWith(run, run.steps.invalidRequest, -32600, "{\"jsonrpc\":\"2.0\",\"method\":1,\"params\":\"bar\"}")
      ]
      const after = answerOf(run.steps.unknownMethod)
      if (after === undefined) problems.push("after the malformed input, the next request went unanswered")
      return problems.length > 0 ? verdict("fail", problems) : verdict("pass", [
        `not JSON → ${show(answerOf(run.steps.notJson)!)}`,
        `invalid request → ${show(answerOf(run.steps.invalidRequest)!)}`,
        "and the next request was answered"
      ])
    }
  },
  {
    id: "wire.unknown-method",
    rule: "docs/protocol.md § Error codes (-32601 method not found)",
    judge: (o) => {
      const skip = notReached(o.wire, "wire")
      if (skip !== undefined) return skip
      const run = o.wire!
      const problems = answeredWith(run, run.steps.unknownMethod, -32601, "conformance/unknown-method")
      return problems.length > 0
        ? verdict("fail", problems)
        : verdict("pass", [`answered -32601: ${show(answerOf(run.steps.unknownMethod)!)}`])
    }
  },
  {
    id: "wire.notification-not-answered",
    rule: "docs/protocol.md § Transport (plain JSON-RPC 2.0: a notification is never answered), " +
      "§ command/execute (\"never answered\")",
    judge: (o) => {
      // Counted past the caps, not kept: an extension may send any number of them.
      const evidence = collector()
      for (const run of sessions(o)) {
        // A reply to the withheld request's late answer is the own-call-timeout check's business.
        const late = run.withheld?.lateAnswerAt ?? Infinity
        for (const frame of run.session!.unexpected) {
          if (frame.at < late) {
            evidence.add(`${run.name}: an answer to no request at ${run.session!.ms(frame.at)} ms: ${show(frame)}`)
          }
        }
      }
      return evidence.count() > 0 ? verdict("fail", evidence.lines()) : verdict("pass", [
        "no answer to initialized, command/execute, window/closed or an unknown notification in any run"
      ])
    }
  }
]

const all: ReadonlyArray<Check> = [...handshake, ...wire, ...behaviourChecks, ...shutdownChecks]

/** Every check's id, in scorecard order. */
export const checkIds: ReadonlyArray<string> = all.map((check) => check.id)

/** Judges every check. A check that throws is a bug of the kit: it shows as a failure with the error. */
export const judge = (o: Observations): Array<CheckResult> =>
  all.map((check) => {
    try {
      const { evidence, ...result } = check.judge(o)
      // Every check's evidence within the report's caps, whatever the check kept (conformanceVerdict.ts).
      return { id: check.id, rule: check.rule, ...result, evidence: capEvidence(evidence) }
    } catch (error) {
      return { id: check.id, rule: check.rule, status: "fail", evidence: [`the kit failed to judge: ${String(error)}`] }
    }
  })
