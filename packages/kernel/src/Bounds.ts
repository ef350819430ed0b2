/**
 * Every default time of Lifeline in one table: the handshake, a call, the drain, the stop ladder, the Hermes
 * extension's shutdown budget, the fleet's drain and claim waits, the reaper's grace. Each module's option reads its
 * default here; a default that depends on another is derived from it here, so changing one moves the others with it.
 * docs/shutdown.md's table of bounds is checked against this module by `pnpm check` (`scripts/docs-bounds.ts`).
 *
 * This module imports nothing of the package, so any module (public or internal) may read it without a cycle.
 *
 * @since 0.2.0
 */
import * as Duration from "effect/Duration"

/**
 * The handshake (`Connection.initiate`), and each of its calls that has no shorter timeout of its own; Hermes'
 * `initialize` bound (docs/protocol.md).
 *
 * @since 0.2.0
 * @category defaults
 */
export const handshakeTimeout: Duration.Duration = Duration.seconds(10)

/**
 * A call's answer, when the call gives no timeout of its own (the peer's `requestTimeout`).
 *
 * @since 0.2.0
 * @category defaults
 */
export const requestTimeout: Duration.Duration = Duration.seconds(5)

/**
 * How long the drain policy lets work in flight finish when `LIFELINE_DRAIN_TIMEOUT` is not set.
 *
 * @since 0.2.0
 * @category defaults
 */
export const drainTimeout: Duration.Duration = Duration.seconds(5)

/**
 * Writing the queued frames before the input ends (the peer's and the connection's `flushTimeout`).
 *
 * @since 0.2.0
 * @category defaults
 */
export const flushTimeout: Duration.Duration = Duration.seconds(1)

/**
 * What a stop's `closeTimeout` adds to drain + flush: the cut-off itself, the cancellations, the end of input.
 *
 * @since 0.2.0
 * @category defaults
 */
export const closeSlack: Duration.Duration = Duration.seconds(1)

/**
 * The default `closeTimeout` of a stop under a policy that drains for `drain`: drain + {@link flushTimeout} +
 * {@link closeSlack}, so the close step never cuts a drain short.
 *
 * @since 0.2.0
 * @category derived
 */
export const closeTimeout = (drain: Duration.Duration, flush: Duration.Duration = flushTimeout): Duration.Duration =>
  Duration.sum(Duration.sum(drain, flush), closeSlack)

/**
 * The answer to the protocol's shutdown request (Hermes: 5 s, then SIGKILL; docs/protocol.md).
 *
 * @since 0.2.0
 * @category defaults
 */
export const shutdownTimeout: Duration.Duration = Duration.seconds(5)

/**
 * After the end of input, the time a child has to exit by itself before SIGTERM.
 *
 * @since 0.2.0
 * @category defaults
 */
export const exitGrace: Duration.Duration = Duration.seconds(1)

/**
 * After SIGTERM, before SIGKILL; the same for descendants left in the process group.
 *
 * @since 0.2.0
 * @category defaults
 */
export const killGrace: Duration.Duration = Duration.seconds(1)

/**
 * After SIGKILL, before the child is reported `Unkillable` (or its group `Survived`).
 *
 * @since 0.2.0
 * @category defaults
 */
export const verifyTimeout: Duration.Duration = Duration.seconds(1)

/**
 * After a second signal (`NodeSignals.runMain`), before the host exits with 3 anyway.
 *
 * @since 0.2.0
 * @category defaults
 */
export const forceTimeout: Duration.Duration = Duration.seconds(3)

/**
 * The Hermes host's `exitGrace`: after the end of an extension's input, the time it has to exit by itself before
 * SIGTERM (docs/protocol.md). Longer than the stop sequence's {@link exitGrace}: the extension has just run its
 * shutdown checklist and is ending its output.
 *
 * @since 0.2.0
 * @category defaults
 */
export const hostExitGrace: Duration.Duration = Duration.seconds(2)

/**
 * The Hermes host's `verifyTimeout`, after SIGKILL: its `killGrace` + 1 s.
 *
 * @since 0.2.0
 * @category derived
 */
export const hostVerifyTimeout = (killGrace: Duration.Duration): Duration.Duration =>
  Duration.sum(killGrace, Duration.seconds(1))

/**
 * What an extension keeps back from the host's {@link shutdownTimeout} so that its answer is on the wire in time.
 *
 * @since 0.2.0
 * @category defaults
 */
export const answerMargin: Duration.Duration = Duration.seconds(1)

/**
 * The Hermes extension SDK's `shutdownBudget`: the host's {@link shutdownTimeout} minus {@link answerMargin} (4 s),
 * the whole shutdown checklist included; its drain step takes the policy's drain timeout, cut to what is left of it.
 *
 * @since 0.2.0
 * @category derived
 */
export const extensionShutdownBudget: Duration.Duration = Duration.subtract(shutdownTimeout, answerMargin)

/**
 * How long a fleet session's operation in flight may still finish once its runner stops, when neither the
 * `drainTimeout` option nor `LIFELINE_DRAIN_TIMEOUT` says: longer than a connection's drain, since an operation is
 * worth finishing rather than resuming on another runner.
 *
 * @since 0.2.0
 * @category defaults
 */
export const fleetDrainTimeout: Duration.Duration = Duration.seconds(10)

/**
 * How long a fleet session retries the journal step that records an operation's end while the journal is unreachable.
 *
 * @since 0.2.0
 * @category defaults
 */
export const recordRetryWindow: Duration.Duration = Duration.seconds(30)

/**
 * What a fleet session's claim wait adds to the drain and the record retries: the last journal step's own timeout and
 * the interruption of what is left.
 *
 * @since 0.2.0
 * @category defaults
 */
export const claimWaitSlack: Duration.Duration = Duration.seconds(30)

/**
 * How long a stopping fleet session keeps its claim for the operations still running: their drain, then the retries
 * of their last journal step ({@link recordRetryWindow}), then {@link claimWaitSlack}.
 *
 * @since 0.2.0
 * @category derived
 */
export const claimWait = (drain: Duration.Duration): Duration.Duration =>
  Duration.sum(Duration.sum(drain, recordRetryWindow), claimWaitSlack)

/**
 * The reaper's grace for an orphan (`NodeReaper.reapProcess`): after SIGTERM before SIGKILL, and after SIGKILL before
 * `Survived`. Longer than {@link killGrace}: an orphan is not our child, so its exit is polled, not awaited.
 *
 * @since 0.2.0
 * @category defaults
 */
export const reapGrace: Duration.Duration = Duration.seconds(2)

/**
 * The MCP profile (`@lifeline/mcp`): the stdio shutdown of the MCP specification with the official SDK's figures, and
 * the restart of a crashed server (`Reconnect.reconnecting`). docs/mcp.md lists each as the option that reads it.
 *
 * - `exitTimeout` (2 s): after the end of a server's stdin, before SIGTERM to its process group (the SDK's wait).
 * - `killGrace` (2 s): after SIGTERM, before SIGKILL (the SDK's).
 * - `restartBudget` (5): restarts in a row, with no stable run between them, before the host is told it gave up.
 * - `restartInitialDelay` (1 s), `restartFactor` (2), `restartMaxDelay` (30 s): the exponential backoff before each
 *   restart (1, 2, 4, 8, 16 s by default), capped.
 * - `restartStableAfter` (60 s): a connection that lived this long resets the budget and the backoff.
 * - `restartConnectTimeout` (10 s, the {@link handshakeTimeout}): a restarted server's `initialize`, before the
 *   attempt counts as failed.
 *
 * @since 0.2.0
 * @category defaults
 */
export const mcp = {
  exitTimeout: Duration.seconds(2),
  killGrace: Duration.seconds(2),
  restartBudget: 5,
  restartInitialDelay: Duration.seconds(1),
  restartFactor: 2,
  restartMaxDelay: Duration.seconds(30),
  restartStableAfter: Duration.seconds(60),
  restartConnectTimeout: handshakeTimeout
} as const
