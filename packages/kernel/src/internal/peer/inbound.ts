/**
 * Inbound messages, once parsed and classified: a request passes one admission step (the gate, the method, its params)
 * and is served by its handler in a fiber of its own, tracked by id so a cancellation can interrupt it; a notification
 * starts its handler and is never answered; a response ends its outbound call; a batch admits its requests the same
 * way and answers them together.
 *
 * @internal
 */
import * as Message from "@lifeline/jsonrpc/Message"
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Result from "effect/Result"
import * as Tracer from "effect/Tracer"
import type * as Cancellation from "../../Cancellation.js"
import type * as Peer from "../../Peer.js"
import { shown } from "../untrustedText.js"
import { compileFallback, notificationFailed, type Serve } from "./codecs.js"
import { onResponse } from "./outbound.js"
import { type RequestId, type State, wakeIdle, warnAboutPeer } from "./state.js"
import * as TraceContext from "./traceContext.js"
import { answer as writeAnswer, unsafeWrite } from "./writer.js"

// -- admission ---------------------------------------------------------------------------------------------------

/**
 * The one admission step of an inbound request, alone or in a batch: the gate, then (alone) teardown and an id still in
 * progress, then the method (or `onUnknownRequest`), then its params. It goes on with `serve` or with `refuse` and
 * returns what they return, so neither outcome allocates a record of its own.
 */
const admit = <A>(
  s: State,
  request: Message.Request,
  alone: boolean,
  serve: (s: State, request: Message.Request, serve: Serve, params: unknown) => A,
  refuse: (s: State, request: Message.Request, error: RpcError.RpcError) => A
): A => {
  s.stats.requestsReceived++
  const method = request.method
  const refused = s.gate?.inbound(method) ??
    (alone && s.tornDown ? RpcError.RpcError.shuttingDown(method) : undefined)
  if (refused !== undefined) return refuse(s, request, refused)
  if (alone && s.requestFibers.has(request.id)) {
    return refuse(
      s,
      request,
      RpcError.RpcError.invalidRequest(`A request with id ${request.id} is already in progress`)
    )
  }
  let found = s.serves.get(method)
  if (found === undefined && s.onUnknownRequest !== undefined) found = compileFallback(method, s.onUnknownRequest)
  if (found === undefined) return refuse(s, request, RpcError.RpcError.methodNotFound(method))
  const params = found.decode(request.params)
  if (Result.isFailure(params)) return refuse(s, request, RpcError.RpcError.invalidParams(params.failure))
  return serve(s, request, found, params.success)
}

/** A handler's result as the answer to send: encoded with the method's Schema, or -32603 when it refuses it. */
const success = (request: Message.Request, serve: Serve, result: unknown): Message.Response => {
  const encoded = serve.encode(result)
  return Result.isSuccess(encoded)
    ? Message.success(request.id, encoded.success)
    : Message.failure(
      request.id,
      RpcError.RpcError.internalError(`${request.method} returned a result its Schema refuses: ${encoded.failure}`)
    )
}

/**
 * A handler's failure as the answer to send, handed to `k`: its typed error mapped to the wire, or, for a defect,
 * -32603 (counted and logged first).
 */
const failure = <A>(
  s: State,
  request: Message.Request,
  serve: Serve,
  cause: Cause.Cause<unknown>,
  k: (s: State, answer: Message.Response) => Effect.Effect<A>
): Effect.Effect<A> => {
  const error = Cause.findErrorOption(cause)
  if (Option.isSome(error)) return k(s, Message.failure(request.id, serve.toError(error.value)))
  s.stats.handlerDefects++
  return Effect.andThen(
    Effect.logError(`handler ${request.method} died`, cause),
    k(
      s,
      Message.failure(request.id, RpcError.RpcError.internalError(s.exposeDefects ? Cause.pretty(cause) : undefined))
    )
  )
}

const answerWith = (_: State, answer: Message.Response) => Effect.succeed(answer)

// -- a request alone ---------------------------------------------------------------------------------------------

/**
 * Starts an inbound request's handler as its own fiber, its log annotations written into the context it starts with
 * (half the cost of `Effect.annotateLogs`, a step of its own). `parent` is the span its `_meta.traceparent` names.
 */
const forkRequest = (
  s: State,
  id: RequestId,
  method: string,
  effect: Effect.Effect<void, never, any>,
  parent: Tracer.ExternalSpan | undefined
) => {
  if (!s.annotate) {
    return parent === undefined ? s.forkHandler(effect) : Effect.runForkWith(s.context)(withParent(effect, parent))
  }
  return Effect.runForkWith(
    Context.add(s.context, References.CurrentLogAnnotations, {
      ...s.logAnnotations,
      "rpc.method": method,
      "rpc.id": id
    })
  )(
    s.spans
      ? Effect.withSpan(effect, `rpc.serve ${method}`, {
        kind: "server",
        attributes: { "rpc.id": id },
        parent,
        // No stack trace: it would point here, never at the caller, and capturing it cost ~3 µs per request.
        captureStackTrace: false
      })
      : parent === undefined
      ? effect
      : withParent(effect, parent)
  )
}

const withParent = (effect: Effect.Effect<void, never, any>, parent: Tracer.ExternalSpan) =>
  Effect.provideService(effect, Tracer.ParentSpan, parent)

const serveRequest = (
  s: State,
  request: Message.Request,
  serve: Serve,
  params: unknown
): Effect.Effect<void, never, any> => {
  const run = serve.handle(params, { id: request.id, method: request.method })
  return Effect.matchCauseEffect(s.semaphore === undefined ? run : s.semaphore.withPermits(1)(run), {
    onSuccess: (result) => writeAnswer(s, success(request, serve, result)),
    onFailure: (cause) => Cause.hasInterruptsOnly(cause) ? Effect.void : failure(s, request, serve, cause, writeAnswer)
  })
}

const startRequest = (s: State, request: Message.Request, serve: Serve, params: unknown): Effect.Effect<void> => {
  const id = request.id
  const trace = s.propagate ? TraceContext.inbound(request.params) : undefined
  s.inboundActive++
  s.inboundMethods.set(id, request.method)
  const fiber = forkRequest(s, id, request.method, serveRequest(s, request, serve, params), trace?.parent)
  if (fiber.pollUnsafe() === undefined) s.requestFibers.set(id, fiber)
  // The bookkeeping runs as the fiber's observer rather than as an `Effect.onExit` step inside it: one
  // uninterruptible region less per request.
  fiber.addObserver((exit) => {
    if (s.requestFibers.get(id) === fiber) s.requestFibers.delete(id)
    // Cancelled by the peer: LSP still wants an answer, MCP does not. Interrupted by a shutdown: nobody is waiting
    // for one.
    const cancelled = s.cancelledInbound.delete(id)
    if (cancelled && Exit.isFailure(exit) && s.cancellation!.answerCancelled !== false) {
      unsafeWrite(s, Message.failure(id, RpcError.RpcError.requestCancelled()))
    }
    s.inboundMethods.delete(id)
    s.inboundActive--
    wakeIdle(s)
  })
  if (trace === undefined || trace.invalid === 0) return Effect.void
  s.stats.traceContextInvalid += trace.invalid
  // Counted, and said without the value itself: it is the other side's, and may be anything.
  return warnAboutPeer(
    s,
    `ignored ${trace.invalid} invalid W3C trace context value(s) in ${shown(request.method)}'s _meta`
  )
}

const answerRefusal = (s: State, request: Message.Request, error: RpcError.RpcError): Effect.Effect<void> =>
  writeAnswer(s, Message.failure(request.id, error))

/** @internal */
export const onRequest = (s: State, request: Message.Request): Effect.Effect<void> =>
  admit(s, request, true, startRequest, answerRefusal)

const onCancel = (s: State, cancellation: Cancellation.Spelling, params: unknown): void => {
  const id = cancellation.decode(params)
  const fiber = id === undefined ? undefined : s.requestFibers.get(id)
  if (fiber === undefined || s.cancelledInbound.has(id!)) return // finished already (a race), or cancelled twice
  s.stats.cancelledByPeer++
  s.cancelledInbound.add(id!)
  // Without waiting: the handler's finalizers run at once up to their first wait, and the reader reads on while they
  // finish.
  fiber.interruptUnsafe()
}

// -- notifications -----------------------------------------------------------------------------------------------

/**
 * Starts inbound work as its own fiber, counted as in flight until it ends: a drain waits for it, a teardown
 * interrupts and reports it.
 */
const start = (s: State, effect: Effect.Effect<void, never, any>, method: string | undefined): void => {
  s.inboundActive++
  const fiber = s.forkHandler(effect)
  // Done at once (most handlers): nothing to track, and no observer to allocate.
  if (fiber.pollUnsafe() !== undefined) return ended(s)
  s.otherFibers.set(fiber, method)
  fiber.addObserver(() => {
    s.otherFibers.delete(fiber)
    ended(s)
  })
}

const ended = (s: State): void => {
  s.inboundActive--
  wakeIdle(s)
}

const onNotification = (s: State, notification: Message.Notification): Effect.Effect<void> => {
  s.stats.notificationsReceived++
  const method = notification.method
  const cancellation = s.cancellation
  if (cancellation !== undefined && method === cancellation.method) {
    onCancel(s, cancellation, notification.params)
    return Effect.void
  }
  if (s.gate?.inboundNotification?.(method) === false || s.tornDown) return Effect.void
  const notify = s.notifies.get(method)
  if (notify !== undefined) {
    const params = notify.decode(notification.params)
    if (Result.isFailure(params)) return warnAboutPeer(s, `notification ${shown(method)} failed: ${params.failure}`)
    start(s, Effect.catchCause(notify.handle(params.success), notify.failed), method)
    return Effect.void
  }
  if (s.onUnknownNotification !== undefined) {
    start(
      s,
      Effect.catchCause(s.onUnknownNotification(method, notification.params), notificationFailed(method)),
      method
    )
    return Effect.void
  }
  // LSP: notifications starting with `$/` may be ignored silently; others are logged, never answered.
  return method.startsWith("$/") ? Effect.void : Effect.logDebug(`no handler for notification ${method}`)
}

/**
 * One classified message, outside a batch. The result is `Effect.void` when it was handled at once.
 *
 * @internal
 */
export const onItem = (s: State, item: Message.Classified): Effect.Effect<void> => {
  switch (item._tag) {
    case "Request":
      return onRequest(s, item.message)
    case "Notification":
      return onNotification(s, item.message)
    case "Response":
      return onResponse(s, item.message)
    case "Invalid": {
      s.stats.invalidMessages++
      const answer = Message.answerTo(item)
      const warning = warnAboutPeer(s, `invalid message: ${item.error.message}`, item.error.data)
      const answered = answer === undefined ? Effect.void : writeAnswer(s, answer)
      return warning === Effect.void ? answered : Effect.andThen(warning, answered)
    }
  }
}

// -- batches -----------------------------------------------------------------------------------------------------

const answerServed = (
  s: State,
  request: Message.Request,
  serve: Serve,
  params: unknown
): Effect.Effect<Message.Response, never, any> => {
  // Listed while its handler runs, so that a teardown that interrupts the batch reports this request by its id.
  const running: Peer.CutOff = { direction: "inbound", id: request.id, method: request.method }
  return Effect.suspend(() => {
    s.batchedRequests.add(running)
    return serve.handle(params, { id: request.id, method: request.method })
  }).pipe(
    Effect.ensuring(Effect.sync(() => void s.batchedRequests.delete(running))),
    Effect.matchCauseEffect({
      onSuccess: (result) => Effect.succeed(success(request, serve, result)),
      // A defect is counted, logged and answered as in a single request.
      onFailure: (cause) => failure(s, request, serve, cause, answerWith)
    })
  )
}

const refusedInBatch = (_: State, request: Message.Request, error: RpcError.RpcError) =>
  Effect.succeed<Message.Response>(Message.failure(request.id, error))

const answerInBatch = (
  s: State,
  item: Message.Classified
): Effect.Effect<Message.Response | undefined, never, any> => {
  if (item._tag === "Invalid") {
    s.stats.invalidMessages++
    return Effect.succeed(Message.answerTo(item))
  }
  if (item._tag === "Request") return admit(s, item.message, false, answerServed, refusedInBatch)
  return Effect.as(onItem(s, item), undefined)
}

/**
 * A batch is served as a unit: its requests run concurrently and their answers go back as one array.
 *
 * @internal
 */
export const onBatch = (s: State, items: ReadonlyArray<Message.Classified>): Effect.Effect<void> => {
  if (s.tornDown) {
    // Closing: nothing new starts, but each request still gets its -32003, as a single request would.
    const refused = items.flatMap((item) =>
      item._tag === "Request"
        ? [Message.failure(item.message.id, RpcError.RpcError.shuttingDown(item.message.method))]
        : []
    )
    return refused.length === 0 ? Effect.void : writeAnswer(s, refused)
  }
  start(
    s,
    Effect.forEach(items, (item) => answerInBatch(s, item), { concurrency: "unbounded" }).pipe(
      Effect.flatMap((answers) => {
        const batch = answers.filter((a): a is Message.Response => a !== undefined)
        return batch.length === 0 ? Effect.void : writeAnswer(s, batch)
      })
    ),
    undefined
  )
  return Effect.void
}

// -- teardown ----------------------------------------------------------------------------------------------------

/**
 * Interrupts every inbound handler and batch now, tombstones the ids of the requests, and reports what it cut off.
 *
 * @internal
 */
export const interruptHandlers = (s: State): Effect.Effect<ReadonlyArray<Peer.CutOff>> =>
  Effect.suspend(() => {
    const cut: Array<Peer.CutOff> = []
    for (const [id, method] of s.inboundMethods) {
      s.tombstones.add(id)
      cut.push({ direction: "inbound", id, method })
    }
    for (const running of s.batchedRequests) {
      if (running.id !== null) s.tombstones.add(running.id)
      cut.push(running)
    }
    // A notification handler by its method; a batch (no method) by the requests above.
    for (const method of s.otherFibers.values()) {
      if (method !== undefined) cut.push({ direction: "inbound", id: null, method })
    }
    return Effect.as(Fiber.interruptAll([...s.requestFibers.values(), ...s.otherFibers.keys()]), cut)
  })
