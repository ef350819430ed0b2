/**
 * An in-memory pair of linked transports for tests: what one side sends, the other side's `incoming` receives. Each
 * direction is a `Link` that the test controls to inject faults: latency, lost or re-split chunks, garbage, a closed
 * or failed connection, and a reader that stalls. `serve` puts a peer that serves a protocol on the far end of a pair,
 * in one line.
 *
 * @since 0.1.0
 */
import type * as Method from "@lifeline/kernel/Method"
import * as Peer from "@lifeline/kernel/Peer"
import type * as Protocol from "@lifeline/kernel/Protocol"
import * as Transport from "@lifeline/kernel/Transport"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Latch from "effect/Latch"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import * as HandlerWatch from "./internal/handlerWatch.js"

/**
 * Two transports wired to each other, and the two links between them. `leftToRight` carries what `left` sends to
 * `right.incoming`; `rightToLeft` the other way.
 *
 * @example
 * ```ts
 * import { Effect, Stream } from "effect"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const program = Effect.gen(function*() {
 *   const { left, right } = yield* TestTransport.makePair()
 *   yield* left.send([new TextEncoder().encode("hello")])
 *   yield* left.end
 *   return yield* Stream.runCollect(right.incoming) // one chunk: "hello"
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Pair {
  readonly left: Transport.Transport.Service
  readonly right: Transport.Transport.Service
  readonly leftToRight: Link
  readonly rightToLeft: Link
}

/**
 * One direction of a pair, driven by the test. A chunk is one buffer of a `send` call; the receiver gets each chunk as
 * it was sent (unless `rechunk` says otherwise), in order.
 *
 * The link holds at most `capacity` chunks that were sent but not yet handed to the receiver's `incoming`; while it is
 * full, `send` suspends. `delay` and `drop` apply to the chunks sent after they are set; `rechunk` and `pause` to what
 * is delivered after they are set.
 *
 * @example
 * ```ts
 * import { Effect, Stream } from "effect"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const program = Effect.gen(function*() {
 *   const { left, leftToRight, right } = yield* TestTransport.makePair()
 *   yield* leftToRight.rechunk([1]) // the decoder must cope with one byte at a time
 *   yield* leftToRight.drop(1) // the first message is lost
 *   yield* left.send([new TextEncoder().encode("lost")])
 *   yield* left.send([new TextEncoder().encode("ok")])
 *   yield* leftToRight.close // as if the sender crashed
 *   return yield* Stream.runCollect(right.incoming) // "o", "k", then the end
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Link {
  /**
   * Every chunk sent from now on is delivered `duration` after it was sent, on the `Clock` (so `TestClock.adjust`
   * releases it). Order is kept: a chunk never overtakes one sent before it, even if the delay was lowered in between.
   * `send` does not wait for the delay; the link's capacity still applies.
   */
  readonly delay: (duration: Duration.Input) => Effect.Effect<void>
  /**
   * The next `count` chunks sent are lost: `send` succeeds and they appear in `sent`, but never arrive. Replaces an
   * earlier count that is not used up; `drop(0)` cancels it. A count that is not a non-negative integer is a defect.
   */
  readonly drop: (count: number) => Effect.Effect<void>
  /**
   * Delivers the bytes in chunks of these sizes, cycled: `[1]` is one byte at a time, `[3, 7, 1]` repeats 3, 7, 1.
   * Bytes that have already arrived are merged across the boundaries of sent chunks, so a frame can end in the middle
   * of a chunk; bytes are never held back waiting for more, so a chunk can be shorter than its size. `[]` restores the
   * default (each sent chunk as it is). A size that is not a positive integer is a defect.
   */
  readonly rechunk: (sizes: ReadonlyArray<number>) => Effect.Effect<void>
  /**
   * Puts raw bytes on the link, as if the sender had written them: after what was already sent, without the link's
   * delay, not dropped, not counted against the capacity and not recorded in `sent`. Ignored once the link is closed.
   */
  readonly injectGarbage: (bytes: Uint8Array | string) => Effect.Effect<void>
  /**
   * The sender's side goes away, as `end` or a crash would: the receiver's `incoming` ends after what was already
   * sent, and every later `send` (and one suspended on a full link) fails with `TransportError` reason `"Closed"`.
   * Idempotent, and the same as the sender calling `end`.
   */
  readonly close: Effect.Effect<void>
  /**
   * Like `close`, but the receiver's `incoming` fails with `TransportError` reason `"Read"` and this message, after
   * what was already sent. No-op if the link is already closed.
   */
  readonly fail: (message: string) => Effect.Effect<void>
  /** Stops delivering: the receiver's `incoming` waits, the link fills up, then `send` suspends. */
  readonly pause: Effect.Effect<void>
  /** Delivers again, what is buffered first. */
  readonly resume: Effect.Effect<void>
  /** Every chunk the sender sent (dropped ones too, injected garbage not), in order. The log is never cleared. */
  readonly sent: Effect.Effect<ReadonlyArray<Uint8Array>>
  /** How many sent chunks wait to be delivered (at most the capacity). */
  readonly buffered: Effect.Effect<number>
}

/**
 * Options for `makePair`.
 *
 * @example
 * ```ts
 * import { TestTransport } from "@lifeline/testing"
 *
 * // A tiny buffer, so a test reaches backpressure after two unread chunks.
 * const pair = TestTransport.makePair({ capacity: 2 })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface PairOptions {
  /** How many sent chunks a link holds before `send` suspends. A positive integer or `Infinity`; default 1024. */
  readonly capacity?: number | undefined
}

/**
 * Makes a linked pair of transports. Closing the Scope ends both directions at once: both `incoming` streams end
 * without delivering what is still buffered, pending and later sends fail with `TransportError` reason `"Closed"`,
 * and no fiber is left behind (the pair runs none of its own).
 *
 * `incoming` should be run once, like a real transport's. Runs share one reader: a run that starts after an earlier
 * one stopped continues where that one stopped (nothing is lost, so a test can read a few chunks, assert, and read
 * on), and concurrent runs split the chunks between them. Once `incoming` has ended or failed, every run ends or fails
 * the same way.
 *
 * @example
 * ```ts
 * import { Effect, Fiber, Stream } from "effect"
 * import { TestClock } from "effect/testing"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const program = Effect.gen(function*() {
 *   const { left, leftToRight, right } = yield* TestTransport.makePair({ capacity: 16 })
 *   yield* leftToRight.delay("1 second")
 *   const first = yield* right.incoming.pipe(Stream.take(1), Stream.runCollect, Effect.forkChild)
 *   yield* left.send([new TextEncoder().encode("late")])
 *   yield* TestClock.adjust("1 second")
 *   return yield* Fiber.join(first)
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makePair = (options?: PairOptions): Effect.Effect<Pair, never, Scope.Scope> =>
  Effect.gen(function*() {
    const capacity = options?.capacity ?? 1024
    if (!(Number.isInteger(capacity) || capacity === Number.POSITIVE_INFINITY) || capacity < 1) {
      return yield* Effect.die(
        new Error(`BUG: TestTransport capacity must be a positive integer or Infinity, got ${capacity}`)
      )
    }
    const leftToRight = yield* makeLink(capacity, "left to right")
    const rightToLeft = yield* makeLink(capacity, "right to left")
    yield* Effect.addFinalizer(() => Effect.andThen(leftToRight.terminate, rightToLeft.terminate))
    return {
      left: { incoming: rightToLeft.incoming, send: leftToRight.send, end: leftToRight.link.close },
      right: { incoming: leftToRight.incoming, send: rightToLeft.send, end: rightToLeft.link.close },
      leftToRight: leftToRight.link,
      rightToLeft: rightToLeft.link
    }
  })

type Item =
  | Data
  | { readonly _tag: "End" }
  | { readonly _tag: "Fail"; readonly error: Transport.TransportError }

interface Data {
  readonly _tag: "Data"
  readonly bytes: Uint8Array
  /** Clock time in milliseconds from which it may be delivered. */
  readonly at: number
  /** Holds a capacity permit until delivered (sent chunks do, injected garbage does not). */
  readonly counted: boolean
}

interface LinkInternal {
  readonly link: Link
  readonly send: (chunks: ReadonlyArray<Uint8Array>) => Effect.Effect<void, Transport.TransportError>
  readonly incoming: Stream.Stream<Uint8Array, Transport.TransportError>
  readonly terminate: Effect.Effect<void>
}

const encoder = new TextEncoder()

const concat = (parts: ReadonlyArray<Uint8Array>, length: number): Uint8Array => {
  if (parts.length === 1) return parts[0]
  const out = new Uint8Array(length)
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

const makeLink = (capacity: number, direction: string): Effect.Effect<LinkInternal> =>
  Effect.gen(function*() {
    // Chunks and the end marker travel in one FIFO, so an end or failure never overtakes data sent before it.
    const items = yield* Queue.unbounded<Item>()
    // One permit per chunk from `send` until the reader hands it over: the receiver's bounded buffer. Counting up to
    // the hand-over (not the take) keeps the bound exact while the reader holds a chunk it may not deliver yet.
    const permits = yield* Semaphore.make(capacity)
    // The buffers of one `send` stay contiguous when several fibers send at once.
    const sendLock = yield* Semaphore.make(1)
    const readLock = yield* Semaphore.make(1)
    const resumed = yield* Latch.make(true)
    const terminatedSignal = yield* Deferred.make<void>()

    let closed = false
    let terminated = false
    let paused = false
    let dropNext = 0
    let delayMillis = 0
    let sizes: ReadonlyArray<number> = []
    let nextSize = 0
    let buffered = 0
    const sent: Array<Uint8Array> = []
    // The reader's position lives here, not in a run, so a run interrupted in the middle of a chunk loses nothing.
    let head: Item | undefined
    let offset = 0
    let ended: Option.Option<Transport.TransportError> | undefined

    const closedError = () =>
      new Transport.TransportError({ reason: "Closed", message: `TestTransport: the ${direction} link is closed` })

    const closeWith = (last: Item): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (closed) return Effect.void
        closed = true
        Queue.offerUnsafe(items, last)
        // Wakes a send suspended on a full link; it sees `closed` and fails. Permits no longer matter after this.
        return permits.resize(Number.POSITIVE_INFINITY)
      })

    const sendOne = (chunk: Uint8Array): Effect.Effect<void, Transport.TransportError> =>
      Effect.suspend(() => {
        if (closed) return Effect.fail(closedError())
        if (dropNext > 0) {
          dropNext--
          sent.push(chunk.slice())
          return Effect.void
        }
        return Effect.uninterruptibleMask((restore) =>
          Effect.andThen(
            restore(permits.take(1)),
            Effect.clockWith((clock) => {
              // Synchronous from the check to the offer, so nothing lands behind the end marker.
              if (closed) return Effect.andThen(permits.release(1), Effect.fail(closedError()))
              // A copy: the sender may reuse its buffer once `send` returns, as it may with a real pipe.
              const bytes = chunk.slice()
              sent.push(bytes)
              if (bytes.length === 0) return Effect.asVoid(permits.release(1)) // a pipe never reads zero bytes
              buffered++
              Queue.offerUnsafe(items, {
                _tag: "Data",
                bytes,
                at: clock.currentTimeMillisUnsafe() + delayMillis,
                counted: true
              })
              return Effect.void
            })
          )
        )
      })

    const send = (chunks: ReadonlyArray<Uint8Array>): Effect.Effect<void, Transport.TransportError> =>
      Effect.suspend(() =>
        closed
          ? Effect.fail(closedError())
          : sendLock.withPermits(1)(Effect.forEach(chunks, sendOne, { discard: true }))
      )

    const untilTerminated = (self: Effect.Effect<void>): Effect.Effect<void> =>
      Effect.raceFirst(self, Deferred.await(terminatedSignal))

    // Hands over what the head allows. Runs uninterruptibly: a chunk taken off the link is either delivered or kept.
    const deliver: Effect.Effect<Uint8Array> = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const parts: Array<Uint8Array> = []
      let length = 0
      let released = 0
      const want = sizes.length === 0 ? Number.POSITIVE_INFINITY : sizes[nextSize]
      if (sizes.length > 0) nextSize = (nextSize + 1) % sizes.length
      while (length < want && head !== undefined && head._tag === "Data" && head.at <= now) {
        const n = Math.min(want - length, head.bytes.length - offset)
        parts.push(offset === 0 && n === head.bytes.length ? head.bytes : head.bytes.subarray(offset, offset + n))
        offset += n
        length += n
        if (offset === head.bytes.length) {
          if (head.counted) released++
          head = undefined
          offset = 0
          // Without rechunking each sent chunk is delivered alone; with it, what has arrived is merged.
          if (length < want && sizes.length > 0 && !paused) {
            head = Option.getOrUndefined(yield* Queue.poll(items))
          }
        }
      }
      if (released > 0) {
        buffered -= released
        yield* permits.release(released)
      }
      return concat(parts, length)
    })

    // One chunk per pull; `Cause.Done` ends the stream (`Stream.fromEffectRepeat`).
    const pull: Effect.Effect<Uint8Array, Transport.TransportError | Cause.Done> = Effect.gen(function*() {
      for (;;) {
        if (terminated) return yield* Cause.done()
        if (ended !== undefined) return yield* Option.match(ended, { onNone: () => Cause.done(), onSome: Effect.fail })
        if (head === undefined) {
          yield* Effect.uninterruptibleMask((restore) =>
            Effect.flatMap(restore(Queue.take(items)), (item) =>
              Effect.sync(() => {
                head = item
                offset = 0
              }))
          )
          continue
        }
        if (head._tag !== "Data") {
          ended = head._tag === "End" ? Option.none() : Option.some(head.error)
          head = undefined
          continue
        }
        const wait = head.at - (yield* Clock.currentTimeMillis)
        if (wait > 0) {
          yield* untilTerminated(Number.isFinite(wait) ? Effect.sleep(Duration.millis(wait)) : Effect.never)
          continue
        }
        if (paused) {
          yield* resumed.await
          continue
        }
        return yield* Effect.uninterruptible(deliver)
      }
    })

    const link: Link = {
      delay: (duration) =>
        Effect.sync(() => {
          delayMillis = Duration.toMillis(Duration.fromInputUnsafe(duration))
        }),
      drop: (count) =>
        Number.isInteger(count) && count >= 0
          ? Effect.sync(() => {
            dropNext = count
          })
          : Effect.die(new Error(`BUG: TestTransport drop count must be a non-negative integer, got ${count}`)),
      rechunk: (next) =>
        next.every((size) => Number.isInteger(size) && size > 0)
          ? Effect.sync(() => {
            sizes = [...next]
            nextSize = 0
          })
          : Effect.die(
            new Error(`BUG: TestTransport rechunk sizes must be positive integers, got [${next.join(", ")}]`)
          ),
      injectGarbage: (garbage) =>
        Effect.clockWith((clock) =>
          Effect.sync(() => {
            const bytes = typeof garbage === "string" ? encoder.encode(garbage) : garbage.slice()
            if (closed || bytes.length === 0) return
            Queue.offerUnsafe(items, { _tag: "Data", bytes, at: clock.currentTimeMillisUnsafe(), counted: false })
          })
        ),
      close: closeWith({ _tag: "End" }),
      fail: (message) => closeWith({ _tag: "Fail", error: new Transport.TransportError({ reason: "Read", message }) }),
      pause: Effect.suspend(() => {
        paused = true
        return resumed.close
      }),
      resume: Effect.suspend(() => {
        paused = false
        return resumed.open
      }),
      sent: Effect.sync(() => sent.slice()),
      buffered: Effect.sync(() => buffered)
    }

    const terminate = Effect.suspend(() => {
      terminated = true
      return closeWith({ _tag: "End" }).pipe(
        Effect.andThen(resumed.open),
        Effect.andThen(Deferred.succeed(terminatedSignal, void 0))
      )
    })

    return {
      link,
      send,
      incoming: Stream.fromEffectRepeat(readLock.withPermits(1)(pull)),
      terminate
    }
  })

/**
 * A far end that serves a protocol, made by {@link serve}: the near end's `transport`, the far end's `peer`, the pair
 * between them (`pair.left` is the near end, `pair.leftToRight` what it sends), for faults, and two waits that tell a
 * test where the far end is, so that it moves the `TestClock` only once the far end's handler is really running.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Method, Protocol } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const Ping = Method.request("ping", { params: Schema.Struct({}), result: Schema.String })
 *
 * const program = Effect.gen(function*() {
 *   const served = yield* TestTransport.serve(Protocol.make({ serves: [Ping] }), { ping: () => Effect.succeed("pong") })
 *   yield* served.pair.leftToRight.delay("100 millis") // what the code under test sends arrives late
 *   return served.transport
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Served<Serves extends Method.Any, Calls extends Method.Any> extends FarEnd.Service<Serves, Calls> {
  readonly transport: Transport.Transport.Service
}

/**
 * The far end that {@link layerServe} provides beside the `Transport`, for tests that compose layers: its peer, its
 * pair and the waits of {@link Served}.
 *
 * A request crosses several fibers before the far end's handler runs (the near end's writer, the link, the far end's
 * reader, the handler's own fiber). A test that forks a call and moves the clock at once moves it before the handler
 * has started, so a sleep in the handler starts late, or never ends. Wait with `started` first:
 *
 * @example
 * ```ts
 * import { Effect, Fiber, Layer, Schema } from "effect"
 * import { TestClock } from "effect/testing"
 * import { Method, Peer, Protocol, Transport } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const Slow = Method.request("slow", { params: Schema.Struct({}), result: Schema.String })
 * const Server = Protocol.make({ serves: [Slow] })
 *
 * const test = Effect.gen(function*() {
 *   const client = yield* Peer.make({ protocol: Protocol.flip(Server), transport: yield* Transport.Transport, handlers: {} })
 *   const farEnd = yield* TestTransport.FarEnd
 *   const call = yield* Effect.forkChild(client.call(Slow, {}))
 *   yield* farEnd.started("slow") // the handler's sleep is now on the clock
 *   yield* TestClock.adjust("2 seconds")
 *   return yield* Fiber.join(call) // "done"
 * }).pipe(
 *   Effect.provide(TestTransport.layerServe(Server, { slow: () => Effect.as(Effect.sleep("2 seconds"), "done") })),
 *   Effect.scoped
 * )
 * ```
 *
 * @since 0.2.0
 * @category testing
 */
export class FarEnd extends Context.Service<FarEnd, FarEnd.Service<Method.Any, Method.Any>>()(
  "@lifeline/testing/TestTransport/FarEnd"
) {}

/**
 * @since 0.2.0
 */
export declare namespace FarEnd {
  /**
   * @since 0.2.0
   * @category models
   */
  export interface Service<Serves extends Method.Any, Calls extends Method.Any> {
    readonly peer: Peer.Peer<Serves, Calls>
    readonly pair: Pair
    /**
     * Completes once the far end has started handling `count` (default 1) requests or notifications of `method`
     * since it was made, and its handler has reached its first wait (a sleep is then on the clock).
     */
    readonly started: (method: Serves["name"], count?: number) => Effect.Effect<void>
    /** Completes when no handler of the far end is running (at once if none ever started). */
    readonly idle: Effect.Effect<void>
  }
}

/**
 * Options of {@link serve}: the pair's, and the far end peer's (its framing must be the near end's; default
 * Content-Length, as for every peer).
 *
 * @example
 * ```ts
 * import { Framing } from "@lifeline/jsonrpc"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const options: TestTransport.ServeOptions<never, never, never> = { framing: Framing.ndjson, capacity: 16 }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface ServeOptions<Serves extends Method.Any, Calls extends Method.Any, R>
  extends Omit<Peer.Options<Serves, Calls, R>, "protocol" | "handlers" | "transport">, PairOptions
{}

/**
 * The far end in one line: a `Peer` that serves `protocol` with `handlers` on the right of a pair, and the left
 * transport for the code under test. The far end's handlers run on the test's `Clock` (`TestClock` drives them) and
 * may call back through `peer`. Both live in the current Scope.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Method, Peer, Protocol } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 * const Server = Protocol.make({ serves: [Add] })
 *
 * const program = Effect.gen(function*() {
 *   const { transport } = yield* TestTransport.serve(Server, { add: ([a, b]) => Effect.succeed(a + b) })
 *   const client = yield* Peer.make({ protocol: Protocol.flip(Server), transport, handlers: {} })
 *   return yield* client.call(Add, [1, 2]) // 3
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category testing
 */
export const serve = <Serves extends Method.Any, Calls extends Method.Any, R = never>(
  protocol: Protocol.Protocol<Serves, Calls>,
  handlers: Peer.Handlers<Serves, R>,
  options?: ServeOptions<Serves, Calls, R>
): Effect.Effect<Served<Serves, Calls>, never, Scope.Scope | R> =>
  Effect.gen(function*() {
    const { capacity, ...peerOptions } = options ?? {}
    const pair = yield* makePair(capacity === undefined ? undefined : { capacity })
    const watch = HandlerWatch.make()
    const peer = yield* Peer.make<Serves, Calls, R>({
      ...peerOptions,
      protocol,
      handlers: watch.wrap(handlers),
      transport: pair.right
    })
    return {
      transport: pair.left,
      peer,
      pair,
      started: (method, count) => watch.started(method, count ?? 1),
      idle: watch.idle
    }
  })

/**
 * {@link serve} as the `Transport` layer of the code under test: swap it in where the real one (a child process,
 * stdio, a socket) is provided. It also provides the {@link FarEnd}, so a test can wait for the far end's handlers.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Method, Protocol } from "@lifeline/kernel"
 * import { TestTransport } from "@lifeline/testing"
 *
 * const Add = Method.request("add", { params: Schema.Tuple([Schema.Number, Schema.Number]), result: Schema.Number })
 *
 * // Layer<Transport.Transport>: the other side answers `add`.
 * const TransportTest = TestTransport.layerServe(Protocol.make({ serves: [Add] }), {
 *   add: ([a, b]) => Effect.succeed(a + b)
 * })
 * ```
 *
 * @since 0.1.0
 * @category testing
 */
export const layerServe = <Serves extends Method.Any, Calls extends Method.Any, R = never>(
  protocol: Protocol.Protocol<Serves, Calls>,
  handlers: Peer.Handlers<Serves, R>,
  options?: ServeOptions<Serves, Calls, R>
): Layer.Layer<Transport.Transport | FarEnd, never, Exclude<R, Scope.Scope>> =>
  Layer.effectContext(
    Effect.map(serve(protocol, handlers, options), (served) =>
      Context.make(Transport.Transport, served.transport).pipe(
        Context.add(FarEnd, served as unknown as FarEnd.Service<Method.Any, Method.Any>)
      ))
  )
