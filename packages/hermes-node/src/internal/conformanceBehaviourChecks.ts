/**
 * The conformance kit's checks of what an extension does once it runs: its commands, the requests it sends, a
 * notification that arrives while it waits for an answer, and a call of its own whose answer the host withholds.
 */
import type { Check } from "./conformanceVerdict.js"
import { answerOf, latency, listed, noAnswer, notReached, sessions, show, verdict } from "./conformanceVerdict.js"

/** The behaviour checks, in scorecard order. */
export const behaviourChecks: ReadonlyArray<Check> = [
  {
    id: "behaviour.commands-run",
    rule: "docs/protocol.md § command/execute (fire and forget; the extension works through editor/* and ui/*)",
    judge: (o) => {
      const skip = notReached(o.main, "main")
      if (skip !== undefined) return skip
      const run = o.main!
      const session = run.session!
      if ((run.commands ?? []).length === 0) return verdict("n/a", ["the extension announces no command"])
      const exit = session.child.exit()
      const stopAt = run.stop?.shutdown.sentAt ?? Infinity
      const ids = run.commands!.map((c) => c.id)
      const ran = `executed ${ids.length} command(s) at ${session.ms(run.commandsSentAt!)} ms: ${listed(ids)}`
      if (exit !== undefined && exit.at < stopAt) {
        return verdict("fail", [ran, `the process exited at ${session.ms(exit.at)} ms (${exit.code ?? exit.signal})`])
      }
      const served = session.served.length
      return verdict("pass", [
        ran,
        `${served} request(s) served; still running when shutdown was sent at ${session.ms(stopAt)} ms`
      ])
    }
  },
  {
    id: "behaviour.requests-well-formed",
    rule: "docs/protocol.md § Extension → host (methods and params), § Transport (ids; \"params\": null never sent)",
    judge: (o) => {
      const evidence = sessions(o).flatMap((run) => run.session!.malformed.map((line) => `${run.name}: ${line}`))
      const counts = new Map<string, number>()
      for (const run of sessions(o)) {
        for (const s of run.session!.served) counts.set(s.method, (counts.get(s.method) ?? 0) + 1)
      }
      if (evidence.length > 0) return verdict("fail", evidence.slice(0, 8))
      if (counts.size === 0) return verdict("n/a", ["the extension sent no request"])
      const total = Array.from(counts.values()).reduce((a, b) => a + b, 0)
      return verdict("pass", [
        `${total} request(s), each well-formed: ${Array.from(counts, ([m, n]) => `${m} ×${n}`).join(", ")}`
      ])
    }
  },
  {
    id: "behaviour.notification-during-request",
    rule: "docs/protocol.md § Notifications during requests, § window/closed (\"may arrive before the extension " +
      "has processed the answer to its ui/openWindow\")",
    judge: (o) => {
      const skip = notReached(o.main, "main")
      if (skip !== undefined) return skip
      const run = o.main!
      const session = run.session!
      if (session.during.length === 0) return verdict("n/a", ["the extension sent no request: nothing to overlap"])
      const evidence = session.during.map((d) =>
        `${d.notification} sent at ${session.ms(d.at)} ms while ${d.request} waited for its answer`
      )
      const ping = answerOf(run.steps.ping)
      if (ping === undefined) {
        return verdict("fail", [
          ...evidence,
          "afterwards the extension answered no request",
          ...noAnswer(run, run.steps.ping!, 5_000)
        ])
      }
      return verdict("pass", [...evidence, `afterwards it answered a request in ${latency(run.steps.ping!, ping)} ms`])
    }
  },
  {
    id: "behaviour.own-call-timeout",
    rule: "docs/protocol.md § Lifecycle (the extension's own calls: 5 s recommended), § Transport (\"a timed-out " +
      "call is abandoned silently, its late answer ignored\")",
    judge: (o) => {
      const skip = notReached(o.withhold, "withhold")
      if (skip !== undefined) return skip
      const run = o.withhold!
      const session = run.session!
      if (run.withheld === undefined) {
        return verdict("n/a", ["the extension sent no request within 3 s of its commands: no call to withhold"])
      }
      const held = run.withheld.served
      const evidence = [`withheld the answer to ${held.method} (sent at ${session.ms(held.at)} ms)`]
      const during = answerOf(run.steps.pingWhileWithheld)
      if (during === undefined) {
        return verdict("fail", [
          ...evidence,
          "5.5 s later (past the recommended 5 s) it answered nothing: it still waits for its call",
          ...noAnswer(run, run.steps.pingWhileWithheld!, 5_000)
        ])
      }
      evidence.push(`5.5 s later it answered a request in ${latency(run.steps.pingWhileWithheld!, during)} ms`)
      const replies = session.unexpected.filter((f) => f.at >= run.withheld!.lateAnswerAt)
      if (replies.length > 0) {
        return verdict("fail", [...evidence, `the late answer was answered: ${show(replies[0])}`])
      }
      const after = answerOf(run.steps.pingAfterLateAnswer)
      if (after === undefined) {
        return verdict("fail", [
          ...evidence,
          "after the late answer, nothing was answered",
          ...noAnswer(run, run.steps.pingAfterLateAnswer!, 5_000)
        ])
      }
      const later = session.served.filter((s) => s.at > held.at)
      return verdict("pass", [
        ...evidence,
        `the late answer at ${session.ms(run.withheld.lateAnswerAt)} ms was ignored; the next request answered in ` +
        `${latency(run.steps.pingAfterLateAnswer!, after)} ms`,
        later.length > 0
          ? `${later.length} more request(s) after the withheld one, the first ${
            Math.round(later[0].at - held.at)
          } ms after it`
          : "no other request after the withheld one",
        "(when the call itself gave up cannot be seen on the wire)"
      ])
    }
  }
]
