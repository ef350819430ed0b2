/**
 * Starts and watches the processes of a fixture fleet (runners, clients) for the fleet test, the soak script and the
 * demo, and reads what they left: the extensions' effects file and the client's replies.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import * as Url from "node:url"

export const root = (() => {
  // From this file, or from its bundle under node_modules/.cache (scripts/run-bundled.mjs): up to the repository.
  let dir = Path.dirname(Url.fileURLToPath(import.meta.url))
  while (!Fs.existsSync(Path.join(dir, "scripts", "run-bundled.mjs"))) {
    const up = Path.dirname(dir)
    if (up === dir) throw new Error("not inside the Lifeline repository")
    dir = up
  }
  return dir
})()
const runBundled = Path.join(root, "scripts/run-bundled.mjs")
const fixture = (name: string) => Path.join(root, "examples/fleet", name)

/** A process whose stdout is read line by line. */
export interface Watched {
  readonly child: ChildProcess.ChildProcess
  readonly lines: Array<string>
  readonly stderr: () => string
  /** The first stdout line that starts with `prefix`, within `timeoutMs`. */
  readonly line: (prefix: string, timeoutMs: number) => Effect.Effect<string, Error>
  readonly exited: Promise<void>
}

const watch = (args: ReadonlyArray<string>, env: Record<string, string>): Watched => {
  // `FLEET_NODE_ARGS` (e.g. `--cpu-prof --cpu-prof-dir=DIR`): options for Node in every runner and client.
  const nodeArgs = (process.env.FLEET_NODE_ARGS ?? "").split(" ").filter((arg) => arg !== "")
  const child = ChildProcess.spawn(process.execPath, [...nodeArgs, runBundled, ...args], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env }
  })
  // `FLEET_LOG_DIR`: every process's whole stderr also goes to `<dir>/<fixture>-<pid>.log`, and its stdout to
  // `<dir>/<fixture>-<pid>.out` (each line after the time it was read), to read after a run.
  const logDir = process.env.FLEET_LOG_DIR
  const logFile = logDir === undefined || logDir === "" || child.pid === undefined
    ? undefined
    : Path.join(logDir, `${Path.basename(args[0]!, ".ts")}-${child.pid}.log`)
  if (logFile !== undefined) Fs.mkdirSync(logDir!, { recursive: true })
  const lines: Array<string> = []
  let buffered = ""
  let stderr = ""
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    buffered += chunk
    let end: number
    while ((end = buffered.indexOf("\n")) >= 0) {
      lines.push(buffered.slice(0, end))
      if (logFile !== undefined) {
        Fs.appendFileSync(logFile.replace(/\.log$/, ".out"), `${new Date().toISOString()} ${buffered.slice(0, end)}\n`)
      }
      buffered = buffered.slice(end + 1)
    }
  })
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-20_000)
    if (logFile !== undefined) Fs.appendFileSync(logFile, chunk)
  })
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()))
  const line = (prefix: string, timeoutMs: number) =>
    Effect.gen(function*() {
      const start = Date.now()
      while (true) {
        const found = lines.find((l) => l.startsWith(prefix))
        if (found !== undefined) return found
        if (child.exitCode !== null || child.signalCode !== null) {
          return yield* Effect.fail(new Error(`${args[0]} exited before "${prefix}": ${stderr.slice(-3000)}`))
        }
        if (Date.now() - start > timeoutMs) {
          return yield* Effect.fail(
            new Error(`no "${prefix}" from ${args[0]} within ${timeoutMs} ms: ${stderr.slice(-3000)}`)
          )
        }
        yield* Effect.sleep("20 millis")
      }
    })
  return { child, lines, stderr: () => stderr, line, exited }
}

const killedWithScope = (watched: Watched) =>
  Effect.addFinalizer(() =>
    Effect.promise(async () => {
      if (watched.child.exitCode === null && watched.child.signalCode === null) {
        watched.child.kill("SIGKILL")
        await watched.exited
      }
    })
  )

/** A runner of the fixture fleet. */
export interface Runner extends Watched {
  readonly port: number
  /** Its pid once it has joined (`ready <pid>`). */
  readonly ready: (timeoutMs: number) => Effect.Effect<number, Error>
  /** How many shards it last said it holds. */
  readonly shards: () => number
}

/**
 * The sharding settings of the tests, the soak and the demo (docs/fleet.md, "Settings"): 30 shards, a 4 s lock expiry
 * refreshed every second, and one-second assignment refreshes and health checks, so that a takeover takes seconds.
 */
export const quickSharding = {
  shardsPerGroup: 30,
  shardLockExpiration: "4 seconds",
  shardLockRefreshInterval: "1 second",
  refreshAssignmentsInterval: "1 second",
  runnerHealthCheckInterval: "1 second",
  entityMessagePollInterval: "500 millis"
} as const

export interface FleetEnv {
  /** `ShardingConfig` overrides, shared by runners and clients. */
  readonly sharding: Record<string, unknown>
  /** How long each operation works in the extension. */
  readonly workMs: number
}

const envOf = (env: FleetEnv) => ({ FLEET_SHARDING: JSON.stringify(env.sharding), FLEET_WORK_MS: String(env.workMs) })

/** Starts a runner; the Scope SIGKILLs it if it still runs. */
export const startRunner = (
  url: string,
  port: number,
  effectsFile: string,
  env: FleetEnv
): Effect.Effect<Runner, never, Scope.Scope> =>
  Effect.gen(function*() {
    const watched = watch([fixture("runner.ts"), url, String(port), effectsFile], envOf(env))
    yield* killedWithScope(watched)
    return {
      ...watched,
      port,
      ready: (timeoutMs) => Effect.map(watched.line("ready ", timeoutMs), (l) => Number(l.split(" ")[1])),
      shards: () => {
        for (let i = watched.lines.length - 1; i >= 0; i--) {
          const l = watched.lines[i]!
          if (l.startsWith("shards ")) return Number(l.split(" ")[1])
        }
        return 0
      }
    }
  })

/**
 * Starts a client that sends `operations` operations over `sessions` sessions; the Scope SIGKILLs it. With
 * `sessionPrefix` its sessions are `<sessionPrefix>-s<n>` (else `<runId>-s<n>`); with `keepSessions` it does not
 * close them at the end, so that a later client with the same prefix finds their extensions running.
 */
export const startClient = (
  url: string,
  runId: string,
  operations: number,
  sessions: number,
  env: FleetEnv,
  options?: { readonly sessionPrefix?: string | undefined; readonly keepSessions?: boolean | undefined }
): Effect.Effect<Watched, never, Scope.Scope> =>
  Effect.gen(function*() {
    const watched = watch(
      [fixture("client.ts"), url, runId, String(operations), String(sessions), options?.sessionPrefix ?? runId],
      { ...envOf(env), FLEET_KEEP_SESSIONS: options?.keepSessions === true ? "1" : "0" }
    )
    yield* killedWithScope(watched)
    return watched
  })

/** One line of the effects file. */
export interface Effect_ {
  readonly event: "start" | "done"
  readonly key: string
  readonly attempt: number
  readonly runner: number
  readonly pid: number
  /** When it was written, epoch ms. */
  readonly at: number
}

export const readEffects = (file: string): ReadonlyArray<Effect_> =>
  Fs.existsSync(file)
    ? Fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((l) => {
      const [event, key, attempt, runner, pid, at] = l.split(" ")
      return {
        event: event as "start" | "done",
        key: key!,
        attempt: Number(attempt),
        runner: Number(runner),
        pid: Number(pid),
        at: Number(at)
      }
    })
    : []

/** The keys each runner started and did not finish. */
export const inFlight = (effects: ReadonlyArray<Effect_>): Map<number, Set<string>> => {
  const byRunner = new Map<number, Set<string>>()
  for (const e of effects) {
    const set = byRunner.get(e.runner) ?? new Set<string>()
    byRunner.set(e.runner, set)
    if (e.event === "start") set.add(e.key)
    else set.delete(e.key)
  }
  return byRunner
}

/**
 * What a runner had in flight when it was killed at `killedAt`, as far as can be seen from outside: the keys it
 * started whose reply had not reached the client by then. The extension's `done` is not enough: an operation the
 * extension finished is still in flight until its runner has recorded the completion in the journal.
 */
export const unanswered = (
  effects: ReadonlyArray<Effect_>,
  output: ClientOutput,
  runner: number,
  killedAt: number
): Set<string> => {
  const keys = new Set<string>()
  for (const e of effects) {
    if (e.event !== "start" || e.runner !== runner) continue
    const replied = output.replies.get(e.key)?.some((reply) => reply.at < killedAt) ?? false
    if (!replied) keys.add(e.key)
  }
  return keys
}

/** How many times each key was started. */
export const starts = (effects: ReadonlyArray<Effect_>): Map<string, number> => {
  const counts = new Map<string, number>()
  for (const e of effects) if (e.event === "start") counts.set(e.key, (counts.get(e.key) ?? 0) + 1)
  return counts
}

/** What a client printed. */
export interface ClientOutput {
  readonly replies: Map<string, Array<{ readonly at: number; readonly runner: number }>>
  readonly errors: Array<string>
  readonly journal: Map<string, { readonly status: string; readonly attempts: number }>
}

export const parseClient = (lines: ReadonlyArray<string>): ClientOutput => {
  const replies = new Map<string, Array<{ at: number; runner: number }>>()
  const errors: Array<string> = []
  const journal = new Map<string, { status: string; attempts: number }>()
  for (const l of lines) {
    const [tag, key, a, b] = l.split(" ")
    if (tag === "reply") replies.set(key!, [...(replies.get(key!) ?? []), { at: Number(a), runner: Number(b) }])
    else if (tag === "error") errors.push(l)
    else if (tag === "journal") journal.set(key!, { status: a!, attempts: Number(b) })
  }
  return { replies, errors, journal }
}

/** A free TCP port on loopback. */
export const freePort = Effect.promise(() =>
  new Promise<number>((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as Net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })
)

/** Polls every 50 ms until `condition` holds, or fails after `timeoutMs`. */
export const eventually = (condition: () => boolean, what: string, timeoutMs: number) =>
  Effect.gen(function*() {
    const start = Date.now()
    while (!condition()) {
      if (Date.now() - start > timeoutMs) {
        return yield* Effect.fail(new Error(`never happened within ${timeoutMs} ms: ${what}`))
      }
      yield* Effect.sleep("50 millis")
    }
  })
