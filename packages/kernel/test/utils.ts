import { Framing } from "@lifeline/jsonrpc"
import type { Transport } from "@lifeline/kernel"
import { Effect, Queue, Stream } from "effect"
import type { Scope } from "effect"

/** The other end of a transport, driven by hand: send any message or raw bytes, read whatever arrives. */
export interface Raw {
  readonly send: (message: unknown) => Effect.Effect<void, Transport.TransportError>
  readonly sendBytes: (bytes: Uint8Array | string) => Effect.Effect<void, Transport.TransportError>
  readonly next: Effect.Effect<any>
  readonly received: Queue.Queue<any>
}

export const makeRaw = (
  transport: Transport.Transport.Service
): Effect.Effect<Raw, never, Scope.Scope> =>
  Effect.gen(function*() {
    const received = yield* Queue.unbounded<any>()
    yield* transport.incoming.pipe(
      Framing.decode(Framing.contentLength),
      Stream.runForEach((body) => Queue.offer(received, JSON.parse(new TextDecoder().decode(body)))),
      Effect.ignore,
      Effect.forkScoped
    )
    const sendBytes = (bytes: Uint8Array | string) =>
      transport.send([typeof bytes === "string" ? new TextEncoder().encode(bytes) : bytes])
    return {
      send: (message) => transport.send([Framing.contentLength.encodeString(JSON.stringify(message))]),
      sendBytes,
      next: Queue.take(received),
      received
    }
  })

/** Lets the other fibers run until `condition` holds; fails the test instead of hanging. */
export const eventually = (condition: Effect.Effect<boolean>, what = "condition") =>
  Effect.gen(function*() {
    for (let i = 0; i < 10_000; i++) {
      if (yield* condition) return
      yield* Effect.yieldNow()
    }
    return yield* Effect.dieMessage(`never reached: ${what}`)
  })
