/**
 * An operating-system process as every host sees it, whatever spawns it: how it ended, the signals a host sends it,
 * and why it could not be started. Plain data: no Node here.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * How a process ended: an exit code, or the signal that killed it (then `exitCode` is null). `PeerExited` carries the
 * same two fields.
 *
 * @example
 * ```ts
 * import type { Process } from "@lifeline/process"
 *
 * const clean: Process.ExitStatus = { exitCode: 0, signal: null }
 * const killed: Process.ExitStatus = { exitCode: null, signal: "SIGKILL" }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface ExitStatus {
  readonly exitCode: number | null
  /** The name of the signal (`"SIGTERM"`, `"SIGKILL"`, `"SIGSEGV"`, ...), or null. */
  readonly signal: string | null
}

/**
 * The signals a host sends in the stop sequence: SIGTERM asks, SIGKILL forces. On POSIX both go to the process group.
 *
 * @since 0.1.0
 * @category models
 */
export type Signal = "SIGTERM" | "SIGKILL"

/**
 * Whether an exit was clean: code 0 and no signal.
 *
 * @example
 * ```ts
 * import { Process } from "@lifeline/process"
 *
 * Process.isSuccess({ exitCode: 0, signal: null }) // true
 * Process.isSuccess({ exitCode: null, signal: "SIGTERM" }) // false
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const isSuccess = (status: ExitStatus): boolean => status.exitCode === 0 && status.signal === null

/**
 * How an exit reads in a log line: `code 3` or `signal SIGKILL`.
 *
 * @since 0.1.0
 * @category models
 */
export const describe = (status: ExitStatus): string =>
  status.signal === null ? `code ${status.exitCode}` : `signal ${status.signal}`

/**
 * A process could not be started. `Unsupported`: the command cannot be run as given (a pipeline, a shell command with
 * arguments); `Unrecorded`: the journal failed to record it, so it was killed before anything talked to it (`cause`
 * is the `JournalError`).
 *
 * @example
 * ```ts
 * import { Process } from "@lifeline/process"
 *
 * const error = new Process.SpawnError({ reason: "NotFound", command: "hl7-extension", detail: "spawn ENOENT" })
 * error.message // "cannot spawn hl7-extension: spawn ENOENT"
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class SpawnError extends Schema.TaggedError<SpawnError>("@lifeline/process/SpawnError")("SpawnError", {
  reason: Schema.Literals(["NotFound", "PermissionDenied", "BadDirectory", "Unsupported", "Unrecorded", "Unknown"]),
  command: Schema.String,
  detail: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {
  override get message(): string {
    return `cannot spawn ${this.command}: ${this.detail}`
  }
}
