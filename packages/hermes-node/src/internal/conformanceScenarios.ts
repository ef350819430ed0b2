/**
 * The conformance kit's runs: each one a fresh process of the extension with a data directory of its own, driven
 * through one part of docs/protocol.md. They only observe; `conformanceChecks.ts` judges. The main run is the one
 * a host would do (and the one the HTML timeline draws); the others probe the handshake, the wire, a withheld answer,
 * each shutdown reason and each abnormal end. Independent runs go in parallel, a few at a time.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Driver from "./conformanceDriver.js"
import type { Served } from "./conformanceHost.js"
import { isAnswer } from "./conformanceHost.js"
import type { Observations, Run, Settings } from "./conformanceRun.js"
import {
  abnormalWaitMs,
  executeAll,
  framed,
  fresh,
  fullParams,
  handshake,
  initializeFull,
  literalExample,
  ping,
  reasonOf,
  settle,
  snapshot,
  stop
} from "./conformanceRun.js"

/**
 * The run a host does: handshake, a second `initialize`, every command (serving its requests; while the first request
 * waits for its answer the kit executes a command again, and it sends `window/closed` before the answer to
 * `ui/openWindow`), a ping, and `shutdown`.
 */
const main = (settings: Settings, warm: Deferred.Deferred<boolean>) =>
  fresh(settings, "main", (run, session) =>
    Effect.gen(function*() {
      const ready = yield* initializeFull(run, session).pipe(
        Effect.onExit((exit) => Deferred.succeed(warm, Exit.isSuccess(exit) && exit.value))
      )
      if (!ready) return
      run.steps.secondInitialize = yield* session.request("initialize", fullParams(session, process.pid), 5_000)
      session.mark("initialize", run.steps.secondInitialize.sentAt, "second initialize")
      let first = true
      session.setBeforeAnswer((served) => {
        if (first && run.commands !== undefined && run.commands.length > 0) {
          first = false
          const command = run.commands[0].id
          const at = session.notify("command/execute", { command })
          session.mark("command", at, `${command} (while ${served.method} waits)`)
          session.during.push({ at, notification: `command/execute ${command}`, request: served.method })
        }
        return "answer"
      })
      executeAll(run, session)
      run.settledAt = yield* settle(session, 500, 10_000)
      yield* ping(run, session, "ping")
      yield* stop(run, session, reasonOf.main!)
    }))

/**
 * The next start on the main run's data directory: the state must be read back, and replaced rather than rewritten.
 * The kit holds the old file open meanwhile: a file replaced by a rename is unlinked (its link count drops to 0), one
 * rewritten in place keeps its inode and changes; and an open inode cannot be reused by the new file.
 */
const readBack = (settings: Settings, previous: Run) =>
  fresh(settings, "read-back", (run, session) =>
    Effect.gen(function*() {
      run.stateBefore = snapshot(session.dataDir, previous.extensionName)
      const file = Path.join(run.stateBefore!.dir, "state.json")
      const held = yield* Effect.acquireRelease(
        Effect.sync(() => Fs.openSync(file, "r")),
        (fd) => Effect.sync(() => Fs.closeSync(fd))
      )
      const before = Fs.fstatSync(held)
      if (!(yield* initializeFull(run, session))) return
      yield* stop(run, session, reasonOf["read-back"]!)
      const after = Fs.fstatSync(held)
      run.replaced = {
        ino: before.ino,
        unlinked: after.nlink === 0,
        rewritten: after.nlink > 0 && (after.mtimeMs !== before.mtimeMs || after.size !== before.size)
      }
    }), previous.session!.dataDir)

const literal = (settings: Settings) =>
  fresh(settings, "literal", (run, session) =>
    Effect.gen(function*() {
      const bytes = Buffer.from(literalExample, "utf8")
      if (!(yield* handshake(run, session, session.requestRaw("initialize", 1, bytes, 10_000)))) return
      yield* stop(run, session, reasonOf.literal!)
    }))

const noParams = (settings: Settings) =>
  fresh(settings, "no-params", (run, session) =>
    Effect.gen(function*() {
      if (!(yield* handshake(run, session, session.request("initialize", undefined, 10_000)))) return
      yield* stop(run, session, reasonOf["no-params"]!)
    }))

/** `{"hostPid": "7"}` must be answered -32602 (docs/protocol.md, "Defaults"); then stdin ends. */
const typedParams = (settings: Settings) =>
  fresh(settings, "typed-params", (run, session) =>
    Effect.gen(function*() {
      run.initialize = yield* session.request("initialize", { hostPid: "7" }, 10_000)
      session.mark("stdin", session.child.endInput(), "end of stdin")
      if (Option.isNone(yield* session.child.awaitExit(2_000))) session.child.signal("SIGKILL")
    }))

/** Malformed input, an unknown notification and an unknown method, then `shutdown` with reason `error`. */
const wire = (settings: Settings) =>
  fresh(settings, "wire", (run, session) =>
    Effect.gen(function*() {
      if (!(yield* initializeFull(run, session))) return
      const nullAnswer = (step: string, body: string) =>
        Effect.gen(function*() {
          const from = session.child.received.length
          session.expectNullAnswer()
          const sentAt = session.child.write(framed(body))
          const answer = yield* session.child.next(
            (f) => isAnswer(f) && (f.message as Record<string, unknown>).id === null,
            5_000,
            from
          )
          run.steps[step] = { id: -1, method: step, sentAt, answer }
        })
      yield* nullAnswer("notJson", "{\"jsonrpc\": \"2.0\", \"id\"")
      yield* nullAnswer("invalidRequest", "{\"jsonrpc\":\"2.0\",\"method\":1,\"params\":\"bar\"}")
      session.notify("conformance/notice", { note: "an unknown notification: never answered" })
      run.steps.unknownMethod = yield* session.request("conformance/unknown-method", {}, 5_000)
      yield* stop(run, session, reasonOf.wire!)
    }))

/** The kit withholds the answer to the extension's first request past the recommended 5 s, then answers it late. */
const withhold = (settings: Settings) =>
  fresh(settings, "withhold", (run, session) =>
    Effect.gen(function*() {
      if (!(yield* initializeFull(run, session))) return
      let held: Served | undefined
      session.setBeforeAnswer((served) => {
        if (held !== undefined) return "answer"
        held = served
        return "withhold"
      })
      executeAll(run, session)
      const deadline = performance.now() + 3_000
      while (held === undefined && performance.now() < deadline && session.child.exit() === undefined) {
        yield* Effect.sleep(25)
      }
      if (held !== undefined) {
        session.mark("request", held.at, `${held.method} withheld`, held.at + 5_500)
        yield* Effect.sleep(Math.max(0, held.at + 5_500 - performance.now()))
        yield* ping(run, session, "pingWhileWithheld")
        run.withheld = { served: held, lateAnswerAt: session.answer(held) }
        yield* ping(run, session, "pingAfterLateAnswer")
      }
      yield* stop(run, session, reasonOf.withhold!)
    }))

/** An idle extension, then `trigger`; the exit is awaited for `boundMs`, then SIGTERM and SIGKILL follow. */
const abnormal = (
  settings: Settings,
  name: "sigterm" | "stdin-eof" | "host-pid",
  boundMs: number
) =>
  fresh(settings, name, (run, session) =>
    Effect.gen(function*() {
      const { child } = session
      const host = name === "host-pid"
        ? yield* Driver.spawn([process.execPath, "-e", "setInterval(() => {}, 60000)"], {
          env: process.env,
          stdio: "ignore"
        }).pipe(Effect.orDie)
        : undefined
      if (!(yield* initializeFull(run, session, host?.pid))) return
      let at: number
      if (host !== undefined) {
        host.signal("SIGKILL")
        at = Option.match(yield* host.awaitExit(2_000), { onNone: () => performance.now(), onSome: (e) => e.at })
      } else {
        at = name === "sigterm" ? child.signal("SIGTERM") : child.endInput()
      }
      const trigger = name === "sigterm" ? "SIGTERM" : name === "stdin-eof" ? "end of stdin" : "the host's pid gone"
      session.mark(name === "sigterm" ? "signal" : "stdin", at, trigger)
      let exit = Option.getOrUndefined(yield* child.awaitExit(boundMs))
      const escalated = exit === undefined
      if (escalated) {
        if (name !== "sigterm") {
          child.signal("SIGTERM")
          exit = Option.getOrUndefined(yield* child.awaitExit(1_000))
        }
        if (exit === undefined) child.signal("SIGKILL")
        exit = Option.getOrUndefined(yield* child.awaitExit(2_000))
      }
      if (exit !== undefined) session.mark("exit", exit.at, `exit ${exit.code ?? exit.signal}`)
      run.abnormal = { trigger, at, exit, escalated }
      run.state = snapshot(session.dataDir, run.extensionName)
    }))

/**
 * Runs everything: the main run first, then the rest at most three at a time beside it, the read-back run after the
 * main run. A full run of a well-behaved extension takes some 7 s, most of it the withheld answer's 5.5 s.
 */
export const runAll = (settings: Settings): Effect.Effect<Observations> =>
  Effect.gen(function*() {
    const warm = yield* Deferred.make<boolean>()
    const first = Effect.gen(function*() {
      const m = yield* main(settings, warm).pipe(Effect.onExit(() => Deferred.succeed(warm, false)))
      const back = m.state?.file !== undefined ? yield* readBack(settings, m) : undefined
      return [m, back] as const
    })
    // The handshake's own probes start once the main run's initialize is answered (a first start may build or cache
    // things), or after 3 s. When that answer was not valid, the other runs are skipped: they could not get past the
    // handshake either (their checks are not applicable), and each would wait its 10 s.
    const probe = (run: Effect.Effect<Run>) =>
      Effect.andThen(Effect.race(Deferred.await(warm), Effect.sleep(3_000)), run)
    const unless = (run: Effect.Effect<Run>) =>
      Effect.flatMap(Deferred.await(warm), (ready) => ready ? run : Effect.succeed(undefined))
    const others = Effect.all([
      probe(literal(settings)),
      probe(noParams(settings)),
      probe(typedParams(settings)),
      unless(withhold(settings)),
      unless(wire(settings)),
      unless(abnormal(settings, "sigterm", abnormalWaitMs.sigterm)),
      unless(abnormal(settings, "stdin-eof", abnormalWaitMs["stdin-eof"])),
      unless(abnormal(settings, "host-pid", abnormalWaitMs["host-pid"]))
    ], { concurrency: 3 })
    const [[m, back], [lit, none, typed, held, w, term, eof, pid]] = yield* Effect.all([first, others], {
      concurrency: 2
    })
    return {
      main: m,
      "read-back": back,
      literal: lit,
      "no-params": none,
      "typed-params": typed,
      wire: w,
      withhold: held,
      sigterm: term,
      "stdin-eof": eof,
      "host-pid": pid
    }
  })
