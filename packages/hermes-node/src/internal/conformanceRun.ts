/**
 * The conformance kit's runs, their parts: what a run observed (`Run`), and the steps the scenarios are made of, each
 * a piece of docs/protocol.md: a fresh process with a data directory of its own, the handshake, Hermes' stop ladder,
 * waiting for commands to settle, a ping, a snapshot of the state directory.
 */
import * as HermesProtocol from "@lifeline/hermes/HermesProtocol"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ExitStatus, Received } from "./conformanceDriver.js"
import * as Driver from "./conformanceDriver.js"
import type { Exchange, Served, Session } from "./conformanceHost.js"
import { makeSession } from "./conformanceHost.js"

export type RunName =
  | "main"
  | "read-back"
  | "literal"
  | "no-params"
  | "typed-params"
  | "wire"
  | "withhold"
  | "sigterm"
  | "stdin-eof"
  | "host-pid"

/** The unknown reason the kit sends: docs/protocol.md, "Any other reason (defined here) is accepted". */
export const unknownReason = "conformance-unknown"

/** Which shutdown reason each run ends with: every reason of docs/protocol.md, and an unknown one. */
export const reasonOf: Partial<Record<RunName, string>> = {
  main: "reload",
  "read-back": "closing",
  literal: "disabled",
  "no-params": "closing",
  wire: "error",
  withhold: unknownReason
}

/** The protocol's example frame, byte for byte (docs/protocol.md, "Transport"). */
export const literalExample =
  "Content-Length: 58\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}"

/** What the extension's state directory held after a run. */
export interface StateSnapshot {
  readonly dir: string
  readonly entries: ReadonlyArray<string>
  readonly file: { readonly text: string; readonly json: boolean } | undefined
}

/** How a run ended: Hermes' stop ladder (docs/protocol.md, "Lifecycle"). */
export interface Stop {
  readonly reason: string
  readonly shutdown: Exchange
  readonly exit: ExitStatus | undefined
  readonly terminated: boolean
  readonly killed: boolean
}

/** An abnormal end: the trigger, when, and the exit that followed (or the escalation that was needed). */
interface Abnormal {
  readonly trigger: string
  readonly at: number
  readonly exit: ExitStatus | undefined
  readonly escalated: boolean
}

export interface Run {
  readonly name: RunName
  readonly session?: Session
  readonly spawnError?: string
  initialize?: Exchange
  /** The name announced in this run's `initialize` answer, when it was valid. */
  extensionName?: string
  commands?: ReadonlyArray<HermesProtocol.CommandInfo>
  steps: Record<string, Exchange>
  stop?: Stop
  abnormal?: Abnormal
  stateBefore?: StateSnapshot | undefined
  /** What became of the state file the read-back run started with (held open by the kit meanwhile). */
  replaced?: { readonly ino: number; readonly unlinked: boolean; readonly rewritten: boolean }
  state?: StateSnapshot | undefined
  commandsSentAt?: number
  settledAt?: number
  withheld?: { readonly served: Served; readonly lateAnswerAt: number }
}

export interface Settings {
  readonly argv: ReadonlyArray<string>
  /** The directory under which every run gets its data directory. */
  readonly tmp: string
}

/** Why an `initialize` answer is not a valid result (docs/protocol.md, "initialize"), or undefined. */
export const initializeProblem = (frame: Received): string | undefined => {
  const m = frame.message as Record<string, unknown>
  if (!("result" in m)) return `an error answer: ${JSON.stringify(m.error)}`
  const decoded = Schema.decodeUnknownResult(HermesProtocol.InitializeResult)(m.result)
  if (Result.isFailure(decoded)) return `the result does not match InitializeResult: ${decoded.failure.message}`
  if (!HermesProtocol.isExtensionName(decoded.success.name)) {
    return `the name ${
      JSON.stringify(decoded.success.name)
    } is not 1 to 128 letters, digits, ".", "_", "-" (not dots only)`
  }
  return undefined
}

const resultOf = (exchange: Exchange | undefined): Record<string, any> | undefined =>
  exchange === undefined ? undefined : Option.match(exchange.answer, {
    onNone: () => undefined,
    onSome: (frame) => (frame.message as Record<string, any>).result
  })

/** The state directory, `<dataDir>/extensions/<name>/` (docs/protocol.md, "A state file that could not be read"). */
export const snapshot = (dataDir: string, name: string | undefined): StateSnapshot | undefined => {
  if (name === undefined) return undefined
  const dir = Path.join(dataDir, "extensions", name)
  let entries: Array<string> = []
  try {
    entries = Fs.readdirSync(dir).sort()
  } catch {
    return { dir, entries, file: undefined }
  }
  try {
    const file = Path.join(dir, "state.json")
    const text = Fs.readFileSync(file, "utf8").slice(0, 64 * 1024)
    let json = true
    try {
      JSON.parse(text)
    } catch {
      json = false
    }
    return { dir, entries, file: { text, json } }
  } catch {
    return { dir, entries, file: undefined }
  }
}

const environment = (dataDir: string): NodeJS.ProcessEnv => ({ ...process.env, HERMES_DATA_DIR: dataDir })

/** Spawns a fresh process for `name` and runs `body` on it; the Scope kills what is left of it. */
export const fresh = (
  settings: Settings,
  name: RunName,
  body: (run: Run, session: Session) => Effect.Effect<void, never, Scope.Scope>,
  dataDir = Path.join(settings.tmp, name)
): Effect.Effect<Run> =>
  Effect.gen(function*() {
    Fs.mkdirSync(dataDir, { recursive: true })
    const spawned = yield* Effect.result(Driver.spawn(settings.argv, { env: environment(dataDir) }))
    if (Result.isFailure(spawned)) return { name, spawnError: spawned.failure.message, steps: {} }
    const session = makeSession(name, spawned.success, dataDir)
    session.mark("spawn", spawned.success.spawnedAt, `spawn pid ${spawned.success.pid}`)
    const run: Run = { name, session, steps: {} }
    yield* body(run, session)
    return run
  }).pipe(Effect.scoped)

export const fullParams = (session: Session, hostPid: number) => ({
  hermesVersion: "conformance-kit",
  protocolVersion: HermesProtocol.PROTOCOL_VERSION,
  dataDir: session.dataDir,
  hostPid
})

/** `initialize` (10 s to answer), then `initialized` when the answer is a valid result. Answers whether it was. */
export const handshake = (run: Run, session: Session, exchange: Effect.Effect<Exchange>) =>
  Effect.gen(function*() {
    const init = yield* exchange
    run.initialize = init
    const answered = Option.getOrUndefined(init.answer)
    session.mark("initialize", init.sentAt, "initialize", answered?.at ?? performance.now())
    if (answered === undefined || initializeProblem(answered) !== undefined) return false
    const result = resultOf(init)!
    run.extensionName = result.name
    run.commands = result.commands
    session.mark("notification", session.notify("initialized"), "initialized")
    return true
  })

export const initializeFull = (run: Run, session: Session, hostPid = process.pid) =>
  handshake(run, session, session.request("initialize", fullParams(session, hostPid), 10_000))

/**
 * Hermes' stop: `shutdown` (5 s to answer; no answer: SIGKILL at once), then the end of stdin, then the exit within
 * 2 s (1 s after an error answer), then SIGTERM and SIGKILL 1 s later (docs/protocol.md, "Lifecycle").
 */
export const stop = (run: Run, session: Session, reason: string) =>
  Effect.gen(function*() {
    const { child } = session
    const shutdown = yield* session.request("shutdown", { reason }, 5_000)
    const answer = Option.getOrUndefined(shutdown.answer)
    session.mark("shutdown", shutdown.sentAt, `shutdown ${reason}`, answer?.at ?? performance.now())
    let terminated = false
    let killed = false
    if (answer === undefined) {
      if (child.exit() === undefined) {
        killed = true
        session.mark("signal", child.signal("SIGKILL"), "SIGKILL: no answer")
      }
    } else {
      session.mark("stdin", child.endInput(), "end of stdin")
      const success = (answer.message as Record<string, any>).result?.success === true
      if (Option.isNone(yield* child.awaitExit(success ? 2_000 : 1_000))) {
        terminated = true
        session.mark("signal", child.signal("SIGTERM"), "SIGTERM")
        if (Option.isNone(yield* child.awaitExit(1_000))) {
          killed = true
          session.mark("signal", child.signal("SIGKILL"), "SIGKILL")
        }
      }
    }
    const exit = Option.getOrUndefined(yield* child.awaitExit(2_000))
    if (exit !== undefined) session.mark("exit", exit.at, `exit ${exit.code ?? exit.signal}`)
    run.stop = { reason, shutdown, exit, terminated, killed }
    run.state = snapshot(session.dataDir, run.extensionName)
  })

/** Waits until nothing has moved for `quietMs` (commands are fire and forget), at most `maxMs`, or the exit. */
export const settle = (session: Session, quietMs: number, maxMs: number) =>
  Effect.gen(function*() {
    const start = performance.now()
    while (session.child.exit() === undefined && performance.now() - start < maxMs) {
      if (performance.now() - session.lastActivity() >= quietMs) break
      yield* Effect.sleep(25)
    }
    return performance.now()
  })

export const executeAll = (run: Run, session: Session) => {
  for (const command of run.commands ?? []) {
    session.mark("command", session.notify("command/execute", { command: command.id }), command.id)
  }
  run.commandsSentAt = performance.now()
}

/** A request the extension must answer -32601 (docs/protocol.md, "Error codes"): proof that it still serves. */
export const ping = (run: Run, session: Session, step: string) =>
  Effect.gen(function*() {
    const exchange = yield* session.request("conformance/ping", undefined, 5_000)
    const answer = Option.getOrUndefined(exchange.answer)
    session.mark("ping", exchange.sentAt, "ping (unknown method)", answer?.at ?? performance.now())
    run.steps[step] = exchange
  })

/** Every run's observations. */
export type Observations = Readonly<Record<RunName, Run | undefined>>

/** Bounds the abnormal runs wait before escalating (the checks judge against their own bounds, lower or equal). */
export const abnormalWaitMs = { sigterm: 1_000, "stdin-eof": 1_000, "host-pid": 2_500 } as const

/** `body` framed as it is, with its exact byte length. */
export const framed = (body: string) => {
  const bytes = Buffer.from(body, "utf8")
  return Buffer.concat([Buffer.from(`Content-Length: ${bytes.length}\r\n\r\n`, "ascii"), bytes])
}
