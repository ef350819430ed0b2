/**
 * How the extension host starts an extension: a port the host is written against. `@lifeline/node` (wired in the
 * examples) implements it with child processes; `TestSpawner` runs extensions in-process over a `TestTransport`.
 *
 * @since 0.1.0
 */
import type * as Transport from "@lifeline/kernel/Transport"
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"

/**
 * What to start: a command line, extra environment variables and a working directory.
 *
 * @since 0.1.0
 * @category models
 */
export interface Spec {
  readonly command: string
  readonly args?: ReadonlyArray<string> | undefined
  readonly env?: { readonly [name: string]: string } | undefined
  readonly cwd?: string | undefined
}

/**
 * How a process ended: an exit code, or the signal that killed it.
 *
 * @since 0.1.0
 * @category models
 */
export interface ExitStatus {
  readonly code: number | null
  readonly signal: string | null
}

/**
 * A signal the host may send.
 *
 * @since 0.1.0
 * @category models
 */
export type Signal = "SIGTERM" | "SIGKILL"

/**
 * A started extension.
 *
 * @since 0.1.0
 * @category models
 */
export interface Process {
  readonly pid: number | undefined
  /** Its stdin and stdout. `end` closes stdin. */
  readonly transport: Transport.Transport.Service
  /** Completes when the process has exited, however it ended. */
  readonly exit: Effect.Effect<ExitStatus>
  /** Sends a signal; does not wait for the exit. */
  readonly kill: (signal: Signal) => Effect.Effect<void>
  /** The last lines it wrote to stderr. */
  readonly stderrTail: Effect.Effect<ReadonlyArray<string>>
}

/**
 * The process could not be started (no such executable, permission denied).
 *
 * @since 0.1.0
 * @category errors
 */
export class SpawnError extends Schema.TaggedError<SpawnError>("@lifeline/hermes/SpawnError")("SpawnError", {
  command: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `could not start ${this.command}: ${this.detail}`
  }
}

/**
 * The spawner. `spawn` starts the process in the current Scope; closing the Scope makes sure it is gone (SIGKILL if it
 * is still running), since the host has already asked it politely by then.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Spawner } from "@lifeline/hermes"
 *
 * const program = Effect.gen(function*() {
 *   const spawner = yield* Spawner.Spawner
 *   const process = yield* spawner.spawn({ command: "node", args: ["extension.js"] })
 *   return yield* process.exit
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class Spawner extends Context.Service<Spawner, Spawner.Service>()("@lifeline/hermes/Spawner") {}

/**
 * @since 0.1.0
 */
export declare namespace Spawner {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    readonly spawn: (spec: Spec) => Effect.Effect<Process, SpawnError, Scope.Scope>
  }
}
