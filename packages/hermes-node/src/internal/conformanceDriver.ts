/**
 * The conformance kit's hold on one extension process, over raw bytes: the kit must see exactly what the extension
 * writes, so it speaks Content-Length frames itself instead of going through a JSON-RPC peer. Everything is bounded:
 * stdout is counted and stored up to a cap (and still drained past it), stderr is always drained and only its tail
 * kept, every wait has a timeout, and the process runs in a process group of its own that is SIGKILLed when the
 * Scope closes (and, as a last resort, when the kit exits). Each process is recorded in the kit's journal while it
 * runs (`useRecorder`, conformanceJournal.ts): what a kit killed with SIGKILL leaves, the next kit run kills.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as ChildProcess from "node:child_process"
import type { FrameRead } from "./conformanceFraming.js"
import { makeReader } from "./conformanceFraming.js"

/** A frame from the extension, numbered in order of arrival, with the time it was complete. */
export interface Received extends FrameRead {
  readonly seq: number
  readonly at: number
}

/** Bytes on stdout outside any frame. */
export interface Junk {
  readonly at: number
  readonly bytes: number
  /** The first bytes, as latin1 text (shown through `visible`). */
  readonly sample: string
}

export interface ExitStatus {
  readonly code: number | null
  readonly signal: string | null
  readonly at: number
}

/** Stdout stored and decoded per process; past it the bytes are read and counted, not kept. */
export const maxStdoutBytes = 16 * 1024 * 1024
const maxStderrTail = 16 * 1024
/** How long stdout must be quiet before a frame that promised more bytes than came is settled. */
const quietMs = 250

export interface Child {
  readonly pid: number
  /** `performance.now()` at the spawn: every `at` of this process is on the same clock. */
  readonly spawnedAt: number
  readonly received: ReadonlyArray<Received>
  readonly junk: ReadonlyArray<Junk>
  readonly stdoutBytes: () => number
  readonly stderrTail: () => string
  /** Called with each frame as it arrives, before any waiter sees it. */
  readonly onFrame: (listener: (frame: Received) => void) => void
  /** Writes one frame holding `message`; answers the time. */
  readonly send: (message: unknown) => number
  /** Writes `bytes` as they are. */
  readonly write: (bytes: string | Uint8Array) => number
  readonly endInput: () => number
  /** Sends `signal` to the process group. */
  readonly signal: (signal: NodeJS.Signals) => number
  readonly exit: () => ExitStatus | undefined
  /** The first frame from number `from` on that `match` accepts; none if stdout ends first or after `timeoutMs`. */
  readonly next: (
    match: (frame: Received) => boolean,
    timeoutMs: number,
    from?: number
  ) => Effect.Effect<Option.Option<Received>>
  readonly awaitExit: (timeoutMs: number) => Effect.Effect<Option.Option<ExitStatus>>
}

export class SpawnFailed extends Error {}

/** One frame holding `message`, its length counted in bytes. */
export const frame = (message: unknown): Buffer => {
  const body = Buffer.from(JSON.stringify(message), "utf8")
  return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, "ascii"), body])
}

/**
 * Where the kit records the processes it starts (conformanceJournal.ts): `record` right after the spawn (a key, or
 * undefined when it could not), `ended` once the process is gone (`groupGone`: nothing is left of its group either).
 */
export interface Recorder {
  readonly record: (pid: number, command: ReadonlyArray<string>) => Effect.Effect<string | undefined>
  readonly ended: (
    key: string,
    exit: { readonly exitCode: number | null; readonly signal: string | null } | undefined,
    groupGone: boolean
  ) => Effect.Effect<void>
}

let recorder: Recorder | undefined

/** Records every process spawned from now on with `next` (none: not recorded). */
export const useRecorder = (next: Recorder | undefined): void => {
  recorder = next
}

// Every process group the kit started and has not seen empty: SIGKILLed when the kit exits, however it exits.
const groups = new Set<number>()
let exitHookInstalled = false
const killGroup = (pgid: number, signal: NodeJS.Signals | 0): boolean => {
  try {
    process.kill(-pgid, signal)
    return true
  } catch {
    return false
  }
}

/** SIGKILLs every process group the kit started that may still have members. */
export const killAll = (): void => {
  for (const pgid of groups) killGroup(pgid, "SIGKILL")
}

/** Starts `argv` in a process group of its own; the Scope SIGKILLs the group (its grandchildren too). */
export const spawn = (
  argv: ReadonlyArray<string>,
  options: { readonly env: NodeJS.ProcessEnv; readonly stdio?: "pipe" | "ignore" }
): Effect.Effect<Child, SpawnFailed, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<Child, SpawnFailed>((resume) => {
      if (!exitHookInstalled) {
        exitHookInstalled = true
        process.once("exit", killAll)
      }
      const child = ChildProcess.spawn(argv[0], argv.slice(1), {
        detached: true,
        stdio: options.stdio === "ignore" ? "ignore" : ["pipe", "pipe", "pipe"],
        env: options.env
      })
      child.once("error", (error) => resume(Effect.fail(new SpawnFailed(error.message))))
      child.once("spawn", () => {
        groups.add(child.pid!)
        resume(Effect.succeed(attach(child)))
      })
    }).pipe(
      // Recorded before anything talks to it: a kit killed with SIGKILL from here on leaves it to the next kit run.
      Effect.flatMap((child) =>
        Effect.map(recorder?.record(child.pid, argv) ?? Effect.succeed(undefined), (key) => ({ child, key, recorder }))
      )
    ),
    ({ child, key, recorder }) =>
      Effect.gen(function*() {
        if (child.exit() === undefined) child.signal("SIGKILL")
        yield* child.awaitExit(2000)
        // The leader is gone; whatever else is left of its group goes too.
        killGroup(child.pid, "SIGKILL")
        const groupGone = !killGroup(child.pid, 0)
        if (groupGone) groups.delete(child.pid)
        const exit = child.exit()
        if (key !== undefined && recorder !== undefined) {
          yield* recorder.ended(key, exit && { exitCode: exit.code, signal: exit.signal }, groupGone)
        }
      })
  ).pipe(Effect.map(({ child }) => child))

const attach = (child: ChildProcess.ChildProcess): Child => {
  const spawnedAt = performance.now()
  const pid = child.pid!
  const received: Array<Received> = []
  const junk: Array<Junk> = []
  const listeners: Array<(frame: Received) => void> = []
  const waiters = new Set<() => void>()
  const wake = () => {
    for (const waiter of Array.from(waiters)) waiter()
  }
  const reader = makeReader()
  let stdoutBytes = 0
  let stdoutEnded = child.stdout === null
  let stderr = ""
  let exit: ExitStatus | undefined
  let quiet: ReturnType<typeof setTimeout> | undefined

  const take = (decoded: ReturnType<typeof reader.push>) => {
    const at = performance.now()
    for (const text of decoded.junk) junk.push({ at, bytes: text.length, sample: text.slice(0, 160) })
    for (const read of decoded.frames) {
      const frame: Received = { ...read, seq: received.length, at }
      received.push(frame)
      for (const listener of listeners) listener(frame)
    }
    if (decoded.frames.length > 0) wake()
  }
  child.stdout?.on("data", (chunk: Buffer) => {
    stdoutBytes += chunk.length
    // Past the cap the bytes are drained and counted, never stored: the extension must not block on its stdout.
    if (stdoutBytes > maxStdoutBytes) return
    take(reader.push(chunk))
    if (quiet !== undefined) clearTimeout(quiet)
    quiet = reader.pending() > 0 ? setTimeout(() => take(reader.flush()), quietMs) : undefined
  })
  child.stdout?.once("close", () => {
    if (quiet !== undefined) clearTimeout(quiet)
    take(reader.flush())
    stdoutEnded = true
    wake()
  })
  // Drained always: a child whose stderr nobody reads blocks once the pipe holds 64 KiB.
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString("utf8")).slice(-maxStderrTail)
  })
  // A write after the child is gone fails with EPIPE: the exit says so, not a crash of the kit.
  child.stdin?.on("error", () => {})
  child.once("exit", (code, signal) => {
    exit = { code, signal, at: performance.now() }
    wake()
  })

  const wait = <A>(found: () => Option.Option<A> | undefined, timeoutMs: number) =>
    Effect.callback<Option.Option<A>>((resume) => {
      const check = () => {
        const result = found()
        if (result !== undefined) {
          waiters.delete(check)
          resume(Effect.succeed(result))
        }
      }
      waiters.add(check)
      check()
      return Effect.sync(() => waiters.delete(check))
    }).pipe(Effect.timeoutOption(timeoutMs), Effect.map(Option.flatten))

  const now = () => performance.now()
  return {
    pid,
    spawnedAt,
    received,
    junk,
    stdoutBytes: () => stdoutBytes,
    stderrTail: () => stderr,
    onFrame: (listener) => listeners.push(listener),
    send: (message) => {
      child.stdin?.write(frame(message))
      return now()
    },
    write: (bytes) => {
      child.stdin?.write(bytes)
      return now()
    },
    endInput: () => {
      child.stdin?.end()
      return now()
    },
    signal: (signal) => {
      killGroup(pid, signal)
      return now()
    },
    exit: () => exit,
    next: (match, timeoutMs, from = 0) =>
      wait(() => {
        for (let i = from; i < received.length; i++) if (match(received[i])) return Option.some(received[i])
        // Stdout is read to its end before giving up: the last frames may come after the exit.
        return stdoutEnded ? Option.none() : undefined
      }, timeoutMs),
    awaitExit: (timeoutMs) => wait(() => exit === undefined ? undefined : Option.some(exit), timeoutMs)
  }
}
