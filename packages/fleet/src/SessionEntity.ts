/**
 * What the cluster knows of a session: the `ExtensionSession` entity, its two RPCs (`Run`, persisted, and `Close`),
 * the `Operation` it carries and the limits on session ids and keys. `ExtensionSession` re-exports all of it, with the
 * layer that runs the entity.
 *
 * @since 0.1.0
 */
import * as ClusterSchema from "effect/cluster/ClusterSchema"
import * as Entity from "effect/cluster/Entity"
import * as PrimaryKey from "effect/PrimaryKey"
import * as Rpc from "effect/rpc/Rpc"
import * as Schema from "effect/Schema"
import { ExtensionUnavailable, KeyReused, OperationFailed } from "./FleetError.js"
import { primaryKey } from "./internal/validate.js"

/**
 * One operation of a session: its journal `key` (at most {@link maxKeyLength} characters, unique across the fleet:
 * with a digest of the kind and payload it is the primary key of the persisted message, so sending the same operation
 * twice is one operation with one reply, and the same key with another kind or payload is refused with `KeyReused`),
 * its `kind` (which recovery decision applies) and its JSON `payload`.
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
  /**
   * The journal key and a digest of the kind and payload: the cluster stores one message, and one reply, per
   * operation; the same key with another kind or payload reaches the session, which refuses it (`KeyReused`).
   */
  [PrimaryKey.symbol](): string {
    return primaryKey(this.key, this.kind, this.payload)
  }
}

/**
 * The RPC of an operation: persisted (it outlives the runner that runs it, and the one that sent it), deduplicated
 * by its key, answered with the operation's JSON result. When its runner stops (or its shard moves), an operation
 * not started yet is left to the next runner, and one in flight gets `drainTimeout` to finish before it is left
 * unfinished in the journal for the next runner's recovery (`InterruptOnTermination`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const Run = Rpc.make("Run", {
  payload: Operation,
  success: Schema.Json,
  error: Schema.Union([OperationFailed, ExtensionUnavailable, KeyReused])
}).annotate(ClusterSchema.Persisted, true).annotate(ClusterSchema.InterruptOnTermination, true)

/**
 * The longest session id: the journal owner of its operations, `fleet/session/<id>`, is at most 255 characters.
 *
 * @since 0.1.0
 * @category models
 */
export const maxSessionIdLength = 241

/**
 * The longest operation key, and kind: 255 characters (the journal's limit).
 *
 * @since 0.1.0
 * @category models
 */
export const maxKeyLength = 255

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
