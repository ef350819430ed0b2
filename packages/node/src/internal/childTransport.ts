/**
 * The child's stdin and stdout as the kernel's `Transport`.
 *
 * @internal
 */
import * as Transport from "@lifeline/kernel/Transport"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { Handle } from "./childHandle.js"
import { describeFailure } from "./streamWriter.js"

/**
 * The transport over `handle`. At the end of stdout it waits (at most `exitGrace`) for `afterExit`, the exit handled,
 * so that pending calls fail with `PeerExited` rather than with the plainer "transport closed" of a stream that just
 * ended.
 *
 * @internal
 */
export const makeTransport = (
  handle: Handle,
  afterExit: Deferred.Deferred<void>,
  exitGrace: Duration.Duration
): Transport.Transport.Service => ({
  incoming: Stream.concat(
    handle.stdout,
    Stream.fromEffectDrain(Effect.timeoutOption(Deferred.await(afterExit), exitGrace))
  ),
  send: (chunks) =>
    Effect.mapError(handle.stdin.write(chunks), (failure) =>
      new Transport.TransportError({
        reason: failure._tag === "Closed" ? "Closed" : "Write",
        message: `writing to the child's stdin failed: ${describeFailure(failure)}`,
        ...(failure._tag === "Failed" ? { cause: failure.error } : {})
      })),
  end: handle.stdin.end,
  unsafeTrySend: handle.stdin.trySend
})
