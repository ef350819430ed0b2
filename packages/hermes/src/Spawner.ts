/**
 * How the extension host starts an extension: a port the host is written against. `@lifeline/node` (wired in the
 * examples) implements it with child processes; `TestSpawner` runs extensions in-process over a `TestTransport`.
 *
 * @since 0.1.0
 */
import type * as Transport from "@lifeline/kernel/Transport"
import type * as KernelProcess from "@lifeline/process/Process"
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
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
  readonly exit: Effect.Effect<KernelProcess.ExitStatus>
  /**
   * Sends a signal (to the process group where the spawner makes one); does not wait for the exit. The host's stop
   * sequence (`StopSequence`, over this process) is what sends them.
   */
  readonly kill: (signal: KernelProcess.Signal) => Effect.Effect<void>
  /** The last lines it wrote to stderr. */
  readonly stderrTail: Effect.Effect<ReadonlyArray<string>>
}

/**
 * The spawner. `spawn` starts the process in the current Scope, or fails with the kernel's `Process.SpawnError`;
 * closing the Scope makes sure it is gone (SIGKILL if it is still running), since the host's stop sequence has already
 * asked it politely by then.
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
    readonly spawn: (spec: Spec) => Effect.Effect<Process, KernelProcess.SpawnError, Scope.Scope>
  }
}
