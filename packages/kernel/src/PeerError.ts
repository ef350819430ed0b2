/**
 * The typed ways an outbound call can end without a result, besides the peer's own `RpcError` answer.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * The call got no answer within its timeout. A late answer is dropped and counted; the protocol's cancellation, if it
 * has one, tells the other side.
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
 * A caller of `Connection.stop` with a `timeout` waited that long; the stop goes on to its end (docs/lifecycle.md,
 * "stop").
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
 * The connection ended while the call was pending, or before it was sent (`Unresponsive`: the other side did not read
 * our answers for the peer's `stallTimeout`).
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
 * Our side is shutting down: the call was failed at once, or was still pending when a drain ended. `reason` says what
 * started the shutdown, or why the drain ended first (`DrainTimeout`, `Forced`); `phase` is the lifecycle state the
 * call met it in.
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
