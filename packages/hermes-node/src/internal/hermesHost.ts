/**
 * The headless Hermes host, and the demo: it spawns an extension as a real child process, initializes it, lists its
 * commands, executes them, serves its editor calls from an HL7 message, shows (fetches) the windows it opens, waits
 * until it has settled (or `--max-duration` has passed), shuts it down, and prints what happened with timings. It
 * works with any extension that speaks the Hermes protocol, in any language.
 *
 *   npx hermes-host --extension "python3 my_extension.py"      # the `hermes-host` bin of @lifeline/hermes-node
 *   pnpm demo                                                  # in the repository: the HL7 example extension
 *
 * It records the pid of every extension it spawns in a journal in the data directory, so that when a host is killed
 * (SIGKILL, OOM) the next start kills the extensions it left behind before it spawns its own. SIGTERM, SIGINT and
 * SIGHUP shut the extension down as the end of a run does, and the report is still printed.
 *
 * Everything the extension chose (its name, version, command titles, window titles and URLs, its stderr, error
 * messages, the message text) is printed through `visible`: a control character is shown, never sent to the terminal
 * (the timeline's printers are in `hermesHostTimeline.ts`).
 */
// Deep imports keep start-up short: the barrels would load every module of every package.
import * as ExtensionHost from "@lifeline/hermes/ExtensionHost"
import type * as HermesProtocol from "@lifeline/hermes/HermesProtocol"
import * as MessageStore from "@lifeline/hermes/MessageStore"
import * as Spawner from "@lifeline/hermes/Spawner"
import * as WindowPresenter from "@lifeline/hermes/WindowPresenter"
import * as GracefulShutdown from "@lifeline/kernel/GracefulShutdown"
import * as NodeSignals from "@lifeline/node/NodeSignals"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Stream from "effect/Stream"
import * as Path from "node:path"
import * as NodeSpawner from "../NodeSpawner.js"
import { visibleJson } from "../TerminalText.js"
import * as Conformance from "./conformance.js"
import { openRecording, owner } from "./hermesHostJournal.js"
import type { Defaults, Settings } from "./hermesHostSettings.js"
import { parse } from "./hermesHostSettings.js"
import { describeExit, isDetail, quote, segments, timeline } from "./hermesHostTimeline.js"

/**
 * Why `name` may not name an extension, or undefined: docs/protocol.md, "initialize": letters, digits, ".", "_", "-"
 * (it names the extension's data directory, `<dataDir>/extensions/<name>`, so dots only are refused too: `.` and `..`
 * name a directory that is not the extension's). `ExtensionHost` refuses such an answer to `initialize` itself
 * (`initialize-error`); this is the command line's own check, should a host library let one through.
 */
const nameProblem = (name: string): string | undefined =>
  /^[A-Za-z0-9._-]{1,128}$/.test(name) && !/^\.+$/.test(name)
    ? undefined
    : `the extension's name ${JSON.stringify(name)} breaks the protocol's rule (1 to 128 letters, digits, ".", "_" ` +
      `or "-", not dots only): it names a directory`

/**
 * Events that the timeline prints, and the report keeps, one by one only up to this many (requests served, windows,
 * commands sent): an extension that floods the host gets them counted, not printed. Its lifecycle (spawn, ready,
 * shutdown, exit) is always printed.
 */
const detailLimit = 1000
type Outcome =
  | "ok"
  | "spawn-failed"
  | "initialize-timeout"
  | "initialize-error"
  | "exited-before-initialize"
  | "invalid-name"
  | "crashed"
  | "shutdown-timeout-killed"
  | "shutdown-error"
  | "did-not-settle"

/** Why the host stopped waiting and shut the extension down. */
type Ending = "settled" | "max-duration" | "signal" | "exited" | "invalid-name" | "not-ready"

const program = (settings: Settings) =>
  Effect.gen(function*() {
    const {
      before,
      commandLine,
      dataDir,
      drainTimeout,
      journalFile,
      maxDuration,
      messageFile,
      policy,
      reason,
      settle
    } = settings
    const { line, more, print, printEdit } = timeline(settings.json)
    const startedAt = yield* Clock.currentTimeMillis
    const since = (at: number) => at - startedAt
    const store = yield* MessageStore.MessageStore
    const signals = yield* Effect.serviceOption(NodeSignals.NodeSignals)
    let shown = before

    print(`Hermes headless host: ${commandLine.join(" ")}`)
    print(
      `message ${messageFile === undefined ? "(the built-in sample)" : Path.relative(process.cwd(), messageFile)} (${
        segments(before).length
      } segments), shutdown policy ` +
        `${policy}, data dir ${dataDir}`
    )
    print("")

    const recording = yield* openRecording(settings, since)
    if (recording.warning !== undefined) line(0, "journal", `✘ not recording: ${recording.warning}`)
    for (const orphan of recording.reaped) {
      const detail = orphan.detail === null ? "" : ` (${orphan.detail})`
      line(orphan.at, "reap", `pid ${orphan.pid} left by a crashed host: ${orphan.outcome}${detail}`)
      more(`  ${quote(orphan.command.join(" "))}`)
    }

    // What the report needs, kept as the events go by: the lifecycle in full, the details up to `detailLimit`.
    let seen = 0
    const kept: Array<ExtensionHost.Event> = []
    const served: Array<{ readonly method: string; readonly ok: boolean; readonly atMs: number }> = []
    let detailsSeen = 0
    let requestsSeen = 0
    let requestsFailed = 0
    let ready: Extract<ExtensionHost.Event, { _tag: "Ready" }> | undefined
    let spawnFailed = false
    let initializeFailed: ExtensionHost.InitializeFailure | undefined
    let crashed = false
    let exited: ExtensionHost.Event & { _tag: "Exited" } | undefined
    let finished: ExtensionHost.ShutdownSummary | undefined
    /** Why the run went wrong, in the extension's or the host's words: the first failure seen. */
    let problem: string | undefined

    // Lines of this fiber (refusals, why the run ended) wait for the events before them, which reach the printer a
    // little later.
    const notes: Array<{ readonly at: number; readonly what: string; readonly text: string }> = []
    const printNotes = (until: number) => {
      while (notes.length > 0 && notes[0].at <= until) {
        const { at, text, what } = notes.shift()!
        line(at, what, text)
      }
    }
    const note = (what: string, text: string) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        notes.push({ at: since(now), what, text })
      })

    const record = (event: ExtensionHost.Event): Effect.Effect<void> =>
      Effect.gen(function*() {
        seen++
        const at = since(event.at)
        printNotes(at)
        if (event._tag === "RequestServed") {
          requestsSeen++
          if (!event.ok) requestsFailed++
        }
        if (isDetail(event)) {
          detailsSeen++
          if (detailsSeen > detailLimit) {
            if (detailsSeen === detailLimit + 1) {
              line(at, "…", `more than ${detailLimit} requests, commands and windows: counted, not shown`)
            }
            return
          }
          if (event._tag === "RequestServed") served.push({ method: event.method, ok: event.ok, atMs: at })
        }
        if (event._tag !== "StatusChanged") kept.push(event)
        switch (event._tag) {
          case "Spawned":
            return line(at, "spawn", `pid ${event.pid} (start ${event.generation})`)
          case "SpawnFailed":
            spawnFailed = true
            problem ??= event.detail
            return line(at, "spawn", `✘ ${quote(event.detail, 200)}`)
          case "Initializing":
            return line(at, "initialize", `→ initialize (10 s to answer)`)
          case "Ready": {
            ready = event
            line(
              at,
              "ready",
              `← ${quote(event.name)} ${quote(event.version)}, ${event.commands.length} command(s); → initialized`
            )
            for (const command of event.commands.slice(0, 100)) {
              more(`  ${quote(command.id, 40).padEnd(16)} ${quote(command.title, 78)}`)
            }
            if (event.commands.length > 100) more(`  … and ${event.commands.length - 100} more`)
            return
          }
          case "InitializeFailed":
            initializeFailed = event.reason
            problem ??= event.detail
            return line(at, "initialize", `✘ ${event.reason}: ${quote(event.detail, 200)}`)
          case "CommandSent":
            return line(at, "execute", `→ command/execute ${quote(event.command)}`)
          case "RequestServed": {
            line(at, "serve", `← ${quote(event.method, 40)} ${event.ok ? "✔" : `✘ ${quote(event.detail ?? "", 160)}`}`)
            if (event.ok && (event.method === "editor/patchMessage" || event.method === "editor/setMessage")) {
              const now = yield* store.current
              printEdit(shown, now)
              shown = now
            }
            return
          }
          case "WindowOpened":
            return line(
              at,
              "window",
              `${quote(event.windowId, 40)} "${quote(event.title ?? "", 60)}" ${quote(event.url)}`
            )
          case "WindowShown": {
            const p = event.presentation
            const how = p.status !== undefined
              ? `fetched once: HTTP ${p.status}, ${p.bytes} bytes`
              : p.error !== undefined
              ? `fetch failed: ${quote(p.error, 160)}`
              : `not fetched (${quote(p.skipped ?? "", 160)})`
            return line(at, "window", `${quote(event.windowId, 40)} ${how}`)
          }
          case "WindowClosed":
            return line(at, "window", `${quote(event.windowId, 40)} closed → window/closed`)
          case "ShutdownStarted":
            return line(at, "shutdown", `→ shutdown { reason: "${event.reason}" } (5 s to answer)`)
          case "ShutdownFinished": {
            const s = event.summary
            finished = s
            const answer = s.responded
              ? (s.success ? "← { success: true }" : `← error ${quote(s.error ?? "", 200)}`)
              : `✘ ${quote(s.error ?? "", 200)}`
            const ending = s.killed ? ", SIGKILL" : s.terminated ? ", SIGTERM" : ""
            return line(at, "shutdown", `${answer} (${s.elapsedMillis} ms${ending})`)
          }
          case "Exited":
            exited = event
            if (!event.expected) crashed = true
            line(at, event.expected ? "exit" : "crash", describeExit(event.status))
            if (!event.expected) { for (const tail of event.stderrTail.slice(-5)) more(`stderr: ${quote(tail)}`) }
            return
          case "Restarting":
            return line(at, "restart", `${event.restart} of ${event.maxRestarts}`)
          case "Failed":
            problem ??= event.reason
            return line(at, "failed", quote(event.reason, 200))
          case "StatusChanged":
            return
        }
      })

    const extension = yield* ExtensionHost.start(
      {
        command: commandLine[0],
        args: commandLine.slice(1),
        env: {
          LIFELINE_SHUTDOWN_POLICY: policy,
          // Effect's own spelling, which every version of the SDK reads, whatever the user typed.
          LIFELINE_DRAIN_TIMEOUT: `${Duration.toMillis(drainTimeout)} millis`
        }
      },
      {
        dataDir,
        hermesVersion: "0.1.0-headless",
        hostPid: process.pid,
        // A crash ends the run: the report says so instead of restarting.
        restart: { maxRestarts: 0, within: "1 minute" }
      }
    ).pipe(
      Effect.provideService(Spawner.Spawner, NodeSpawner.make({ journal: recording.journal, owner }))
    )
    const printer = yield* extension.events.pipe(Stream.runForEach(record), Effect.forkChild)

    let ending: Ending = "not-ready"
    let stoppedBy: NodeSignals.Signal | undefined
    let shutdownReason: HermesProtocol.ShutdownReason = reason
    const refused: Array<{ readonly command: string; readonly reason: string; readonly detail: string }> = []
    if ((yield* extension.status) === "Ready") {
      const info = Option.getOrThrow(yield* extension.info)
      const badName = nameProblem(info.name)
      if (badName !== undefined) {
        ending = "invalid-name"
        shutdownReason = "error"
        problem ??= badName
        yield* note("ready", `✘ refused: ${badName}`)
      } else {
        const work = Effect.gen(function*() {
          for (const id of settings.run ?? info.commands.map((c) => c.id)) {
            yield* extension.execute(id).pipe(
              Effect.catch((error) =>
                Effect.andThen(
                  Effect.sync(() =>
                    refused.push({ command: error.command, reason: error.reason, detail: error.detail })
                  ),
                  note("execute", `✘ ${error.message}`)
                )
              )
            )
          }
          yield* extension.awaitQuiet(settle)
          return "settled" as const
        })
        const deadline = Effect.flatMap(
          Clock.currentTimeMillis,
          (now) => Effect.sleep(Duration.millis(Math.max(0, Duration.toMillis(maxDuration) - since(now))))
        )
        const stopRequested = Option.match(signals, {
          onNone: () => Effect.never,
          onSome: (service) => service.stopRequested
        })
        ending = yield* Effect.raceAll([
          work,
          Effect.as(deadline, "max-duration" as const),
          Effect.map(stopRequested, (signal) => {
            stoppedBy = signal
            return "signal" as const
          })
        ])
        if (ending === "signal") shutdownReason = "closing"
        if ((yield* extension.status) !== "Ready") {
          // It stopped by itself (a crash) while the host waited: nothing settled.
          if (ending === "settled") ending = "exited"
        } else {
          yield* ending === "settled"
            ? note("settled", `no request for ${Duration.format(settle)}`)
            : ending === "max-duration"
            ? note("max", `--max-duration ${Duration.format(maxDuration)} reached and the extension is still busy`)
            : note("signal", `${stoppedBy}: shutting the extension down`)
        }
      }
      const summary = yield* extension.shutdown(shutdownReason)
      if (Option.isSome(summary)) finished ??= summary.value
    }
    // A signal that came while the host was not waiting (during initialize, or the shutdown) is reported too.
    if (stoppedBy === undefined && Option.isSome(signals)) stoppedBy = (yield* signals.value.received)[0]
    // The events stream runs until the host's scope closes: stop the printer and print what it has not reached yet.
    // The history holds the latest events only: event number `droppedEvents + 1` is its first.
    yield* Fiber.interrupt(printer)
    const dropped = yield* extension.droppedEvents
    for (const event of (yield* extension.history).slice(Math.max(0, seen - dropped))) yield* record(event)
    printNotes(Infinity)

    const after = yield* store.current
    const outcome: Outcome = spawnFailed
      ? "spawn-failed"
      : initializeFailed !== undefined
      ? (initializeFailed === "timeout"
        ? "initialize-timeout"
        : initializeFailed === "error"
        ? "initialize-error"
        : "exited-before-initialize")
      : ending === "invalid-name"
      ? "invalid-name"
      : crashed
      ? "crashed"
      : finished !== undefined && finished.killed && !finished.responded
      ? "shutdown-timeout-killed"
      : finished !== undefined && !(finished.responded && finished.success)
      ? "shutdown-error"
      : ending === "max-duration"
      ? "did-not-settle"
      : "ok"
    const finishedAt = since(yield* Clock.currentTimeMillis)
    const omitted = Math.max(0, detailsSeen - detailLimit)

    if (settings.json) {
      const report = {
        outcome,
        ended: ending,
        stoppedBy: stoppedBy ?? null,
        detail: problem ?? finished?.error ?? null,
        extension: ready === undefined ? null : { name: ready.name, version: ready.version, commands: ready.commands },
        events: kept.map((e) => ({ type: e._tag, atMs: since(e.at) })),
        requestsServed: served,
        requests: { served: requestsSeen, failed: requestsFailed },
        // Requests, commands and windows past the first `detailLimit`: counted above, not listed.
        omittedEvents: omitted,
        message: { before, after },
        shutdown: finished === undefined ? null : {
          reason: finished.reason,
          policy,
          responded: finished.responded,
          success: finished.success,
          error: finished.error ?? null,
          killed: finished.killed,
          elapsedMs: finished.elapsedMillis
        },
        // The report's own shape, `{ code, signal }` (docs/hosting.md), whatever the kernel calls the fields.
        exit: exited === undefined ? null : { code: exited.status.exitCode, signal: exited.status.signal },
        refused,
        journal: { file: journalFile, recording: recording.journal !== undefined, warning: recording.warning ?? null },
        reaped: recording.reaped.map(({ at, ...orphan }) => ({ ...orphan, atMs: at })),
        settings: {
          settleMs: Duration.toMillis(settle),
          maxDurationMs: Duration.toMillis(maxDuration),
          drainTimeoutMs: Duration.toMillis(drainTimeout)
        },
        elapsedMs: finishedAt
      }
      process.stdout.write(visibleJson(report, 2) + "\n") // stdout-ok: a command-line tool's own output
    } else {
      print("")
      if (omitted > 0) {
        print(`${requestsSeen} request(s) served, ${requestsFailed} refused; ${omitted} event(s) not shown`)
      }
      print(
        `${outcome === "ok" ? "✔" : "✘"} ${outcome} in ${finishedAt} ms` +
          (before === after ? ", message unchanged" : "; the message now reads:")
      )
      if (before !== after) { for (const segment of segments(after)) more(quote(segment, 110)) }
      if (refused.length > 0) {
        print(`✘ refused: ${refused.map((r) => `${quote(r.command, 40)} (${r.reason})`).join(", ")}`)
      }
    }
    return { outcome, refused: refused.map((r) => r.command) }
  }).pipe(Effect.scoped)

/**
 * Runs hermes-host with the command line's arguments (`process.argv.slice(2)`), `--conformance` the conformance kit,
 * and exits the process with the run's exit code (docs/hosting.md, "Exit codes"). `defaults` fills in what the
 * command line leaves out: the published bin has none, the repository's demo names its HL7 example.
 */
export const main = async (argv: ReadonlyArray<string>, defaults: Defaults): Promise<void> => {
  // The conformance kit exits by itself.
  if (argv.includes("--conformance")) await Conformance.main(argv, { extension: defaults.extension })
  const settings = parse(argv, defaults)
  /** Completed when the program has ended, its report printed: what a signal's graceful stop waits for. */
  const reported = Deferred.makeUnsafe<void>()

  const HostLive = Layer.mergeAll(
    MessageStore.layer(settings.before),
    WindowPresenter.layerHeadless.pipe(Layer.provide(FetchHttpClient.layer))
  )

  NodeSignals.runMain(
    Effect.gen(function*() {
      // A signal interrupts the main fiber only once every registered entry has stopped (NodeSignals.runMain): this one
      // waits for the report, so that SIGTERM, SIGINT and SIGHUP still print it (the run reacts to `stopRequested`). It
      // is registered out here, around the outcome: registered inside the program, it would go with the program's
      // Scope, and the interruption that followed would replace a failed outcome (exit code 1) by the signal's code. A
      // second signal forces the stop: the extension host registered itself too, and its forced stop runs the ladder
      // straight to SIGKILL, so nothing here has to kill anything.
      yield* GracefulShutdown.register({
        name: "hermes-host's report",
        stop: Deferred.await(reported),
        stopNow: Effect.void
      })
      const { outcome, refused } = yield* program(settings).pipe(Effect.provide(HostLive))
      // The outcome is the extension's life; a refused command also makes the run fail (exit code 1).
      if (outcome !== "ok") return yield* Effect.fail(outcome)
      if (refused.length > 0) return yield* Effect.fail(`refused: ${refused.join(", ")}`)
    }).pipe(
      Effect.ensuring(Deferred.succeed(reported, void 0)),
      Effect.scoped,
      Effect.provideService(References.MinimumLogLevel, settings.verbose ? "Debug" : "Warn")
    )
  )
}
