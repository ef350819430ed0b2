/**
 * What the integration tests ask the operating system: is a process still there, and how long until it is not; and
 * child processes whose stdout is read line by line.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"

/**
 * Whether `pid` is a live process. A zombie (exited, not yet reaped: this container's init does not reap orphans)
 * counts as gone.
 */
export const isAlive = (pid: number): boolean => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
    return state !== "Z" && state !== "X"
  } catch {
    if (process.platform === "linux") return false
    try {
      process.kill(pid, 0)
      return true
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === "EPERM"
    }
  }
}

/** Polls every 5 ms (real time) until `pid` is gone; answers how long that took, or fails after `timeoutMs`. */
export const awaitGone = (pid: number, timeoutMs: number) =>
  Effect.gen(function*() {
    const start = performance.now()
    while (isAlive(pid)) {
      if (performance.now() - start > timeoutMs) {
        return yield* Effect.die(new Error(`process ${pid} still alive after ${timeoutMs} ms`))
      }
      yield* Effect.sleep("5 millis")
    }
    return performance.now() - start
  })

/** Polls every 5 ms (real time) until `condition` holds, or fails after `timeoutMs`. */
export const eventually = (condition: () => boolean, what: string, timeoutMs = 10_000) =>
  Effect.gen(function*() {
    const start = performance.now()
    while (!condition()) {
      if (performance.now() - start > timeoutMs) return yield* Effect.die(new Error(`never happened: ${what}`))
      yield* Effect.sleep("5 millis")
    }
  })

/** Kills `pid` with SIGKILL when the Scope closes, if it is still alive: for a process a failed test left behind. */
export const killOnExit = (pid: number): Effect.Effect<void, never, Scope.Scope> =>
  Effect.addFinalizer(() =>
    Effect.sync(() => {
      if (isAlive(pid)) process.kill(pid, "SIGKILL")
    })
  )

export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/** A child process started by `spawnLines`. */
export interface Lines {
  readonly child: ChildProcess.ChildProcess
  /** Its stdout so far, one entry per complete line. */
  readonly lines: ReadonlyArray<string>
  /** Its stderr so far. */
  readonly stderr: () => string
  /**
   * The first stdout line for which `match` answers a value (already printed or still to come); fails with
   * `onExit()` if the process exits first. Waits without a limit: callers add their own timeout.
   */
  readonly line: <A, E>(match: (line: string) => A | undefined, onExit: () => E) => Effect.Effect<A, E>
  /** Waits without a limit. */
  readonly exited: Effect.Effect<Exit>
}

/** Spawns `command` with stdin ignored and stdout read line by line; the Scope SIGKILLs it if it is still running. */
export const spawnLines = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: NodeJS.ProcessEnv | undefined }
): Effect.Effect<Lines, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync((): Lines => {
      const child = ChildProcess.spawn(command, args, {
        cwd: options.cwd,
        env: options.env,
        stdio: ["ignore", "pipe", "pipe"]
      })
      const lines: Array<string> = []
      const waiting = new Set<() => void>()
      let buffered = ""
      let stderr = ""
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        buffered += chunk
        let end: number
        while ((end = buffered.indexOf("\n")) >= 0) {
          lines.push(buffered.slice(0, end))
          buffered = buffered.slice(end + 1)
        }
        for (const wake of waiting) wake()
      })
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
      const exit = new Promise<Exit>((resolve) =>
        child.on("exit", (code, signal) => {
          resolve({ code, signal })
          for (const wake of waiting) wake()
        })
      )
      return {
        child,
        lines,
        stderr: () => stderr,
        line: <A, E>(match: (line: string) => A | undefined, onExit: () => E) =>
          Effect.callback<A, E>((resume) => {
            const check = () => {
              for (const line of lines) {
                const found = match(line)
                if (found !== undefined) {
                  waiting.delete(check)
                  return resume(Effect.succeed(found))
                }
              }
              if (child.exitCode !== null || child.signalCode !== null) {
                waiting.delete(check)
                resume(Effect.fail(onExit()))
              }
            }
            waiting.add(check)
            check()
            return Effect.sync(() => waiting.delete(check))
          }),
        exited: Effect.promise(() => exit)
      }
    }),
    ({ child }) =>
      Effect.sync(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
      })
  )
