import { Framing } from "@lifeline/jsonrpc"
import type { Transport } from "@lifeline/kernel"
import type { TestTransport } from "@lifeline/testing"
import { Effect, Option, Queue, Stream } from "effect"
import type { Exit, Fiber, Scope } from "effect"

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
      yield* Effect.yieldNow
    }
    return yield* Effect.die(new Error(`never reached: ${what}`))
  })

/** A fiber's exit if it has ended, without waiting: `fiber.pollUnsafe()` as an Effect. */
export const poll = <A, E>(fiber: Fiber.Fiber<A, E>): Effect.Effect<Option.Option<Exit.Exit<A, E>>> =>
  Effect.sync(() => Option.fromUndefinedOr(fiber.pollUnsafe()))

/** Lets the other fibers run: `Effect.yieldNow` once, then `n` times more. */
export const yieldTimes = (n: number): Effect.Effect<void> =>
  Effect.gen(function*() {
    for (let i = 0; i <= n; i++) yield* Effect.yieldNow
  })

/**
 * The body of every frame a link carried, in order, as text: what the receiving side read, byte for byte (decoded from
 * the link's `sent` log, dropped chunks included).
 */
export const wireBodies = (link: TestTransport.Link): Effect.Effect<Array<string>> =>
  Effect.map(link.sent, (chunks) => {
    const decoder = Framing.contentLength.unsafeMakeDecoder()
    const text = new TextDecoder()
    const bodies: Array<string> = []
    for (const chunk of chunks) {
      for (const frame of decoder.push(chunk).frames) bodies.push(text.decode(frame))
    }
    return bodies
  })

/** `wireBodies`, parsed. */
export const wire = (link: TestTransport.Link): Effect.Effect<Array<any>> =>
  Effect.map(wireBodies(link), (bodies) => bodies.map((body) => JSON.parse(body)))
