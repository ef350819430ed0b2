/**
 * A session of an extension (or agent) process, run by whichever runner of the fleet holds its shard: an entity of
 * Effect's cluster, keyed by the session id, that spawns the session's child process in its scope and speaks
 * JSON-RPC to it over stdio, and runs each operation of the session as a persisted RPC whose primary key is the
 * operation's journal key. When the entity starts (the session's first operation, a shard moved, or the runner that
 * held it died), it first runs the kernel's `Recovery` for the session: what the journal says completed is answered
 * from the journal, the rest is resumed on the new child or failed with `InterruptedByCrash`, as the decisions say.
 *
 * A stdio child cannot move between machines: when the session moves, its child is stopped with the old entity (or
 * died with the old runner) and the new runner starts a new one. What the old child held in memory is gone.
 *
 * @since 0.1.0
 */
import type * as Journal from "@lifeline/kernel/Journal"
import type * as JournalClaim from "@lifeline/kernel/JournalClaim"
import type * as JournalEntry from "@lifeline/kernel/JournalEntry"
import type * as Method from "@lifeline/kernel/Method"
import type * as Peer from "@lifeline/kernel/Peer"
import type * as Protocol from "@lifeline/kernel/Protocol"
import type * as NodeChildProcess from "@lifeline/node/NodeChildProcess"
import type * as ClusterError from "effect/cluster/ClusterError"
import * as ClusterSchema from "effect/cluster/ClusterSchema"
import * as Entity from "effect/cluster/Entity"
import type * as Sharding from "effect/cluster/Sharding"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as PrimaryKey from "effect/PrimaryKey"
import type * as ChildProcess from "effect/process/ChildProcess"
import * as Rpc from "effect/rpc/Rpc"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/session.js"

/**
 * One operation of a session: its journal `key` (at most 255 characters, unique across the fleet: it is also the
 * primary key of the persisted message, so sending the same key twice is one operation with one reply), its `kind`
 * (which recovery decision applies) and its JSON `payload`.
 *
 * @example
 * ```ts
 * import { ExtensionSession } from "@lifeline/fleet"
 *
 * const operation = new ExtensionSession.Operation({ key: "session-7/turn-3", kind: "llm", payload: { text: "hi" } })
 * ```
 *
 * @since 0.1.0
 * @category schemas
 */
export class Operation extends Schema.Class<Operation>("@lifeline/fleet/Operation")({
  key: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(255)),
  kind: Schema.String,
  payload: Schema.Json
}) {
  /** The journal key: the cluster stores one message, and one reply, per key. */
  [PrimaryKey.symbol](): string {
    return this.key
  }
}

/**
 * The operation failed: its handler failed (`error` is what the journal recorded), or it was interrupted by the
 * death of a runner and the recovery decision of its kind was to fail it (`interrupted`: the journal holds an
 * `InterruptedByCrash`; send it again under a new key to retry), or the key belongs to another session.
 *
 * @since 0.1.0
 * @category errors
 */
export class OperationFailed extends Schema.TaggedError<OperationFailed>("@lifeline/fleet/OperationFailed")(
  "OperationFailed",
  {
    key: Schema.String,
    kind: Schema.String,
    reason: Schema.String,
    interrupted: Schema.Boolean,
    error: Schema.optional(Schema.Json)
  }
) {
  override get message(): string {
    return `${this.kind} ${this.key} failed${this.interrupted ? " (interrupted)" : ""}: ${this.reason}`
  }
}

/**
 * The RPC of an operation: persisted (it outlives the runner that runs it, and the one that sent it), deduplicated
 * by its key, answered with the operation's JSON result.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Run = Rpc.make("Run", { payload: Operation, success: Schema.Json, error: OperationFailed }).annotate(
  ClusterSchema.Persisted,
  true
)

/**
 * Ends the session's keep-alive: the entity stops once idle for `maxIdleTime`, and its child with it.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Close = Rpc.make("Close")

/**
 * The entity.
 *
 * @since 0.1.0
 * @category models
 */
export const ExtensionSession = Entity.make("ExtensionSession", [Run, Close])

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
   * one session at once. Its `ttl` (default 30 s) bounds how long a new runner waits for a dead runner's claim:
   * keep it near the shard-lock expiry. Default ttl here: 10 seconds.
   */
  readonly claim?: JournalClaim.ClaimOptions | undefined
  /** How often a runner retries a claim that another (dead) runner still holds. Default 250 ms. */
  readonly claimRetryInterval?: Duration.Input | undefined
  /** How many operations of one session run at once. Default 1: in order. */
  readonly concurrency?: number | "unbounded" | undefined
  /** How long a closed session stays idle before it stops. Default 1 minute. */
  readonly maxIdleTime?: Duration.Input | undefined
  /** The child's stop sequence, when the session stops or moves. */
  readonly stop?: NodeChildProcess.StopOptions | undefined
  readonly shutdown?: ((peer: Peer.Peer<Serves, Calls>) => Effect.Effect<unknown, unknown>) | undefined
}

/**
 * The journal owner of a session's operations: `fleet/session/<sessionId>`.
 *
 * @example
 * ```ts
 * import { ExtensionSession } from "@lifeline/fleet"
 *
 * ExtensionSession.owner("s-1") // "fleet/session/s-1"
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const owner = (sessionId: string): string => `fleet/session/${sessionId}`

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
 * waits for the same reply instead of running it twice.
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
  | ClusterError.MailboxFull
  | ClusterError.AlreadyProcessingMessage
  | ClusterError.PersistenceError
  | ClusterError.EntityNotAssignedToRunner,
  Sharding.Sharding
> = internal.close
