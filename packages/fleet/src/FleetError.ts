/**
 * The errors of a fleet's operations, as the sender of an operation receives them (`ExtensionSession.run`'s error
 * channel; `Run`'s persisted error schema).
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

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
 * The session's extension is not there to run the operation, which never reached it (the journal records it
 * `Failed` with this error, and the same key is answered so again): its command could not be spawned (`SpawnFailed`:
 * e.g. no such file), or it exited and was started again `maxRestarts` times in a row without an operation
 * succeeding on it (`RestartBudgetSpent`, until the session restarts: closed and idle, or moved).
 *
 * @since 0.1.0
 * @category errors
 */
export class ExtensionUnavailable
  extends Schema.TaggedError<ExtensionUnavailable>("@lifeline/fleet/ExtensionUnavailable")("ExtensionUnavailable", {
    sessionId: Schema.String,
    reason: Schema.Literals(["SpawnFailed", "RestartBudgetSpent"]),
    detail: Schema.String
  })
{
  override get message(): string {
    return `the extension of session ${JSON.stringify(this.sessionId.slice(0, 100))} is unavailable (${this.reason}): ${
      this.detail.slice(0, 1000)
    }`
  }
}

/**
 * The key was used before for another operation: its stored `kind` or `payload` differs from this one. A key names
 * one operation; a byte-identical resend is answered from the journal, anything else under the same key is refused.
 *
 * @since 0.1.0
 * @category errors
 */
export class KeyReused extends Schema.TaggedError<KeyReused>("@lifeline/fleet/KeyReused")("KeyReused", {
  key: Schema.String,
  kind: Schema.String,
  storedKind: Schema.String
}) {
  override get message(): string {
    return `key ${JSON.stringify(this.key.slice(0, 100))} was used for another operation (kind ${
      JSON.stringify(this.storedKind.slice(0, 100))
    }, or another payload)`
  }
}

/**
 * The operation cannot be sent: its session id, key, kind or payload is out of bounds, and nothing was stored. Session
 * ids are 1 to `ExtensionSession.maxSessionIdLength` characters, keys and kinds 1 to `ExtensionSession.maxKeyLength`, all well-formed
 * Unicode without control characters; a payload at most 1 MiB of JSON (the journal's `maxPayloadBytes` default).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidOperation
  extends Schema.TaggedError<InvalidOperation>("@lifeline/fleet/InvalidOperation")("InvalidOperation", {
    field: Schema.Literals(["sessionId", "key", "kind", "payload"]),
    problem: Schema.String
  })
{
  override get message(): string {
    return `invalid ${this.field}: ${this.problem}`
  }
}
