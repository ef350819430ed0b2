/**
 * A drop-in for the MCP TypeScript SDK's `StdioClientTransport` (`@modelcontextprotocol/sdk/client/stdio.js`, 1.32;
 * written anew from its source and its tests, not copied) that leaves no server running: each server in its own
 * process group, stopped as a whole within bounds at `close()` (a server started through `sh -c` or `npx`, and the
 * helpers a server starts, go too), recorded in a journal so that a host that crashed has its servers swept at its next
 * start, and nothing from the server delivered once `close()` was called. Plain Promise code: the Effect runtime that
 * runs the supervision (`NodeSupervisedSpawner` from `@lifeline/node`) is the transport's own. docs/mcp.md compares
 * the two.
 *
 * @since 0.1.0
 */
import type * as Journal from "@lifeline/journal/Journal"
import * as Bounds from "@lifeline/kernel/Bounds"
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import * as Duration from "effect/Duration"
import type * as Layer from "effect/Layer"
import type { IOType } from "node:child_process"
import * as Fs from "node:fs"
import { PassThrough, type Stream, Writable } from "node:stream"
import * as HostDeath from "./internal/hostDeath.js"
import * as Runtime from "./internal/runtime.js"
import * as Server from "./internal/server.js"

/**
 * The variables a server inherits from the host when the options give no `env` for them: the SDK's allowlist (after
 * sudo's), so that secrets in the host's environment do not reach every server.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_INHERITED_ENV_VARS: ReadonlyArray<string> = process.platform === "win32"
  ? [
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PROCESSOR_ARCHITECTURE",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "USERNAME",
    "USERPROFILE",
    "PROGRAMFILES"
  ]
  : ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"]

/**
 * The host's values of {@link DEFAULT_INHERITED_ENV_VARS}, without those it does not set and without values that start
 * with `()` (exported shell functions), as the SDK's `getDefaultEnvironment`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const getDefaultEnvironment = (): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const name of DEFAULT_INHERITED_ENV_VARS) {
    const value = process.env[name]
    if (value !== undefined && !value.startsWith("()")) env[name] = value
  }
  return env
}

/**
 * The SDK's `StdioServerParameters`, and the bounds of the stop.
 *
 * @since 0.1.0
 * @category models
 */
export interface StdioServerParameters {
  /** The executable (searched in `PATH`; no shell). */
  readonly command: string
  readonly args?: ReadonlyArray<string> | undefined
  /** Merged over {@link getDefaultEnvironment} (not over the host's whole environment). */
  readonly env?: Record<string, string> | undefined
  /**
   * The server's stderr: `"inherit"` (the default), `"ignore"`, `"pipe"` or `"overlapped"` (read it from the
   * `stderr` getter, available before `start()`), a writable stream, or a file descriptor (written to).
   */
  readonly stderr?: IOType | Stream | number | undefined
  readonly cwd?: string | undefined
  /**
   * The longest line the server may write, in bytes. A longer one is reported to `onerror` and closes the transport
   * (the SDK's behaviour). Default 10 MiB, the SDK's.
   */
  readonly maxBufferSize?: number | undefined
  /**
   * After `close()` ends the server's stdin, how long it has to exit before SIGTERM. Default 2 s, the SDK's (and the
   * MCP specification's stdio shutdown).
   */
  readonly exitTimeout?: Duration.Input | undefined
  /** After SIGTERM to the server's process group, how long before SIGKILL. Default 2 s, the SDK's. */
  readonly killGrace?: Duration.Input | undefined
  /**
   * Where the journal of this process's servers is kept: `NodeSupervisedSpawner`'s default,
   * `$XDG_STATE_HOME/lifeline/children` or `~/.local/state/lifeline/children`.
   */
  readonly journalDirectory?: string | undefined
  /**
   * A journal to record this process's servers in instead of the default file, as a layer: `SqliteJournal.layer({
   * filename })` from `@lifeline/sqlite`, `PgJournal.layer(...)` from `@lifeline/postgres` (installed by the host: not
   * dependencies of this package). The servers of dead hosts recorded there are swept when it is opened, by the first
   * transport of this process that names this layer object (share one object between transports: each object is
   * one journal, opened once). `journalDirectory` is then not used. Default: none (the file journal).
   */
  readonly journal?: Layer.Layer<Journal.Journal, unknown> | undefined
  /**
   * The server runs in a process group of its own, out of the terminal's job: a Ctrl-C (SIGINT), a closed terminal
   * (SIGHUP) or a `kill` (SIGTERM) of a host that has no listener for that signal would kill the host and leave the
   * server running. While the server runs, the transport listens for those signals when the host does not: it sends
   * the signal to the server's group, SIGKILL after 1 s at most, then lets the host die of the signal. A listener of
   * the host's own wins (it is expected to close the transport). Default `true`.
   */
  readonly forwardHostSignals?: boolean | undefined
  /**
   * The server is watched by this process's guardian (`NodeGuardian` from `@lifeline/node`: one small detached Node
   * process per host, started with the first server): when the host dies without closing the transport, whatever
   * kills it (SIGKILL, the out-of-memory killer, a signal it has no handler for), the guardian sends SIGTERM to the
   * server's group, SIGKILL `killGrace` later, after checking that the pids are still the ones spawned. Without it, a
   * dead host's servers are swept only at the next start of a host on the same journal. Default `true`.
   */
  readonly guardian?: boolean | undefined
}

const defaultMaxBufferSize = 10 * 1024 * 1024
// Durations, not text: a text duration is parsed again on each use, on the path of every close.
const defaultExitTimeout: Duration.Duration = Bounds.mcp.exitTimeout
const defaultKillGrace: Duration.Duration = Bounds.mcp.killGrace
const encoder = new TextEncoder()
/** After the server exited by itself, how long a helper that holds its stdout open delays `onclose`. */
const drainGrace: Duration.Duration = Duration.millis(100)

/**
 * The error Node's `spawn` gave (`code: "ENOENT"`, `syscall`, `path`), as the SDK's transport rejects with it, when
 * Effect's spawner wrapped it in a `PlatformError` (whose `code` is not Node's): hosts test `error.code`.
 */
const spawnErrorOf = (error: unknown): unknown => {
  let current: unknown = error
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    const { code, syscall } = current as { readonly code?: unknown; readonly syscall?: unknown }
    if (typeof code === "string" && typeof syscall === "string") return current
    current = current.cause
  }
  return error
}

const isMessage = (value: unknown): value is JSONRPCMessage => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false
  const record = value as Record<string, unknown>
  if (record.jsonrpc !== "2.0") return false
  if (typeof record.method === "string") return true
  return (typeof record.id === "string" || typeof record.id === "number") && ("result" in record || "error" in record)
}

type State = "new" | "starting" | "open" | "closing" | "closed"

/**
 * The transport: `new StdioClientTransport({ command, args })` and `client.connect(transport)`, as with the SDK's.
 *
 * - `close()`: ends stdin, waits `exitTimeout`, SIGTERM to the server's whole process group, SIGKILL `killGrace`
 *   later, and returns once the group is gone; `onclose` is called once, before it returns.
 * - The server exits by itself: `onclose` once (the SDK's `Client` then fails its requests in flight), and what is
 *   left of its group is stopped the same way.
 * - Nothing from the server reaches `onmessage` once `close()` was called.
 * - Every server is recorded in a journal under an owner unique to this process; the first start in a process sweeps
 *   the servers of processes that died without closing theirs.
 *
 * @since 0.1.0
 * @category models
 */
export class StdioClientTransport implements Transport {
  onclose?: (() => void) | undefined
  onerror?: ((error: Error) => void) | undefined
  onmessage?: (<T extends JSONRPCMessage>(message: T) => void) | undefined
  sessionId?: string | undefined

  readonly #parameters: StdioServerParameters
  readonly #stderr: PassThrough | null
  #state: State = "new"
  #lease: Runtime.Lease | undefined
  #server: Server.Server | undefined
  #protocolVersion: string | undefined
  #started: Promise<void> | undefined
  #finished: Promise<void> | undefined
  #unregister: (() => void) | undefined
  /** Settles once the server has exited (or the runtime is gone). */
  #exited: Promise<unknown> | undefined

  constructor(server: StdioServerParameters) {
    this.#parameters = server
    this.#stderr = server.stderr === "pipe" || server.stderr === "overlapped" ? new PassThrough() : null
  }

  /** The server's pid while it runs (after `start()`, before the transport closed); `null` otherwise. */
  get pid(): number | null {
    return this.#state === "open" || this.#state === "closing" ? this.#server?.pid ?? null : null
  }

  /** The server's stderr when `stderr` was `"pipe"` or `"overlapped"` (available before `start()`), else `null`. */
  get stderr(): Stream | null {
    return this.#stderr
  }

  /** The protocol version the `Client` negotiated (stdio has no header to carry it). */
  get protocolVersion(): string | undefined {
    return this.#protocolVersion
  }

  setProtocolVersion(version: string): void {
    this.#protocolVersion = version
  }

  /** Spawns the server; resolves once it runs (rejects, and reports to `onerror`, when it cannot be spawned). */
  start(): Promise<void> {
    if (this.#state !== "new") {
      return Promise.reject(
        new Error(
          "StdioClientTransport already started! If using Client class, note that connect() calls start() automatically."
        )
      )
    }
    this.#state = "starting"
    this.#started = this.#start()
    return this.#started
  }

  async #start(): Promise<void> {
    const parameters = this.#parameters
    const fail = (error: unknown): Error => {
      this.#state = "closed"
      const failure = error instanceof Error ? error : new Error(String(error))
      this.#report(failure)
      return failure
    }
    let lease: Runtime.Lease
    try {
      lease = await Runtime.acquire(
        parameters.journal === undefined
          ? { _tag: "Directory", directory: parameters.journalDirectory }
          : { _tag: "Layer", layer: parameters.journal }
      )
    } catch (error) {
      throw fail(error)
    }
    this.#lease = lease
    const sink = this.#stderrSink()
    const startedAt = Date.now()
    try {
      this.#server = await lease.runtime.runPromise(Server.open({
        command: parameters.command,
        args: parameters.args ?? [],
        env: { ...getDefaultEnvironment(), ...parameters.env },
        cwd: parameters.cwd,
        stderr: sink === undefined ? (parameters.stderr === "ignore" ? "ignore" : "inherit") : "pipe",
        maxBufferSize: parameters.maxBufferSize ?? defaultMaxBufferSize,
        killGrace: parameters.killGrace ?? defaultKillGrace
      }, {
        line: (value) => this.#deliver(value),
        error: (error, fatal) => {
          this.#report(error)
          if (fatal) void this.close()
        },
        stderr: sink ?? (() => {})
      }))
    } catch (error) {
      await lease.release()
      throw fail(spawnErrorOf(error))
    }
    // A close() called while starting has waited for this, and closes the server after it.
    this.#state = "open"
    const server = this.#server
    this.#unregister = HostDeath.register(server.pid, server.endInput, {
      forwardHostSignals: parameters.forwardHostSignals !== false,
      guardian: parameters.guardian !== false,
      startedAt,
      killGrace: parameters.killGrace ?? defaultKillGrace
    })
    // The server exits by itself: once its last line is delivered, `onclose` is called and what is left of its group
    // stopped. During a close(), the close does both, in the other order.
    this.#exited = server.exited
    Server.exitedAndDrained(server, drainGrace).then(() => this.#finish(this.#state === "open")).catch((error) =>
      this.#report(error instanceof Error ? error : new Error(String(error)))
    )
  }

  #stderrSink(): ((chunk: Uint8Array) => void) | undefined {
    const stderr = this.#parameters.stderr
    if (this.#stderr !== null) {
      const stream = this.#stderr
      // A close whose server is gone ends the stream before the stop of the reading, in the background.
      return (chunk) => {
        if (!stream.writableEnded) stream.write(chunk)
      }
    }
    if (stderr instanceof Writable) return (chunk) => stderr.write(chunk)
    if (typeof stderr === "number") {
      return (chunk) => {
        try {
          Fs.writeSync(stderr, chunk)
        } catch {
          // A descriptor the host closed: the server's stderr is dropped, as a closed pipe would drop it.
        }
      }
    }
    return undefined
  }

  #report(error: Error): void {
    try {
      this.onerror?.(error)
    } catch {
      // A throwing handler must not stop the reading of the next line.
    }
  }

  #deliver(value: unknown): void {
    // A line may come before `start()` resolved (a server that speaks first): delivered, as the SDK delivers it.
    if (this.#state !== "open" && this.#state !== "starting") return
    if (!isMessage(value)) {
      this.#report(new Error(`the server sent a line that is not a JSON-RPC 2.0 message: ${JSON.stringify(value)}`))
      return
    }
    try {
      this.onmessage?.(value)
    } catch (error) {
      this.#report(error instanceof Error ? error : new Error(String(error)))
    }
  }

  /** Queues the message on the server's stdin; rejects with "Not connected" when the transport is not open. */
  send(message: JSONRPCMessage, _options?: TransportSendOptions): Promise<void> {
    const server = this.#server
    if (this.#state !== "open" || server === undefined) return Promise.reject(new Error("Not connected"))
    if (!server.write(encoder.encode(`${JSON.stringify(message)}\n`))) {
      return Promise.reject(new Error("Not connected"))
    }
    return Promise.resolve()
  }

  /**
   * Ends the server's stdin, waits `exitTimeout` for it to exit, then stops its whole process group (SIGTERM,
   * SIGKILL `killGrace` later) and waits for the group to be gone; calls `onclose` once. Nothing from the server is
   * delivered once it was called. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#state === "new") {
      this.#state = "closed"
      return
    }
    if (this.#state === "starting") await this.#started?.catch(() => {})
    const server = this.#server
    const lease = this.#lease
    if (this.#state === "open" && server !== undefined && lease !== undefined) {
      this.#state = "closing"
      // The input ended first, the wait set up once the event loop has run again: Node ends a pipe only then, and the
      // wait's set-up (a timer) would otherwise delay the end of input the server is waiting for.
      server.endInput()
      const exited = this.#exited ?? Promise.resolve()
      const timeout = this.#parameters.exitTimeout ?? defaultExitTimeout
      await new Promise<void>((resolve) => setImmediate(() => void Server.exitedWithin(exited, timeout).then(resolve)))
    }
    await this.#finish(false)
  }

  /**
   * Once: stops what is left of the server's group and releases the runtime. `onclose` comes after the stop for a
   * `close()` (everything is gone when it returns), and before it when the server exited by itself (so that the
   * `Client` fails its requests in flight at once, not after the grace of a helper that ignores SIGTERM).
   */
  #finish(exited: boolean): Promise<void> {
    this.#finished ??= (async () => {
      if (this.#state !== "closed") this.#state = "closing"
      if (exited) this.#notifyClose()
      const server = this.#server
      const lease = this.#lease
      // A close() whose server has exited with nothing left in its group, while other transports keep the runtime:
      // what the close guarantees is true, and the rest of the stop only keeps the books (the journal's record of the
      // end, Effect's release), about as long as the whole close of a server that exits at once. It runs in the
      // background, holding the lease, so the runtime's disposal (the last close) waits for it.
      if (
        !exited && server !== undefined && lease !== undefined && server.gone() &&
        // After the caller's continuation: a fiber runs its first steps at once, on the path of the close.
        lease.releaseInBackground(() =>
          new Promise<void>((resolve) => setImmediate(resolve)).then(() => lease.runtime.runPromise(server.stop))
        )
      ) {
        this.#unregister?.()
        this.#state = "closed"
        this.#stderr?.end()
        this.#notifyClose()
        return
      }
      if (server !== undefined && lease !== undefined) await lease.runtime.runPromise(server.stop)
      this.#unregister?.()
      this.#state = "closed"
      this.#stderr?.end()
      await lease?.release()
      if (!exited) this.#notifyClose()
    })()
    return this.#finished
  }

  #notifyClose(): void {
    try {
      this.onclose?.()
    } catch (error) {
      this.#report(error instanceof Error ? error : new Error(String(error)))
    }
  }
}
