/**
 * The typed ways an outbound call can end without a result, besides the peer's own `RpcError` answer.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * The call got no answer within its timeout. The id is tombstoned, so a late answer is dropped and counted. When the
 * protocol has a cancellation (`Cancellation.lsp`, `Cancellation.mcp`), its notification is sent so the other side can
 * stop working on it; under plain JSON-RPC 2.0 (`Cancellation.none`) nothing is sent.
 *
 * @since 0.1.0
 * @category errors
 */
export class RequestTimeout extends Schema.TaggedError<RequestTimeout>("@lifeline/kernel/RequestTimeout")(
  "RequestTimeout",
  {
    method: Schema.String,
    id: Schema.Union([Schema.String, Schema.Number]),
    timeoutMillis: Schema.Number
  }
) {
  override get message(): string {
    return `${this.method} (id ${this.id}) got no answer within ${this.timeoutMillis} ms`
  }
}

/**
 * A caller of `Connection.stop` with a `timeout` waited that long and the stop was not over yet. Only the caller
 * stops waiting: the stop goes on to its end, as a call that timed out leaves the other side working
 * (docs/lifecycle.md, "stop").
 *
 * @since 0.1.0
 * @category errors
 */
export class StopTimeout extends Schema.TaggedError<StopTimeout>("@lifeline/kernel/StopTimeout")("StopTimeout", {
  timeoutMillis: Schema.Number
}) {
  override get message(): string {
    return `the stop was not over within ${this.timeoutMillis} ms; it goes on`
  }
}

/**
 * The connection ended while the call was pending, or before it was sent: the other side closed its end
 * (`TransportClosed`), reading, writing or framing failed (`TransportFailed`), or the other side stopped reading what
 * we write while it kept sending requests, for longer than the peer's `stallTimeout` (`Unresponsive`).
 *
 * @since 0.1.0
 * @category errors
 */
export class PeerClosed extends Schema.TaggedError<PeerClosed>("@lifeline/kernel/PeerClosed")("PeerClosed", {
  reason: Schema.Literals(["TransportClosed", "TransportFailed", "Unresponsive"]),
  detail: Schema.optional(Schema.String)
}) {
  override get message(): string {
    return this.detail === undefined ? `peer closed (${this.reason})` : `peer closed (${this.reason}: ${this.detail})`
  }
}

/**
 * Our side is shutting down: the call was failed at once instead of waiting (fail-fast, docs/lifecycle.md), or it was still
 * pending when a drain ended without it. `reason` says what started the shutdown (`Stop`, `Interrupted`: a signal or an
 * interrupted Scope, `Failed`), or why a drain ended before the call did: `DrainTimeout` when the drain deadline passed,
 * `Forced` when a forced stop (`stopNow`, a second signal) cut the drain short first. `phase` is the lifecycle state
 * the call met it in. A call refused after the stop keeps the reason that started it, in `Closing` and in `Closed`.
 *
 * @example
 * ```ts
 * import { PeerError } from "@lifeline/kernel"
 *
 * const why = (error: PeerError.ShutdownError): string => {
 *   switch (error.reason) {
 *     case "Stop":
 *       return "stopped"
 *     case "Interrupted":
 *       return "a signal, or the Scope was interrupted"
 *     case "DrainTimeout":
 *       return "no answer before the drain deadline"
 *     case "Forced":
 *       return "no answer before the stop was forced"
 *     case "Failed":
 *       return "the connection failed"
 *   }
 * }
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ShutdownError extends Schema.TaggedError<ShutdownError>("@lifeline/kernel/ShutdownError")(
  "ShutdownError",
  {
    reason: Schema.Literals(["Stop", "DrainTimeout", "Forced", "Interrupted", "Failed"]),
    phase: Schema.String,
    detail: Schema.optional(Schema.String)
  }
) {
  override get message(): string {
    return `shutting down (${this.reason} while ${this.phase})${this.detail === undefined ? "" : `: ${this.detail}`}`
  }
}

/**
 * The other side's process exited or was killed while calls were pending. Carries how it ended and the last lines
 * it wrote to stderr, which usually say why.
 *
 * @since 0.1.0
 * @category errors
 */
export class PeerExited extends Schema.TaggedError<PeerExited>("@lifeline/kernel/PeerExited")("PeerExited", {
  exitCode: Schema.NullOr(Schema.Number),
  signal: Schema.NullOr(Schema.String),
  stderrTail: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `peer exited (code ${this.exitCode}, signal ${this.signal})`
  }
}

/**
 * Why a connection is no longer usable: every pending call fails with it.
 *
 * @since 0.1.0
 * @category models
 */
export type Disconnect = PeerClosed | ShutdownError | PeerExited
