/**
 * Opt-in restart of a crashed MCP server for the SDK's `Client`: `reconnecting(client, () => new
 * StdioClientTransport(...))` connects the `Client`, and when its server dies by itself, connects it again to a new
 * transport after a backoff, so that the `Client` redoes `initialize` itself. A budget of restarts in a row bounds
 * it; a connection that lived `stableAfter` resets the budget and the backoff; once the budget is spent, `closed`
 * rejects with {@link RestartBudgetExhausted}. Requests in flight when a server dies fail at once (the `Client` fails
 * them when its transport closes); requests made between a crash and the next connection fail with "Not connected".
 * docs/mcp.md ("Restarting a crashed server") says why the `Client` is reconnected rather than the handshake replayed.
 *
 * @since 0.2.0
 */
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage, MessageExtraInfo } from "@modelcontextprotocol/sdk/types.js"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Internal from "./internal/reconnect.js"

/**
 * The bounds of the restarts; each default comes from the kernel's table of bounds (`Bounds.mcp`).
 *
 * @since 0.2.0
 * @category models
 */
export interface ReconnectOptions {
  /** Restarts in a row (no stable run between them) before giving up. Default 5. */
  readonly restartBudget?: number | undefined
  /** The wait before the first restart of a series. Default 1 s. */
  readonly initialDelay?: Duration.Input | undefined
  /** Each next wait is the previous one times `factor`. Default 2. */
  readonly factor?: number | undefined
  /** The longest wait before a restart. Default 30 s. */
  readonly maxDelay?: Duration.Input | undefined
  /** A connection that lived this long resets the budget and the backoff when it ends. Default 60 s. */
  readonly stableAfter?: Duration.Input | undefined
  /**
   * A restarted server's `initialize` (the `timeout` given to `client.connect`); one that does not answer in time
   * counts as a failed restart. Default 10 s. The first connection is the caller's and has the `Client`'s own timeout.
   */
  readonly connectTimeout?: Duration.Input | undefined
  /** Called before the wait of each restart (what it throws is ignored). */
  readonly onRestart?: ((event: RestartEvent) => void) | undefined
  /**
   * Called once a restarted server has answered `initialize`, with the restart's number in its series: the moment to
   * list its tools again (what it throws is ignored). Requests made before it go to a server not yet initialized.
   */
  readonly onReconnected?: ((restart: number) => void) | undefined
}

/**
 * A restart about to happen: its number in the series (from 1), the wait before it (`delayMillis` in milliseconds,
 * for Promise code; `delay` as an Effect `Duration`), and why.
 *
 * @since 0.2.0
 * @category models
 */
export interface RestartEvent {
  readonly restart: number
  readonly delay: Duration.Duration
  /** @since 0.3.0 */
  readonly delayMillis: number
  readonly error: Error
}

/**
 * The budget is spent: the server died (or failed to start) once more after `restarts` restarts in a row.
 *
 * @since 0.2.0
 * @category errors
 */
export class RestartBudgetExhausted extends Data.TaggedError("RestartBudgetExhausted")<{
  readonly restarts: number
  readonly lastError: Error
}> {
  override get message(): string {
    return `the MCP server was restarted ${this.restarts} times in a row and failed again, giving up: ` +
      this.lastError.message
  }
}

/**
 * What of the SDK's `Client` (v1 or v2) the helper uses.
 *
 * @since 0.2.0
 * @category models
 */
export interface ReconnectableClient {
  connect(transport: Transport, options?: { timeout?: number }): Promise<void>
  close(): Promise<void>
  onerror?: ((error: Error) => void) | undefined
}

/**
 * A `Client` that is reconnected when its server dies.
 *
 * @since 0.2.0
 * @category models
 */
export interface Reconnecting<T extends Transport> {
  /**
   * The transport of the current connection (or the one being made); `undefined` while a restart waits and after
   * the give-up.
   */
  readonly transport: T | undefined
  /** Restarts so far, over the whole life (not reset by a stable run). */
  readonly restarts: number
  /**
   * Resolves once the host closed the connection (`close()` below, or `client.close()`, also while a restart waits or
   * connects); rejects
   * with {@link RestartBudgetExhausted} once the budget is spent (also reported to `client.onerror`).
   */
  readonly closed: Promise<void>
  /** Stops restarting (a restart waiting for its delay included) and closes the `Client`. */
  close(): Promise<void>
}

/**
 * The `Client`'s side of one transport: forwards everything, and tells a close the host asked for (`client.close()`)
 * from a server that ended by itself. A wrapper rather than a patch of the host's transport or `Client`.
 */
class Link<T extends Transport> implements Transport {
  onclose?: (() => void) | undefined
  onerror?: ((error: Error) => void) | undefined
  onmessage?: (<M extends JSONRPCMessage>(message: M, extra?: MessageExtraInfo) => void) | undefined
  readonly ended = Deferred.makeUnsafe<Internal.End>()
  #connected = false
  #closedByHost = false
  #lastError: Error | undefined

  #innerClosed = false
  #initializeFailed = false

  constructor(readonly inner: T) {
    inner.onmessage = (message, extra) => {
      // Before `connected()`, an error answer can only be the answer to `initialize`.
      if (!this.#connected && "error" in message && "id" in message) this.#initializeFailed = true
      this.onmessage?.(message, extra)
    }
    inner.onerror = (error) => {
      this.#lastError = error
      this.onerror?.(error)
    }
    inner.onclose = () => {
      this.#innerClosed = true
      // The `Client` first (it fails its requests in flight), then the loop.
      try {
        this.onclose?.()
      } finally {
        const lost = new Error(
          "the MCP server's connection ended by itself" +
            (this.#lastError === undefined ? "" : ` (last error: ${this.#lastError.message})`),
          { cause: this.#lastError }
        )
        Deferred.doneUnsafe(
          this.ended,
          Exit.succeed(this.#closedByHost ? { _tag: "Closed" } : { _tag: "Lost", error: lost })
        )
      }
    }
  }

  get sessionId(): string | undefined {
    return this.inner.sessionId
  }

  /** From here on, a `close()` is the host's (before, it is the `Client` giving up on a failed `initialize`). */
  connected(): void {
    this.#connected = true
  }

  setProtocolVersion(version: string): void {
    this.inner.setProtocolVersion?.(version)
  }

  start(): Promise<void> {
    return this.inner.start()
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    // The `Client` cancels an `initialize` that timed out before it gives up.
    if (!this.#connected && "method" in message && message.method === "notifications/cancelled") {
      this.#initializeFailed = true
    }
    return this.inner.send(message, options)
  }

  /**
   * The `Client` is giving up on this connection's `initialize` (its server died, refused it, or let it time out): the
   * `close()` it then makes is its own, not the host's.
   */
  get givingUp(): boolean {
    return !this.#connected && (this.#innerClosed || this.#initializeFailed)
  }

  close(): Promise<void> {
    if (this.#connected) this.#closedByHost = true
    return this.inner.close()
  }
}

const toError = (error: unknown): Error => error instanceof Error ? error : new Error(String(error))

/**
 * Connects `client` to `makeTransport()` and keeps it connected: when the server's connection ends by itself, waits
 * the backoff and connects the `Client` to a new `makeTransport()` (the `Client` sends `initialize` again). Resolves
 * once the first connection is up; rejects, with no restart, when it fails (a command that cannot start is the
 * host's to fix, not to retry).
 *
 * The `Client`'s `onclose` is called at each crash, as without this helper; `closed` says when it is over.
 *
 * @since 0.2.0
 * @category constructors
 */
export const reconnecting = async <T extends Transport>(
  client: ReconnectableClient,
  makeTransport: () => T,
  options: ReconnectOptions = {}
): Promise<Reconnecting<T>> => {
  const settings = Internal.decode(options)
  const connectTimeout = Duration.toMillis(settings.connectTimeout)
  let current: Link<T> | undefined
  let restarts = 0
  let series = 0
  const notify = <A>(callback: ((value: A) => void) | undefined, value: A): void => {
    try {
      callback?.(value)
    } catch {
      // The host's callback must not stop the restarts.
    }
  }
  let stopped = false
  const open = async (timeout: number | undefined): Promise<Link<T>> => {
    const link = new Link(makeTransport())
    current = link
    await client.connect(link, timeout === undefined ? undefined : { timeout })
    if (stopped) {
      // Closed while this restart connected: the new server goes too.
      await link.close()
      throw new Error("closed while the restart connected")
    }
    link.connected()
    return link
  }
  const first = await open(undefined)
  const fiber = Effect.runFork(Internal.loop(
    settings,
    Deferred.await(first.ended),
    Effect.map(
      Effect.tryPromise({ try: () => open(connectTimeout), catch: toError }),
      (link) => {
        notify(options.onReconnected, series)
        return Deferred.await(link.ended)
      }
    ),
    {
      restarting: (event) => {
        current = undefined
        restarts++
        series = event.restart
        notify(options.onRestart, event)
      }
    }
  ))
  const closed = new Promise<void>((resolve, reject) => {
    fiber.addObserver((exit) => {
      if (Exit.isSuccess(exit) || Exit.hasInterrupts(exit)) return resolve()
      current = undefined
      const failure = Exit.findErrorOption(exit)
      const error = failure._tag === "Some"
        ? new RestartBudgetExhausted({ restarts: failure.value.restarts, lastError: failure.value.error })
        : new Error("the restart loop failed", { cause: exit.cause })
      try {
        client.onerror?.(error)
      } catch {
        // The host's handler; `closed` still rejects.
      }
      reject(error)
    })
  })
  // A host that awaits only `close()` must not get an unhandled rejection.
  closed.catch(() => {})
  const stop = async () => {
    stopped = true
    await Effect.runPromise(Fiber.interrupt(fiber))
  }
  // While a restart waits or connects, the `Client` has no transport (or one not yet connected), so its own `close()`
  // would not reach the loop: the host's `client.close()` is made to stop the restarts first, for as long as they run.
  // The only change made to the host's object; it is undone when the loop ends.
  const own = Object.getOwnPropertyDescriptor(client, "close")
  const clientClose = client.close
  client.close = async () => {
    // The `Client` closes by itself when a restart's `initialize` fails: that is the loop's to count, not a stop.
    if (current?.givingUp !== true) await stop()
    return clientClose.call(client)
  }
  void closed.finally(() => {
    if (own === undefined) delete (client as { close?: unknown }).close
    else Object.defineProperty(client, "close", own)
  }).catch(() => {})
  return {
    get transport() {
      return current?.inner
    },
    get restarts() {
      return restarts
    },
    closed,
    close: async () => {
      await stop()
      await clientClose.call(client)
    }
  }
}
