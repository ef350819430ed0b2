/**
 * Every frame a peer sends goes out here: requests, notifications, answers. One writer fiber takes what is queued, up
 * to 256 frames, into one `transport.send`; a bounded queue pushes back on senders (backpressure), and frames that
 * find it full wait in `overflow`, in order. While the writer is parked, a frame may go straight to the transport
 * (`unsafeTrySend`).
 *
 * @internal
 */
import * as Message from "@lifeline/jsonrpc/Message"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import type * as Transport from "../../Transport.js"
import { type State, waitFor, type Waiting } from "./state.js"

/** Frames waiting in the outbound queue. */
const queued = (s: State): number => Queue.sizeUnsafe(s.outbound)

/*
 * `overflow`: frames that found the outbound queue full (or other frames still waiting there), oldest first. The writer
 * moves them into the queue as room frees up, in order, and skips the ones that ended meanwhile (a call timed out,
 * interrupted or failed by a disconnect; a sender interrupted). While anything waits there, no frame goes ahead of it
 * (see `offerNow`): frames leave in the order they were issued.
 */
const isLive = (waiting: Waiting): boolean =>
  waiting.call === undefined ? waiting.wake !== undefined : waiting.call.live

const refill = (s: State): void => {
  const overflow = s.overflow
  let i = 0
  let woken: Array<() => void> | undefined
  while (i < overflow.length) {
    const waiting = overflow[i]
    if (isLive(waiting)) {
      if (!Queue.offerUnsafe(s.outbound, waiting.frame)) break
      if (waiting.call !== undefined) waiting.call.enqueued = true
      else {
        ;(woken ??= []).push(waiting.wake!)
        waiting.wake = undefined
      }
    }
    i++
  }
  if (i > 0) s.overflow = overflow.slice(i)
  // A woken sender runs at once, in this stack, and may queue more or look at `overflow` (a flush): it is woken
  // only once `overflow` holds what is still waiting.
  if (woken !== undefined) { for (const wake of woken) wake() }
}

const isFlushed = (s: State): boolean => {
  if (s.overflow.length > 0) s.overflow = s.overflow.filter(isLive)
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
const handOver = (s: State, frame: Uint8Array): boolean => {
  if (s.parkedWriter !== undefined && s.trySend !== undefined && s.trySend(frame)) return true
  if (!Queue.offerUnsafe(s.outbound, frame)) return false
  wakeWriter(s)
  return true
}

/**
 * `handOver`, but never ahead of a frame that waits in `overflow`.
 *
 * @internal
 */
export const offerNow = (s: State, frame: Uint8Array): boolean => s.overflow.length === 0 && handOver(s, frame)

/** Queues a frame, waiting while the queue is full: this is where a slow reader pushes back. */
const enqueue = (s: State, frame: Uint8Array): Effect.Effect<void> =>
  offerNow(s, frame) ? Effect.void : Effect.callback<void>((resume) => {
    const waiting: Waiting = { frame, call: undefined, wake: () => resume(Effect.void) }
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
  return enqueue(s, frame.success)
}

/**
 * For finalizers and observers: never waits. A full queue means the other side is not reading, so the frame would not
 * help.
 *
 * @internal
 */
export const unsafeWrite = (s: State, message: Message.Message): void => {
  const frame = frameOf(s, message)
  // A cancellation or a -32800 answer may pass frames waiting in `overflow`: it concerns a request already sent.
  if (Result.isSuccess(frame)) handOver(s, frame.success)
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
      s.writing = true
      yield* s.transport.send(frames)
      s.writing = false
      wakeFlushed(s)
    }
  }).pipe(
    Effect.catch(lost),
    Effect.ensuring(Effect.sync(() => {
      s.writing = false
      // Nothing will be written any more: release whoever waits for a flush.
      const waiters = s.flushWaiters
      s.flushWaiters = []
      for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
    }))
  )
}
