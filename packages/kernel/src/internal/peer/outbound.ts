/**
 * Outbound calls and notifications: the pending table, the one timer over a deadline heap that fails calls whose
 * timeout passed, answers matched by id, and the lost connection (`lose`; the end of every pending call at once is in
 * `detach.ts`). A call is an entry in the table with a resume callback, never a fiber of the peer's own: an Effect
 * caller parks on it (`awaitCall`), a Promise caller's callbacks are it (`PromiseClient`).
 *
 * @internal
 */
import * as Message from "@lifeline/jsonrpc/Message"
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Result from "effect/Result"
import type * as Tracer from "effect/Tracer"
import type * as Method from "../../Method.js"
import type * as Peer from "../../Peer.js"
import type * as PeerError from "../../PeerError.js"
import { shown } from "../untrustedText.js"
import { answerExit, type CallCodecs, codecsOf, notificationEncoderOf } from "./codecs.js"
import { failPending } from "./detach.js"
import { requestTimeout } from "./errors.js"
import { type CallExit, complete, type PendingCall, type State, wakeIdle, warnAboutPeer } from "./state.js"
import * as TraceContext from "./traceContext.js"
import { frameOf, offerNow, unsafeWrite, wakeWriter, write } from "./writer.js"

// A lost connection says how it was lost; a shutdown is best described by the lifecycle's current phase.
const refusal = (s: State): PeerError.Disconnect | undefined =>
  s.disconnect !== undefined && s.disconnect._tag !== "ShutdownError"
    ? s.disconnect
    : s.gate?.outbound() ?? s.disconnect

// -- timeouts ----------------------------------------------------------------------------------------------------

// One timer for every call's timeout: it sleeps (on the Clock, so TestClock drives it) until the earliest deadline,
// expires what is due, and is woken when a call with an earlier deadline arrives.
const schedule = (s: State, call: PendingCall): void => {
  s.deadlines.push(call)
  if (call.deadline < s.timerTarget && s.timerWake !== undefined) Deferred.doneUnsafe(s.timerWake, Exit.void)
}

/**
 * The call ended without an answer (timed out, or its caller gave up): forget it, and tell the other side when the
 * protocol has a way to.
 */
const abandon = (s: State, call: PendingCall, timedOut: boolean): void => {
  s.deadlines.remove(call)
  if (s.pending.get(call.id) !== call) return // answered, or failed by a disconnect
  s.pending.delete(call.id)
  s.tombstones.add(call.id)
  // The answer may already be on its way: if it arrives it meets the tombstone and is dropped and counted.
  const cancellation = s.cancellation
  // Sent while the transport is open: also during a drain, when new calls are refused but the peer still works on
  // (and should stop) what it was sent.
  if (cancellation !== undefined && call.enqueued && !s.tornDown) {
    const reason = timedOut ? `timed out after ${call.timeoutMillis} ms` : "cancelled by the caller"
    unsafeWrite(s, Message.notification(cancellation.method, cancellation.encode(call.id, reason)))
  }
  wakeIdle(s)
}

const expire = (s: State, now: number): void => {
  while (true) {
    const next = s.deadlines.peek()
    if (next === undefined || next.deadline > now) return
    s.deadlines.pop()
    s.stats.timedOut++
    abandon(s, next, true)
    complete(next, Exit.fail(requestTimeout(next.method, next.id, next.timeoutMillis)))
  }
}

/**
 * The timer fiber's loop.
 *
 * @internal
 */
export const timer = (s: State): Effect.Effect<never> =>
  Effect.gen(function*() {
    while (true) {
      const wake = Deferred.makeUnsafe<void>()
      s.timerWake = wake
      const next = s.deadlines.peek()
      s.timerTarget = next === undefined ? Infinity : next.deadline
      if (next === undefined) {
        yield* Deferred.await(wake)
      } else {
        const now = (yield* Clock.currentTimeMillis) - s.epoch
        if (next.deadline > now) {
          yield* Effect.raceFirst(Deferred.await(wake), Effect.sleep(Duration.millis(next.deadline - now)))
        }
      }
      expire(s, (yield* Clock.currentTimeMillis) - s.epoch)
    }
  })

// -- calls -------------------------------------------------------------------------------------------------------

/**
 * The caller stopped waiting while its call was pending (its fiber was interrupted, its signal aborted): end the call
 * (and tell the other side, if we can).
 *
 * @internal
 */
export const cancelByCaller = (s: State, call: PendingCall): void => {
  if (!call.live) return
  call.live = false
  call.resume = undefined
  s.stats.cancelledByUs++
  abandon(s, call, false)
}

const awaitCall = (s: State, call: PendingCall): Effect.Effect<unknown, unknown> =>
  Effect.callback((resume) => {
    if (call.exit !== undefined) {
      const exit = call.exit
      call.exit = undefined
      return resume(exit)
    }
    call.resume = resume
    return Effect.sync(() => cancelByCaller(s, call))
  })

/**
 * When the call times out, relative to the epoch. From two clock readings past 2^31, V8's optimised code makes it a
 * double, boxed in 16 bytes per entry; `| 0` gives V8 the same value as a small integer, kept in the entry itself.
 */
const relativeDeadline = (s: State, timeoutMillis: number): number => {
  const deadline = s.clock.currentTimeMillisUnsafe() - s.epoch + timeoutMillis
  const small = deadline | 0
  return small === deadline ? small : deadline
}

/** @internal */
export const timeoutMillisOf = (s: State, timeout: Duration.Input | undefined): number =>
  timeout === undefined ? s.defaultTimeoutMillis : Duration.toMillis(Duration.fromInputUnsafe(timeout))

/**
 * Sends a request and registers it in the pending table; the caller then waits on the entry's `resume`, or finds the
 * outcome in `exit` if it came first. A call that cannot be sent is its failed `Exit` (no entry). A typed call passes
 * its codecs, and its caller wakes with the decoded result or typed error.
 *
 * @internal
 */
export const issue = (
  s: State,
  method: string,
  params: Message.Params | null | undefined,
  timeoutMillis: number,
  codecs: CallCodecs | undefined
): PendingCall | Exit.Exit<never, unknown> => {
  const refused = refusal(s)
  if (refused !== undefined) return Exit.fail(refused)
  const id = s.nextId++
  const frame = frameOf(s, Message.request(id, method, params))
  if (Result.isFailure(frame)) return Exit.fail(frame.failure)
  const call: PendingCall = {
    id,
    method,
    timeoutMillis,
    deadline: relativeDeadline(s, timeoutMillis),
    heapIndex: -1,
    codecs,
    live: true,
    enqueued: false,
    resume: undefined,
    reject: undefined,
    exit: undefined
  }
  // Registered before the frame can leave, so even an instant answer finds its call.
  s.pending.set(id, call)
  s.stats.requestsSent++
  if (offerNow(s, frame.success, 0)) {
    call.enqueued = true
  } else {
    // The queue is full (a slow reader), or frames wait for room before this one: the frame waits in `overflow` until
    // the writer has room for it, or the call ends first (its deadline, its caller's interruption), and then it is
    // never sent.
    s.overflow.push({ call, frame: frame.success, answerBytes: 0, wake: undefined })
    wakeWriter(s)
  }
  // Its deadline is set once the frame is on its way: waking the timer runs it at once, in this stack, and a call it
  // expires is then cancelled on the wire like any other. An instant answer may have ended the call already.
  if (call.live) schedule(s, call)
  return call
}

/** Run inside the caller's `Effect.suspend` (or `withCaller`); `span` is the caller's, when trace context travels. */
const startCall = (
  s: State,
  method: string,
  params: Message.Params | null | undefined,
  timeoutMillis: number,
  codecs: CallCodecs | undefined,
  span: Tracer.AnySpan | undefined
): Effect.Effect<unknown, unknown> => {
  const issued = issue(
    s,
    method,
    span === undefined ? params : TraceContext.inject(span, params),
    timeoutMillis,
    codecs
  )
  if (Exit.isExit(issued)) return issued
  // With `tracing` on, `span` is this call's own `rpc.call` span (see `withCaller`).
  if (s.spans && span?._tag === "Span") span.attribute("rpc.id", issued.id)
  return awaitCall(s, issued)
}

/**
 * Runs `body` with the caller's current span when the peer propagates trace context (with `tracing` on, inside an
 * `rpc.call <method>` client span); otherwise a plain `Effect.suspend`.
 */
const withCaller = <A, E>(
  s: State,
  method: string,
  request: boolean,
  body: (span: Tracer.AnySpan | undefined) => Effect.Effect<A, E>
): Effect.Effect<A, E> => {
  if (!s.propagate) return Effect.suspend(() => body(undefined))
  const run = Effect.withFiber((fiber) => body(fiber.cache.span))
  return request && s.spans
    ? Effect.withSpan(run, `rpc.call ${method}`, { kind: "client", captureStackTrace: false })
    : run
}

/** @internal */
export const callUntyped = (s: State) =>
(
  method: string,
  params?: Message.Params | null | undefined,
  options?: Peer.CallOptions | undefined
): Effect.Effect<unknown, Peer.CallError> =>
  withCaller(
    s,
    method,
    true,
    (span) => startCall(s, method, params, timeoutMillisOf(s, options?.timeout), undefined, span)
  ) as Effect.Effect<unknown, Peer.CallError>

/**
 * A typed call's params encoded with its Schema, or the -32602 it fails with locally (nothing is sent).
 *
 * @internal
 */
export const encodeParams = (
  codecs: CallCodecs,
  params: unknown
): Result.Result<Message.Params | undefined, RpcError.RpcError> => {
  const encoded = codecs.encodeParams(params)
  return Result.isFailure(encoded)
    ? Result.fail(RpcError.RpcError.invalidParams(encoded.failure))
    : encoded as Result.Result<Message.Params | undefined, never>
}

/** @internal */
export const call = (s: State) => (method: Method.AnyRequest, params: unknown, options?: Peer.CallOptions) =>
  withCaller(s, method.name, true, (span) => {
    const codecs = codecsOf(method)
    const encoded = encodeParams(codecs, params)
    if (Result.isFailure(encoded)) return Effect.fail(encoded.failure)
    const timeoutMillis = timeoutMillisOf(s, options?.timeout ?? method.timeout)
    return startCall(s, method.name, encoded.success, timeoutMillis, codecs, span)
  })

// -- notifications -----------------------------------------------------------------------------------------------

/**
 * Queues a notification. The result is `Effect.void` when it was queued at once, and the failed `Exit` when it is
 * refused.
 *
 * @internal
 */
export const sendNotification = (
  s: State,
  method: string,
  params: Message.Params | null | undefined
): Effect.Effect<void, PeerError.Disconnect> => {
  const refused = refusal(s)
  if (refused !== undefined) return Effect.fail(refused)
  s.stats.notificationsSent++
  return write(s, Message.notification(method, params))
}

/** @internal */
export const notifyUntyped = (s: State) =>
(
  method: string,
  params?: Message.Params | null | undefined
): Effect.Effect<void, PeerError.Disconnect> =>
  withCaller(
    s,
    method,
    false,
    (span) => sendNotification(s, method, span === undefined ? params : TraceContext.inject(span, params))
  )

/** @internal */
export const notify = (s: State) => (method: Method.AnyNotification, params: unknown) =>
  withCaller(s, method.name, false, (span) => {
    const encoded = notificationEncoderOf(method)(params)
    if (Result.isFailure(encoded)) {
      return Effect.die(new Error(`${method.name}: params do not match their Schema: ${encoded.failure}`))
    }
    const encodedParams = encoded.success as Message.Params | undefined
    return sendNotification(
      s,
      method.name,
      span === undefined ? encodedParams : TraceContext.inject(span, encodedParams)
    )
  })

// -- answers -----------------------------------------------------------------------------------------------------

/**
 * An answer from the other side: it ends its call, or is counted as late (a tombstoned id) or unknown.
 *
 * @internal
 */
export const onResponse = (s: State, response: Message.Response): Effect.Effect<void> => {
  s.stats.responsesReceived++
  const id = response.id
  const call = id === null ? undefined : s.pending.get(id)
  if (call !== undefined) {
    s.pending.delete(id!)
    s.deadlines.remove(call)
    complete(call, answerExit(call.method, call.codecs, response) as CallExit)
    wakeIdle(s)
    return Effect.void
  }
  if (id !== null && s.tombstones.has(id)) {
    s.stats.lateResponses++
    return Effect.void
  }
  s.stats.unknownResponses++
  return id === null
    ? warnAboutPeer(s, "the peer reported an error it could not tie to a request", (response as Message.Failure).error)
    : warnAboutPeer(s, `response to an id never sent: ${typeof id === "string" ? `"${shown(id)}"` : id}`)
}

// -- the connection is lost --------------------------------------------------------------------------------------

/** @internal */
export { failPending }

/**
 * No answer can come any more: fail what waits for one, refuse new calls, tell whoever watches `closed`.
 *
 * @internal
 */
export const lose = (s: State, error: PeerError.Disconnect): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (s.disconnect === undefined) s.disconnect = error
    failPending(s, s.disconnect, false)
    return Effect.asVoid(Deferred.succeed(s.closed, s.disconnect))
  })
