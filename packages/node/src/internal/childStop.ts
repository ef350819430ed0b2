/**
 * The child under the kernel's stop sequence: its options under the sequence's names, the steps the owner of the child
 * plugs in, and the child as the sequence's `Target`.
 *
 * @internal
 */
import type * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import type * as StopSequence from "@lifeline/process/StopSequence"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as NodeChildProcess from "../NodeChildProcess.js"
import type { Handle } from "./childHandle.js"

/**
 * The stop options with the names of the kernel's stop sequence: the deprecated aliases of `NodeChildProcess`
 * (`exitTimeout`, `terminateTimeout`, `killTimeout`) are read when the new name is not given.
 *
 * @internal
 */
export const stopOptionsOf = (
  options: NodeChildProcess.StopOptions | undefined
): Omit<StopSequence.Options, "policy" | "flushTimeout"> => ({
  shutdownTimeout: options?.shutdownTimeout,
  closeTimeout: options?.closeTimeout,
  exitGrace: options?.exitGrace ?? options?.exitTimeout,
  killGrace: options?.killGrace ?? options?.terminateTimeout,
  verifyTimeout: options?.verifyTimeout ?? options?.killTimeout,
  killOnShutdownTimeout: options?.killOnShutdownTimeout
})

/**
 * The steps the owner of the child plugs in: the protocol's shutdown request, and how the conversation closes (under
 * its policy, or fail-fast) before the input ends; and what the close step's bound derives from.
 *
 * @internal
 */
export interface StopSteps {
  shutdown: Effect.Effect<unknown, unknown> | undefined
  close: Effect.Effect<unknown> | undefined
  closeNow: Effect.Effect<unknown> | undefined
  policy: ShutdownPolicy.Policy | undefined
  flushTimeout: Duration.Input | undefined
}

/**
 * The child as the kernel's stop sequence sees it: signals go to its process group (POSIX), and the group counts as
 * alive while a live member is left in it.
 *
 * @internal
 */
export const targetOf = (handle: Handle): StopSequence.Target => ({
  exit: handle.exit,
  exitStatus: Effect.sync(() => Option.fromUndefinedOr(handle.unsafeExitStatus())),
  signal: (signal) => Effect.sync(() => handle.unsafeSignal(signal)),
  groupAlive: Effect.sync(() => handle.unsafeGroupAlive()),
  endInput: handle.stdin.end
})
