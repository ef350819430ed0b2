/**
 * A Lifeline program of this repository as a real child process that the test talks to in Content-Length frames, the
 * way a host does: the program runs as one bundle (`scripts/run-bundled.mjs`) on the test's Node, the test writes
 * frames (or any bytes) to its stdin, reads the frames on its stdout, keeps its stderr, and can end its stdin.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import * as Url from "node:url"

export const root = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "..", "..")

export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export interface Framed {
  readonly child: ChildProcess.ChildProcess
  /** Every frame read so far, parsed. */
  readonly received: ReadonlyArray<any>
  readonly stderr: () => string
  /** Writes `message` as one frame. */
  readonly send: (message: unknown) => void
  /** Writes `bytes` as they are. */
  readonly write: (bytes: Uint8Array | string) => void
  /** Ends stdin: what the host's death looks like from the child. Answers `performance.now()` at that moment. */
  readonly endInput: () => number
  /** The first frame `match` accepts; fails if the process exits first, or after `timeoutMs`. */
  readonly next: (match: (message: any) => boolean, what: string, timeoutMs?: number) => Effect.Effect<any>
  /** Resolves at the exit, with `performance.now()` at that moment. */
  readonly exited: Promise<Exit & { readonly at: number }>
}

/** One Content-Length frame holding `message` as JSON. */
export const frame = (message: unknown): Buffer => {
  const body = Buffer.from(JSON.stringify(message), "utf8")
  return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, "ascii"), body])
}

/** This process's environment with `changes` applied: a variable set to `undefined` is removed. */
const environment = (changes: Record<string, string | undefined>): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const [name, value] of Object.entries(changes)) {
    if (value === undefined) delete env[name]
    else env[name] = value
  }
  return env
}

/** Spawns `entry` (a path from the repository's root) bundled; the Scope SIGKILLs it if it is still running. */
export const spawnFramed = (
  entry: string,
  options: { readonly env?: Record<string, string | undefined> } = {}
): Effect.Effect<Framed, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync((): Framed => {
      const child = ChildProcess.spawn(process.execPath, [Path.join(root, "scripts", "run-bundled.mjs"), entry], {
        cwd: root,
        stdio: ["pipe", "pipe", "pipe"],
        env: environment(options.env ?? {})
      })
      const received: Array<any> = []
      const waiting = new Set<() => void>()
      const wakeAll = () => {
        for (const wake of Array.from(waiting)) wake()
      }
      let buffer = Buffer.alloc(0)
      child.stdout.on("data", (chunk: Buffer) => {
        buffer = Buffer.concat([buffer, chunk])
        for (;;) {
          const end = buffer.indexOf("\r\n\r\n")
          if (end < 0) break
          const length = Number(/Content-Length: *(\d+)/i.exec(buffer.subarray(0, end).toString("ascii"))?.[1])
          if (buffer.length < end + 4 + length) break
          received.push(JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString("utf8")))
          buffer = buffer.subarray(end + 4 + length)
        }
        wakeAll()
      })
      let stderr = ""
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString("utf8")
      })
      // A write after the child is gone fails with EPIPE: the test sees that through `exited`, not as a crash.
      child.stdin.on("error", () => {})
      const exited = new Promise<Exit & { readonly at: number }>((resolve) =>
        child.once("exit", (code, signal) => {
          resolve({ code, signal, at: performance.now() })
          wakeAll()
        })
      )
      return {
        child,
        received,
        stderr: () => stderr,
        send: (message) => child.stdin.write(frame(message)),
        write: (bytes) => child.stdin.write(bytes),
        endInput: () => {
          const at = performance.now()
          child.stdin.end()
          return at
        },
        next: (match, what, timeoutMs = 20_000) =>
          Effect.callback<any>((resume) => {
            const check = () => {
              const found = received.find(match)
              if (found !== undefined) {
                waiting.delete(check)
                resume(Effect.succeed(found))
              } else if (child.exitCode !== null || child.signalCode !== null) {
                waiting.delete(check)
                resume(Effect.die(new Error(`exited before ${what}; stderr:\n${stderr}`)))
              }
            }
            waiting.add(check)
            check()
            return Effect.sync(() => waiting.delete(check))
          }).pipe(
            Effect.timeoutOrElse({
              duration: timeoutMs,
              orElse: () => Effect.die(new Error(`never received ${what}; stderr:\n${stderr}`))
            })
          ),
        exited
      }
    }),
    ({ child }) =>
      Effect.sync(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
      })
  )
