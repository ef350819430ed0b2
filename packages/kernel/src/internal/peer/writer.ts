/**
 * Every frame a peer sends goes out here: requests, notifications, answers. One writer fiber takes what is queued, up
 * to 256 frames, into one `transport.send`; a bounded queue pushes back on senders (backpressure), and frames that
 * find it full wait in `overflow`, in order. While the writer is parked, a frame may go straight to the transport
 * (`unsafeTrySend`). Answers to the other side's requests are counted, with their bytes, from the moment they are
 * handed to the writer until they are handed to the transport: that is what bounds the requests the reader admits
 * (`flow.ts`).
 *
 * @internal
 */
import * as Message from "@lifeline/jsonrpc/Message"
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import type * as Transport from "../../Transport.js"
import { type State, waitFor, type Waiting, wakeDrained } from "./state.js"

/** Frames waiting in the outbound queue. */
const queued = (s: State): number => Queue.sizeUnsafe(s.outbound)

// `overflow` (see `Waiting`): the writer moves its frames into the queue as room frees up, in order, and skips the
// ones that ended meanwhile. While anything waits there, no frame goes ahead of it (`offerNow`).
const isLive = (waiting: Waiting): boolean =>
  waiting.call === undefined ? waiting.wake !== undefined : waiting.call.live

/*
 * The answers count: up when an answer is queued or waits in `overflow`, down when the writer has handed it to the
 * transport or its sender gave up waiting. The outbound queue holds bare frames, so `queuedAnswerBytes` keeps, in
 * queue order, each queued frame's answer bytes (0 for any other frame): a store per frame, no record.
 */
const countAnswer = (s: State, bytes: number): void => {
  s.pendingAnswers++
  s.pendingAnswerBytes += bytes
}

const uncountAnswers = (s: State, answers: number, bytes: number): void => {
  s.pendingAnswers -= answers
  s.pendingAnswerBytes -= bytes
  wakeDrained(s)
}

/** Queues a frame, noting its answer bytes (0: not an answer) in the ring beside the queue. */
const offer = (s: State, frame: Uint8Array, answerBytes: number): boolean => {
  if (!Queue.offerUnsafe(s.outbound, frame)) return false
  if (s.queuedCount === s.queuedAnswerBytes.length) grow(s)
  const ring = s.queuedAnswerBytes
  let at = s.queuedHead + s.queuedCount
  if (at >= ring.length) at -= ring.length
  ring[at] = answerBytes
  s.queuedCount++
  return true
}

/** Doubles the ring, oldest entry first: it grows with the queue rather than starting at its (maybe large) capacity. */
const grow = (s: State): void => {
  const ring = s.queuedAnswerBytes
  const grown = new Float64Array(ring.length * 2)
  for (let i = 0; i < s.queuedCount; i++) grown[i] = ring[(s.queuedHead + i) % ring.length]
  s.queuedAnswerBytes = grown
  s.queuedHead = 0
}

/** Frames that left an overflow entry without being queued: an answer among them is no longer waiting. */
const dropped = (s: State, waiting: Waiting): void => {
  if (waiting.answerBytes > 0) uncountAnswers(s, 1, waiting.answerBytes)
}

const refill = (s: State): void => {
  const overflow = s.overflow
  let i = 0
  let woken: Array<() => void> | undefined
  while (i < overflow.length) {
    const waiting = overflow[i]
    if (isLive(waiting)) {
      if (!offer(s, waiting.frame, waiting.answerBytes)) break
      if (waiting.call !== undefined) waiting.call.enqueued = true
      else {
        ;(woken ??= []).push(waiting.wake!)
        waiting.wake = undefined
      }
    } else dropped(s, waiting)
    i++
  }
  if (i > 0) s.overflow = overflow.slice(i)
  // A woken sender runs at once, in this stack, and may queue more or look at `overflow` (a flush): it is woken
  // only once `overflow` holds what is still waiting.
  if (woken !== undefined) { for (const wake of woken) wake() }
}

const isFlushed = (s: State): boolean => {
  // Nothing will be written any more (the transport failed or was closed): there is nothing to wait for.
  if (s.writerEnded) return true
  if (s.overflow.length > 0) {
    s.overflow = s.overflow.filter((waiting) => {
      if (isLive(waiting)) return true
      dropped(s, waiting)
      return false
    })
  }
  return !s.writing && queued(s) === 0 && s.overflow.length === 0
}

const wakeFlushed = (s: State): void => {
  if (s.flushWaiters.length === 0 || !isFlushed(s)) return
  const waiters = s.flushWaiters
  s.flushWaiters = []
  for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
}

/** @internal */
export const frameOf = (s: State, message: Message.Message | ReadonlyArray<Message.Message>) =>
  Result.map(Message.stringify(message), s.framing.encodeString)

/*
 * The writer parks on its own callback rather than in `Queue.take`, which every round trip would go through twice
 * (both writers wake). It parks only when both the queue and `overflow` are empty, so a frame waiting for room never
 * finds it parked. A resumed fiber runs at once, in the stack that resumes it: the writer is resumed into
 * `Effect.yieldNow`, so it runs on the scheduler's next turn rather than inside whoever queued a frame, and takes every
 * frame queued meanwhile into one `send` (and the queue has room again for what comes after them).
 */

/** @internal */
export const wakeWriter = (s: State): void => {
  const resume = s.parkedWriter
  if (resume === undefined) return
  s.parkedWriter = undefined
  resume(Effect.yieldNow)
}

/**
 * Hands a frame on without waiting, if it can: straight to the transport while the writer is parked (so nothing of
 * ours is queued or being sent, and order holds), else into the queue for the writer.
 */
const handOver = (s: State, frame: Uint8Array, answerBytes: number): boolean => {
  if (s.parkedWriter !== undefined && s.trySend !== undefined && s.trySend(frame)) return true
  if (!offer(s, frame, answerBytes)) return false
  if (answerBytes > 0) countAnswer(s, answerBytes)
  wakeWriter(s)
  return true
}

/**
 * `handOver`, but never ahead of a frame that waits in `overflow`.
 *
 * @internal
 */
export const offerNow = (s: State, frame: Uint8Array, answerBytes: number): boolean =>
  s.overflow.length === 0 && handOver(s, frame, answerBytes)

/** Queues a frame, waiting while the queue is full: this is where a slow reader pushes back. */
const enqueue = (s: State, frame: Uint8Array, answerBytes: number): Effect.Effect<void> =>
  offerNow(s, frame, answerBytes) ? Effect.void : Effect.callback<void>((resume) => {
    const waiting: Waiting = { frame, call: undefined, answerBytes, wake: () => resume(Effect.void) }
    if (answerBytes > 0) countAnswer(s, answerBytes)
    s.overflow.push(waiting)
    wakeWriter(s)
    return Effect.sync(() => {
      waiting.wake = undefined
    })
  })

/**
 * Queues a message; the result is `Effect.void` when it was queued at once, so callers in a loop can skip it.
 *
 * @internal
 */
export const write = (s: State, message: Message.Message | ReadonlyArray<Message.Message>): Effect.Effect<void> => {
  const frame = frameOf(s, message)
  if (Result.isFailure(frame)) return Effect.logError("BUG: a message could not be serialised", frame.failure)
  return enqueue(s, frame.success, 0)
}

/**
 * Queues an answer to the other side's requests (one, or a batch's), counted until it is handed to the transport.
 *
 * @internal
 */
export const answer = (s: State, message: Message.Response | ReadonlyArray<Message.Response>): Effect.Effect<void> => {
  const frame = frameOf(s, message)
  if (Result.isFailure(frame)) return unserialisable(s, message, frame.failure)
  return enqueue(s, frame.success, frame.success.byteLength)
}

/**
 * An answer JSON cannot write (a `BigInt` or a cycle in a result its Schema let through): each request it answers
 * still gets an answer, -32603, and in a batch only the answers that cannot be written are replaced.
 */
const unserialisable = (
  s: State,
  message: Message.Response | ReadonlyArray<Message.Response>,
  error: RpcError.RpcError
): Effect.Effect<void> => {
  const internal = (response: Message.Response): Message.Response =>
    Message.failure(response.id, RpcError.RpcError.internalError(error.data))
  const replaced = isBatch(message)
    ? message.map((response) => Result.isSuccess(Message.stringify(response)) ? response : internal(response))
    : internal(message)
  const frame = frameOf(s, replaced)
  return Effect.andThen(
    Effect.logError("an answer could not be serialised: answered -32603 instead", error),
    Result.isFailure(frame)
      ? Effect.logError("BUG: a -32603 answer could not be serialised", frame.failure)
      : enqueue(s, frame.success, frame.success.byteLength)
  )
}

const isBatch = (
  message: Message.Response | ReadonlyArray<Message.Response>
): message is ReadonlyArray<Message.Response> => Array.isArray(message)

/**
 * For finalizers and observers: never waits. A full queue means the other side is not reading, so the frame would not
 * help.
 *
 * @internal
 */
export const unsafeWrite = (s: State, message: Message.Message): void => {
  const frame = frameOf(s, message)
  // A cancellation or a -32800 answer may pass frames waiting in `overflow`: it concerns a request already sent.
  if (Result.isSuccess(frame)) handOver(s, frame.success, 0)
}

/**
 * Completes when every queued frame has been handed to the transport.
 *
 * @internal
 */
export const flush = (s: State): Effect.Effect<void> =>
  waitFor(() => isFlushed(s), (waiter) => s.flushWaiters.push(waiter))

/**
 * The writer fiber's loop. A failed `send` ends it: `lost` then tells the rest of the peer that nothing more can be
 * written.
 *
 * @internal
 */
export const run = (
  s: State,
  lost: (error: Transport.TransportError) => Effect.Effect<void>
): Effect.Effect<void> => {
  const idle = Effect.callback<void>((resume) => {
    if (queued(s) > 0 || s.overflow.length > 0) return resume(Effect.void)
    s.parkedWriter = resume
    return Effect.sync(() => {
      s.parkedWriter = undefined
    })
  })
  return Effect.gen(function*() {
    while (true) {
      if (s.overflow.length > 0) refill(s)
      if (queued(s) === 0) {
        yield* idle
        continue
      }
      // At least one frame is queued, so this takes without waiting.
      const frames = yield* Queue.takeBetween(s.outbound, 1, 256)
      // The answers among them leave the count once the transport has them: until then they are in memory.
      const ring = s.queuedAnswerBytes
      let answers = 0
      let answerBytes = 0
      for (let i = 0; i < frames.length; i++) {
        const bytes = ring[s.queuedHead]
        if (bytes > 0) {
          answers++
          answerBytes += bytes
        }
        if (++s.queuedHead === ring.length) s.queuedHead = 0
      }
      s.queuedCount -= frames.length
      s.writing = true
      yield* s.transport.send(frames)
      s.writing = false
      if (answers > 0) uncountAnswers(s, answers, answerBytes)
      wakeFlushed(s)
    }
  }).pipe(
    Effect.catch(lost),
    Effect.ensuring(Effect.sync(() => {
      s.writing = false
      s.writerEnded = true
      // Nothing will be written any more: release whoever waits for a flush.
      const waiters = s.flushWaiters
      s.flushWaiters = []
      for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
    }))
  )
}
