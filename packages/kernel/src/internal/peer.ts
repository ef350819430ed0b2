/**
 * The peer's engine, assembled: one state record (`peer/state.ts`) and the parts that work on it, each in a module of
 * its own: the Schema codecs (`peer/codecs.ts`), the writer (`peer/writer.ts`), outbound calls with their timer
 * (`peer/outbound.ts`), inbound dispatch (`peer/inbound.ts`), the reader (`peer/reader.ts`) and teardown
 * (`peer/teardown.ts`). This module starts the three fibers (writer, timer, reader) in the peer's Scope and registers
 * its finalizer.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Method from "../Method.js"
import type * as Peer from "../Peer.js"
import { peerClosed } from "./peer/errors.js"
import * as Inbound from "./peer/inbound.js"
import * as Outbound from "./peer/outbound.js"
import * as Reader from "./peer/reader.js"
import * as State from "./peer/state.js"
import * as Teardown from "./peer/teardown.js"
import * as Writer from "./peer/writer.js"

/** @internal */
export const make = Effect.fnUntraced(function*<Serves extends Method.Any, Calls extends Method.Any, R>(
  options: Peer.Options<Serves, Calls, R>
): Effect.fn.Return<Peer.Peer<Serves, Calls>, never, Scope.Scope | R> {
  const s = yield* State.make(options)

  yield* Effect.forkScoped(
    Writer.run(s, (error) =>
      Effect.andThen(
        Effect.logWarning("writing to the peer failed", error),
        Outbound.lose(s, peerClosed("TransportFailed", error.message))
      ))
  )
  yield* Effect.forkScoped(Outbound.timer(s))
  yield* Effect.forkScoped(Reader.run(s))

  const flush = Writer.flush(s)
  const close = Teardown.close(s, flush)
  yield* Effect.addFinalizer(Teardown.onScopeClose(close))

  const peer: Peer.Peer<Serves, Calls> = {
    protocol: options.protocol,
    call: Outbound.call(s) as any,
    notify: Outbound.notify(s) as any,
    callUntyped: Outbound.callUntyped(s),
    notifyUntyped: Outbound.notifyUntyped(s),
    stats: Effect.sync(() => State.snapshot(s)),
    unsafeStats: () => State.snapshot(s),
    closed: Deferred.await(s.closed),
    isClosed: Effect.sync(() => s.disconnect !== undefined),
    awaitIdle: State.waitFor(() => State.isIdle(s), (waiter) => s.idleWaiters.push(waiter)),
    flush,
    failPending: (error) => Effect.sync(() => Outbound.failPending(s, error)),
    interruptHandlers: Inbound.interruptHandlers(s),
    refuseNew: (error) =>
      Effect.sync(() => {
        if (s.disconnect === undefined) s.disconnect = error
      }),
    close
  }
  State.register(peer, s)
  return peer
})
