/**
 * A session of an extension (or agent) process, run by whichever runner of the fleet holds its shard: an entity of
 * Effect's cluster, keyed by the session id, that spawns the session's child process in its scope and speaks
 * JSON-RPC to it over stdio, and runs each operation of the session as a persisted RPC keyed by the operation's
 * journal key. When the entity starts (the session's first operation, a shard moved, or the runner that
 * held it died), it first runs the kernel's `Recovery` for the session: what the journal says completed is answered
 * from the journal, the rest is resumed on the new child or failed with `InterruptedByCrash`, as the decisions say.
 *
 * A stdio child cannot move between machines: when the session moves, its child is stopped with the old entity (or
 * died with the old runner) and the new runner starts a new one. What the old child held in memory is gone. A child
 * that exits is started again at the session's next operation, within a restart budget (`maxRestarts`).
 *
 * When a runner stops gracefully (or the shard moves), it starts no new operation (the next runner runs it), and
 * gives those in flight `drainTimeout` to finish before leaving them unfinished for the next runner's recovery.
 *
 * @since 0.1.0
 */
import type * as Journal from "@lifeline/journal/Journal"
import type * as JournalClaim from "@lifeline/journal/JournalClaim"
import type * as JournalEntry from "@lifeline/journal/JournalEntry"
import type * as Method from "@lifeline/kernel/Method"
import type * as Peer from "@lifeline/kernel/Peer"
import type * as Protocol from "@lifeline/kernel/Protocol"
import type * as NodeChildProcess from "@lifeline/node/NodeChildProcess"
import type * as ClusterError from "effect/cluster/ClusterError"
import type * as Sharding from "effect/cluster/Sharding"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as ChildProcess from "effect/process/ChildProcess"
import type * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type { ExtensionUnavailable, InvalidOperation, KeyReused, OperationFailed } from "./FleetError.js"

export {
  /**
   * @since 0.1.0
   * @category schemas
   */
  Close,
  /**
   * @since 0.1.0
   * @category models
   */
  ExtensionSession,
  /**
   * @since 0.1.0
   * @category models
   */
  maxKeyLength,
  /**
   * @since 0.1.0
   * @category models
   */
  maxSessionIdLength,
  /**
   * @since 0.1.0
   * @category schemas
   */
  Operation,
  /**
   * @since 0.1.0
   * @category models
   */
  owner,
  /**
   * @since 0.1.0
   * @category schemas
   */
  Run
} from "./SessionEntity.js"
import * as internal from "./internal/session.js"

export {
  /**
   * @since 0.1.0
   * @category errors
   */
  ExtensionUnavailable,
  /**
   * @since 0.1.0
   * @category errors
   */
  InvalidOperation,
  /**
   * @since 0.1.0
   * @category errors
   */
  KeyReused,
  /**
   * @since 0.1.0
   * @category errors
   */
  OperationFailed
} from "./FleetError.js"

/**
 * What an operation gets: its key, kind and payload, which attempt this is (2 or more: resumed after a crash), and
 * the session it belongs to.
 *
 * @since 0.1.0
 * @category models
 */
export interface Context {
  readonly sessionId: string
  readonly key: string
  readonly kind: string
  readonly payload: Schema.Json
  readonly attempt: number
}

/**
 * What to do, on a new runner, with an operation of a kind that the dead runner left unfinished: run it again on the
 * new child (`Resume`), or record it as `InterruptedByCrash` (`Fail`). The default, for kinds without a decision.
 *
 * @since 0.1.0
 * @category models
 */
export type Decision = "Resume" | "Fail"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<Serves extends Method.Any, Calls extends Method.Any, R> {
  /** The session's child process. */
  readonly command: (sessionId: string) => ChildProcess.Command
  /** What the host side of the child's connection serves and calls. */
  readonly protocol: Protocol.Protocol<Serves, Calls>
  readonly handlers?: Peer.Handlers<Serves, R> | undefined
  /**
   * Runs one operation through the child. Its value (JSON) is the operation's result. The first operation after the
   * session (re)starts also waits for the new child to start: give its method a timeout that allows for it.
   */
  readonly run: (peer: Peer.Peer<Serves, Calls>, operation: Context) => Effect.Effect<Schema.Json, unknown, R>
  /** Per kind; kinds without one are failed with `InterruptedByCrash`. */
  readonly decisions?: { readonly [kind: string]: (entry: JournalEntry.Entry) => Decision } | undefined
  /** An operation started this many times is failed instead of resumed. Default 3 (the kernel's). */
  readonly maxAttempts?: number | undefined
  /**
   * The journal claim each session takes on its owner (`ExtensionSession.owner`), so that two runners never recover
   * one session at once. Default `{ ttl: "10 seconds" }` (the kernel's own default is 30 s). The `ttl` bounds how long
   * a new runner on another host waits for a dead runner's claim (keep it near the shard-lock expiry), and how long an
   * outage a runner on another host waits before it may take over a session whose operations are still draining. A
   * session keeps its claim until the operations it drains have recorded their ends. One that stops while its journal
   * cannot be reached (Postgres down) cannot delete its claim; it deletes it once the journal is back (retried every
   * 500 ms for up to ten minutes), since on one host a live runner's claim is never taken over, even expired.
   */
  readonly claim?: JournalClaim.ClaimOptions | undefined
  /** How often a runner retries a claim that another (dead) runner still holds. Default 250 ms. */
  readonly claimRetryInterval?: Duration.Input | undefined
  /** How many operations of one session run at once. Default 1: in order. */
  readonly concurrency?: number | "unbounded" | undefined
  /** How long a closed session stays idle before it stops. Default 1 minute. */
  readonly maxIdleTime?: Duration.Input | undefined
  /**
   * When the runner stops (or the session's shard moves), how long an operation in flight may still finish before it
   * is left unfinished in the journal, for the next runner to resume or fail by its kind's decision. Operations not
   * started yet are never started: the next runner gets them. Keep it below the runner's `entityTerminationTimeout`
   * (Effect's default 15 s), which bounds the whole stop. Default: `LIFELINE_DRAIN_TIMEOUT` when it is set (read as the
   * shutdown policy reads it), else 10 seconds (`Bounds.fleetDrainTimeout`).
   */
  readonly drainTimeout?: Duration.Input | undefined
  /**
   * A child that exited is started again at the session's next operation, at most this many times in a row without
   * an operation succeeding on it; then operations fail with `ExtensionUnavailable` (`RestartBudgetSpent`) until the
   * session restarts (closed and idle, or moved). A command that cannot be spawned counts the same way. Default 3.
   */
  readonly maxRestarts?: number | undefined
  /** The wait before the n-th restart in a row: `restartBackoff × 2^(n-1)`. Default 1 second. */
  readonly restartBackoff?: Duration.Input | undefined
  /** The child's stop sequence, when the session stops or moves. */
  readonly stop?: NodeChildProcess.StopOptions | undefined
  readonly shutdown?: ((peer: Peer.Peer<Serves, Calls>) => Effect.Effect<unknown, unknown>) | undefined
}

/**
 * Registers the entity with the runner: provide it the `Sharding` of `FleetRunner.layer` and the `Journal` (a
 * `PgJournal` on the fleet's Postgres: every runner must see every session's entries).
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { ChildProcess } from "effect/process"
 * import { Method, Protocol } from "@lifeline/kernel"
 * import { ExtensionSession } from "@lifeline/fleet"
 *
 * const Work = Method.request("work", { params: Schema.Struct({ key: Schema.String }), result: Schema.String })
 *
 * const Sessions = ExtensionSession.layer({
 *   command: (sessionId) => ChildProcess.make("node", ["extension.js", sessionId]),
 *   protocol: Protocol.make({ calls: [Work] }),
 *   run: (peer, operation) => peer.call(Work, { key: operation.key }),
 *   decisions: { work: () => "Resume" }
 * })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: <Serves extends Method.Any, Calls extends Method.Any, R = never>(
  options: Options<Serves, Calls, R>
) => Layer.Layer<never, never, Sharding.Sharding | Journal.Journal | Exclude<R, Scope.Scope>> = internal.layer

/**
 * Sends an operation to its session, wherever the session runs, and waits for its reply. The message is stored
 * first, so the operation survives the death of the runner running it (and of this one); sending the same key again
 * waits for the same reply instead of running it twice (the same key with another kind or payload: `KeyReused`). A
 * session id, key, kind or payload out of bounds fails with `InvalidOperation` before anything is stored.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ExtensionSession } from "@lifeline/fleet"
 *
 * const reply = ExtensionSession.run("s-1", { key: "s-1/op-1", kind: "work", payload: { n: 1 } })
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const run: (
  sessionId: string,
  operation: { readonly key: string; readonly kind: string; readonly payload: Schema.Json }
) => Effect.Effect<
  Schema.Json,
  | OperationFailed
  | ExtensionUnavailable
  | KeyReused
  | InvalidOperation
  | ClusterError.MailboxFull
  | ClusterError.AlreadyProcessingMessage
  | ClusterError.PersistenceError
  | ClusterError.EntityNotAssignedToRunner,
  Sharding.Sharding
> = internal.run

/**
 * Ends the keep-alive of a session, wherever it runs: once idle for `maxIdleTime` its entity stops and its child with
 * it. A later operation starts it again.
 *
 * @example
 * ```ts
 * import { ExtensionSession } from "@lifeline/fleet"
 *
 * const done = ExtensionSession.close("s-1")
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const close: (
  sessionId: string
) => Effect.Effect<
  void,
  | InvalidOperation
  | ClusterError.MailboxFull
  | ClusterError.AlreadyProcessingMessage
  | ClusterError.PersistenceError
  | ClusterError.EntityNotAssignedToRunner,
  Sharding.Sharding
> = internal.close
