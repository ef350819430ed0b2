/**
 * The peer's engine: the pending-call table, the inbound dispatcher, the writer fiber and the teardown building
 * blocks. Bookkeeping lives in plain maps owned by the peer (no fiber per outbound call), because that is what keeps
 * the runtime off the critical path (see DESIGN.md, "Performance notes").
 *
 * @internal
 */
import * as Framing from "@lifeline/jsonrpc/Framing"
import * as Message from "@lifeline/jsonrpc/Message"
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as FiberMap from "effect/FiberMap"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as Method from "../Method.js"
import type * as Peer from "../Peer.js"
import * as PeerError from "../PeerError.js"
import type * as Transport from "../Transport.js"
import { type Deadline, Deadlines } from "./deadlines.js"
import { Tombstones } from "./tombstones.js"

type RequestId = Message.RequestId

type CallExit = Exit.Exit<unknown, RpcError.RpcError | PeerError.RequestTimeout | PeerError.Disconnect>

interface PendingCall extends Deadline {
  readonly id: RequestId
  readonly method: string
  readonly timeoutMillis: number
  /** Set once the frame is in the outbound queue: a call abandoned before that needs no `$/cancelRequest`. */
  enqueued: boolean
  /** The caller's resume callback, once it waits; an outcome that comes before that is kept in `exit`. */
  resume: ((exit: CallExit) => void) | undefined
  exit: CallExit | undefined
}

/** Ends a call once: wakes its caller, or keeps the outcome for when it starts waiting. */
const complete = (call: PendingCall, exit: CallExit): void => {
  if (!call.live) return
  call.live = false
  const resume = call.resume
  // The entry stays in the deadline heap until its deadline passes: without the caller's callback it no longer keeps
  // the caller's fiber (and all that fiber holds) alive that long.
  call.resume = undefined
  if (resume === undefined) call.exit = exit
  else resume(exit)
}

/** How an inbound request is served: params in, encoded result out, every failure already an `RpcError`. */
type Serve = (params: unknown, context: Peer.HandlerContext) => Effect.Effect<unknown, RpcError.RpcError, any>

type Notify = (params: unknown) => Effect.Effect<void, never, any>

const lspCancellation: Peer.Cancellation = {
  method: "$/cancelRequest",
  encode: (id) => ({ id }),
  decode: (params) => {
    const id = (params as { readonly id?: unknown } | undefined)?.id
    return typeof id === "string" || typeof id === "number" ? id : undefined
  }
}

const messageOf = (u: unknown): string => u instanceof Error ? u.message : String(u)

/**
 * A Schema codec as a function that never throws. Method codecs are synchronous (no services, no async transforms),
 * and some Schema decoders throw on hostile input before returning (a Union calls `String()` on a discriminator such
 * as `{ toString: null }`): both come back as a parse failure, so a peer's bad input is -32602, not a defect.
 */
const safely = <A>(
  codec: (u: unknown) => Either.Either<A, ParseResult.ParseError>
) =>
(u: unknown): Either.Either<A, string> => {
  try {
    return Either.mapLeft(codec(u), (issue) => issue.message)
  } catch (cause) {
    return Either.left(messageOf(cause))
  }
}

interface CallCodecs {
  readonly encodeParams: (u: unknown) => Either.Either<unknown, string>
  readonly decodeResult: (u: unknown) => Either.Either<unknown, string>
  readonly decodeError: ((u: unknown) => Either.Either<unknown, string>) | undefined
}

/** A method's call codecs, built once per method definition rather than on every call. */
const callCodecs = new WeakMap<Method.AnyRequest, CallCodecs>()
const codecsOf = (method: Method.AnyRequest): CallCodecs => {
  let codecs = callCodecs.get(method)
  if (codecs === undefined) {
    codecs = {
      encodeParams: safely(Schema.encodeUnknownEither(method.params)),
      decodeResult: safely(Schema.decodeUnknownEither(method.result)),
      decodeError: isNever(method.error) ? undefined : safely(Schema.decodeUnknownEither(method.error))
    }
    callCodecs.set(method, codecs)
  }
  return codecs
}

const isNever = (schema: Schema.Schema.AnyNoContext): boolean => SchemaAST.isNeverKeyword(schema.ast)

/**
 * A handler's typed failure as a wire error: an `RpcError` passes through; any other value is encoded with the
 * method's error Schema into `data`, with `code` and `message` read from the value when it has them.
 */
const toRpcError = (method: Method.AnyRequest, error: unknown): RpcError.RpcError => {
  if (error instanceof RpcError.RpcError) return error
  const fields = (typeof error === "object" && error !== null ? error : {}) as Record<string, unknown>
  const code = typeof fields.code === "number" && Number.isSafeInteger(fields.code) ? fields.code : -32000
  const message = typeof fields.message === "string" && fields.message !== ""
    ? fields.message
    : typeof fields._tag === "string"
    ? fields._tag
    : "Request failed"
  const data = safely(Schema.encodeUnknownEither(method.error))(error)
  return RpcError.make(code, message, Either.isRight(data) ? data.right : undefined)
}

const compileRequest = (method: Method.AnyRequest, handler: Peer.RequestHandler<any, any>): Serve => {
  const decodeParams = safely(Schema.decodeUnknownEither(method.params))
  const encodeResult = safely(Schema.encodeUnknownEither(method.result))
  return (params, context) =>
    Effect.mapError(decodeParams(params), (issue) => RpcError.RpcError.invalidParams(issue)).pipe(
      Effect.flatMap((decoded) =>
        Effect.mapError(handler(decoded, context) as Effect.Effect<unknown, unknown, any>, (e) => toRpcError(method, e))
      ),
      Effect.flatMap((result) =>
        Effect.mapError(
          encodeResult(result),
          (issue) => RpcError.RpcError.internalError(`${method.name} returned a result its Schema refuses: ${issue}`)
        )
      )
    )
}

const compileNotification = (method: Method.AnyNotification, handler: Peer.NotificationHandler<any, any>): Notify => {
  const decodeParams = safely(Schema.decodeUnknownEither(method.params))
  return (params) =>
    decodeParams(params).pipe(
      Effect.flatMap((decoded) => handler(decoded) as Effect.Effect<void, unknown, any>),
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.void
          : Effect.logWarning(`notification ${method.name} failed`, cause)
      )
    )
}

/** @internal */
export const make = Effect.fnUntraced(function*<Serves extends Method.Any, Calls extends Method.Any, R>(
  options: Peer.Options<Serves, Calls, R>
): Effect.fn.Return<Peer.Peer<Serves, Calls>, never, Scope.Scope | R> {
  const transport: Transport.Transport.Service = options.transport
  const framing = options.framing ?? Framing.contentLength
  const defaultTimeoutMillis = Duration.toMillis(Duration.decode(options.requestTimeout ?? Duration.seconds(5)))
  const flushTimeout = Duration.decode(options.flushTimeout ?? Duration.seconds(1))
  const cancellation = options.cancellation ?? lspCancellation
  const exposeDefects = options.exposeDefects ?? false
  const tracing = options.tracing ?? true
  const gate = options.gate

  const serves = new Map<string, Serve>()
  const notifies = new Map<string, Notify>()
  const handlers = options.handlers as Record<string, any>
  for (const method of options.protocol.serves) {
    const handler = handlers[method.name]
    if (handler === undefined) continue
    if (method._tag === "Request") serves.set(method.name, compileRequest(method, handler))
    else notifies.set(method.name, compileNotification(method, handler))
  }
  const onUnknownRequest = options.onUnknownRequest
  const onUnknownNotification = options.onUnknownNotification

  const stats = {
    requestsSent: 0,
    notificationsSent: 0,
    responsesReceived: 0,
    requestsReceived: 0,
    notificationsReceived: 0,
    timedOut: 0,
    cancelledByUs: 0,
    cancelledByPeer: 0,
    lateResponses: 0,
    unknownResponses: 0,
    invalidMessages: 0,
    failedByDisconnect: 0,
    handlerDefects: 0
  }

  let nextId = 1
  const pending = new Map<RequestId, PendingCall>()
  const tombstones = new Tombstones<RequestId>(options.tombstoneCapacity ?? 10_000)
  const cancelledInbound = new Set<RequestId>()
  let inboundActive = 0
  const inboundMethods = new Map<RequestId, string>()
  const notificationMethods = new Map<object, string>()
  let idleWaiters: Array<Deferred.Deferred<void>> = []
  let flushWaiters: Array<Deferred.Deferred<void>> = []
  let writing = false
  let disconnect: PeerError.Disconnect | undefined
  const closed = yield* Deferred.make<PeerError.Disconnect>()

  const outbound = yield* Queue.bounded<Uint8Array>(options.outboundCapacity ?? 1024)
  const semaphore = options.maxConcurrentHandlers === undefined
    ? undefined
    : yield* Effect.makeSemaphore(options.maxConcurrentHandlers)
  // Created before the teardown finalizer below, so that finalizer runs first and decides what handlers see.
  const requestFibers = yield* FiberMap.make<RequestId, void>()
  const notificationFibers = yield* FiberSet.make<void>()

  const isIdle = () => pending.size === 0 && inboundActive === 0
  const wakeIdle = () => {
    if (idleWaiters.length === 0 || !isIdle()) return
    const waiters = idleWaiters
    idleWaiters = []
    for (const waiter of waiters) Deferred.unsafeDone(waiter, Exit.void)
  }
  /** Frames waiting in the outbound queue (the writer takes without waiting, so this is never negative). */
  const queued = () => Option.getOrElse(outbound.unsafeSize(), () => 0)
  const isFlushed = () => !writing && queued() === 0
  const wakeFlushed = () => {
    if (flushWaiters.length === 0 || !isFlushed()) return
    const waiters = flushWaiters
    flushWaiters = []
    for (const waiter of waiters) Deferred.unsafeDone(waiter, Exit.void)
  }
  const waitFor = (ready: () => boolean, register: (waiter: Deferred.Deferred<void>) => void) =>
    Effect.suspend(() => {
      if (ready()) return Effect.void
      const waiter = Deferred.unsafeMake<void>(FiberId.none)
      register(waiter)
      return Deferred.await(waiter)
    })

  const frameOf = (message: Message.Message | ReadonlyArray<Message.Message>) =>
    Either.map(Message.stringify(message), framing.encodeString)

  // The writer parks on its own callback rather than in `Queue.take`: a taker on an empty Queue costs a Deferred per
  // wake (an object spread of Effect's prototype, ~7 µs here), and every round trip wakes both writers. It parks only
  // when the queue is empty, so a sender waiting for room (the queue is full) never has to wake it.
  let parkedWriter: ((effect: Effect.Effect<void>) => void) | undefined
  const wakeWriter = (): void => {
    const resume = parkedWriter
    if (resume === undefined) return
    parkedWriter = undefined
    resume(Effect.void)
  }
  const writerIdle = Effect.async<void>((resume) => {
    if (queued() > 0) return resume(Effect.void)
    parkedWriter = resume
    return Effect.sync(() => {
      parkedWriter = undefined
    })
  })
  /** Queues a frame, waiting while the queue is full: this is where a slow reader pushes back. */
  const enqueue = (frame: Uint8Array): Effect.Effect<void> => {
    if (outbound.unsafeOffer(frame)) {
      wakeWriter()
      return Effect.void
    }
    return Effect.zipRight(Queue.offer(outbound, frame), Effect.sync(wakeWriter))
  }
  const write = (message: Message.Message | ReadonlyArray<Message.Message>): Effect.Effect<void> => {
    const frame = frameOf(message)
    if (Either.isLeft(frame)) return Effect.logError("BUG: a message could not be serialised", frame.left)
    return enqueue(frame.right)
  }
  /** For finalizers: never waits. A full queue means the other side is not reading, so the frame would not help. */
  const unsafeWrite = (message: Message.Message): void => {
    const frame = frameOf(message)
    if (Either.isRight(frame) && outbound.unsafeOffer(frame.right)) wakeWriter()
  }

  // -- outbound ------------------------------------------------------------------------------------------------

  // A lost connection says how it was lost; a shutdown is best described by the lifecycle's current phase.
  const refusal = (): PeerError.Disconnect | undefined =>
    disconnect !== undefined && disconnect._tag !== "ShutdownError" ? disconnect : gate?.outbound() ?? disconnect

  /** The call ended without an answer (timed out, or its caller was interrupted): forget it, and say so. */
  const abandon = (call: PendingCall): void => {
    if (pending.get(call.id) !== call) return // answered, or failed by a disconnect
    pending.delete(call.id)
    tombstones.add(call.id)
    // The answer may already be on its way: if it arrives it meets the tombstone and is dropped and counted.
    if (call.enqueued && disconnect === undefined) {
      unsafeWrite(Message.notification(cancellation.method, cancellation.encode(call.id)))
    }
    wakeIdle()
  }

  // One timer for every call's timeout: it sleeps (on the Clock, so TestClock drives it) until the earliest live
  // deadline, expires what is due, and is woken when a call with an earlier deadline arrives.
  const deadlines = new Deadlines<PendingCall>()
  let timerTarget = Infinity
  let timerWake: Deferred.Deferred<void> | undefined
  const schedule = (call: PendingCall): void => {
    deadlines.push(call)
    if (call.deadline < timerTarget && timerWake !== undefined) Deferred.unsafeDone(timerWake, Exit.void)
  }
  const expire = (now: number): void => {
    while (true) {
      deadlines.prune()
      const next = deadlines.peek()
      if (next === undefined || next.deadline > now) return
      deadlines.pop()
      stats.timedOut++
      abandon(next)
      complete(
        next,
        Exit.fail(new PeerError.RequestTimeout({ method: next.method, id: next.id, timeoutMillis: next.timeoutMillis }))
      )
    }
  }
  const timer = Effect.gen(function*() {
    while (true) {
      const wake = Deferred.unsafeMake<void>(FiberId.none)
      timerWake = wake
      deadlines.prune()
      const next = deadlines.peek()
      timerTarget = next === undefined ? Infinity : next.deadline
      if (next === undefined) {
        yield* Deferred.await(wake)
      } else {
        const now = yield* Clock.currentTimeMillis
        if (next.deadline > now) {
          yield* Effect.raceFirst(Deferred.await(wake), Effect.sleep(Duration.millis(next.deadline - now)))
        }
      }
      expire(yield* Clock.currentTimeMillis)
    }
  })

  /** The caller was interrupted while its call was pending: end the call and tell the other side. */
  const cancelByCaller = (call: PendingCall): void => {
    if (!call.live) return
    call.live = false
    call.resume = undefined
    stats.cancelledByUs++
    abandon(call)
  }

  const awaitCall = (
    call: PendingCall
  ): Effect.Effect<unknown, RpcError.RpcError | PeerError.RequestTimeout | PeerError.Disconnect> =>
    Effect.async((resume) => {
      if (call.exit !== undefined) {
        const exit = call.exit
        call.exit = undefined
        return resume(exit)
      }
      call.resume = resume
      return Effect.sync(() => cancelByCaller(call))
    })

  const callUntyped = (
    method: string,
    params?: Message.Params | undefined,
    callOptions?: Peer.CallOptions | undefined
  ): Effect.Effect<unknown, RpcError.RpcError | PeerError.RequestTimeout | PeerError.Disconnect> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const refused = refusal()
      if (refused !== undefined) return Effect.fail(refused)
      const id = nextId++
      const frame = frameOf(Message.request(id, method, params))
      if (Either.isLeft(frame)) return Effect.fail(frame.left)
      const timeoutMillis = callOptions?.timeout === undefined
        ? defaultTimeoutMillis
        : Duration.toMillis(Duration.decode(callOptions.timeout))
      const call: PendingCall = {
        id,
        method,
        timeoutMillis,
        deadline: now + timeoutMillis,
        live: true,
        enqueued: false,
        resume: undefined,
        exit: undefined
      }
      // Registered before the frame can leave, so even an instant answer finds its call.
      pending.set(id, call)
      stats.requestsSent++
      schedule(call)
      if (outbound.unsafeOffer(frame.right)) {
        call.enqueued = true
        wakeWriter()
        return awaitCall(call)
      }
      // The queue is full: wait for room (this is the backpressure), but not past the call's deadline, when the
      // timer ends the call and the frame is never sent.
      return enqueue(frame.right).pipe(
        Effect.timeoutOption(Duration.millis(timeoutMillis)),
        Effect.flatMap((offered) => {
          if (Option.isSome(offered)) call.enqueued = true
          return awaitCall(call)
        }),
        Effect.onInterrupt(() => Effect.sync(() => cancelByCaller(call)))
      )
    })

  const notifyUntyped = (
    method: string,
    params?: Message.Params | undefined
  ): Effect.Effect<void, PeerError.Disconnect> =>
    Effect.suspend(() => {
      const refused = refusal()
      if (refused !== undefined) return Effect.fail(refused)
      stats.notificationsSent++
      return write(Message.notification(method, params))
    })

  const call = (method: Method.AnyRequest, params: unknown, callOptions?: Peer.CallOptions) => {
    const { decodeError, decodeResult, encodeParams } = codecsOf(method)
    return Effect.mapError(encodeParams(params), (issue) => RpcError.RpcError.invalidParams(issue)).pipe(
      Effect.flatMap((encoded) =>
        callUntyped(
          method.name,
          encoded as Message.Params | undefined,
          callOptions?.timeout === undefined && method.timeout !== undefined ? { timeout: method.timeout } : callOptions
        )
      ),
      Effect.catchIf(
        (e): e is RpcError.RpcError => decodeError !== undefined && e instanceof RpcError.RpcError,
        (e) => {
          const typed = decodeError!(e.data)
          return Either.isRight(typed) ? Effect.fail(typed.right) : Effect.fail(e)
        }
      ),
      Effect.flatMap((result) =>
        Effect.mapError(
          decodeResult(result),
          (issue) => RpcError.RpcError.internalError(`${method.name}: the result does not match its Schema: ${issue}`)
        )
      )
    )
  }

  const notify = (method: Method.AnyNotification, params: unknown) =>
    safely(Schema.encodeUnknownEither(method.params))(params).pipe(
      Effect.orDieWith((issue) => new Error(`${method.name}: params do not match their Schema: ${issue}`)),
      Effect.flatMap((encoded) => notifyUntyped(method.name, encoded as Message.Params | undefined))
    )

  // -- inbound -------------------------------------------------------------------------------------------------

  const failWith = (id: RequestId, cause: Cause.Cause<RpcError.RpcError>, method: string): Effect.Effect<void> => {
    const failure = Cause.failureOption(cause)
    if (Option.isSome(failure)) return write(Message.failure(id, failure.value))
    stats.handlerDefects++
    return Effect.zipRight(
      Effect.logError(`handler ${method} died`, cause),
      write(Message.failure(id, RpcError.RpcError.internalError(exposeDefects ? Cause.pretty(cause) : undefined)))
    )
  }

  // Per-request spans and log annotations cost about half of a pipelined call's CPU on these machines (bench/peer.ts),
  // so they can be turned off; they are on by default.
  const traced = (method: string, id: RequestId) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    tracing
      ? effect.pipe(
        Effect.annotateLogs({ "rpc.method": method, "rpc.id": id }),
        // No stack trace: it would point here, never at the caller, and capturing it cost ~8 µs per request.
        Effect.withSpan(`rpc.serve ${method}`, {
          kind: "server",
          attributes: { "rpc.id": id },
          captureStackTrace: false
        })
      )
      : effect

  const serveRequest = (request: Message.Request, serve: Serve): Effect.Effect<void, never, any> => {
    const id = request.id
    const context: Peer.HandlerContext = { id, method: request.method }
    const run = serve(request.params, context)
    return (semaphore === undefined ? run : semaphore.withPermits(1)(run)).pipe(
      Effect.matchCauseEffect({
        onSuccess: (result) => write(Message.success(id, result)),
        onFailure: (cause) => Cause.isInterruptedOnly(cause) ? Effect.void : failWith(id, cause, request.method)
      }),
      Effect.onInterrupt(() =>
        Effect.sync(() => {
          // Cancelled by the peer: LSP still wants an answer, MCP does not. Interrupted by a shutdown: nobody is
          // waiting for one.
          if (cancelledInbound.delete(id) && cancellation.answerCancelled !== false) {
            unsafeWrite(Message.failure(id, RpcError.RpcError.requestCancelled()))
          }
        })
      ),
      Effect.ensuring(Effect.sync(() => {
        inboundActive--
        inboundMethods.delete(id)
        cancelledInbound.delete(id)
        wakeIdle()
      })),
      traced(request.method, id)
    )
  }

  const onRequest = (request: Message.Request): Effect.Effect<void, never, any> => {
    stats.requestsReceived++
    const refused = gate?.inbound(request.method)
    if (refused !== undefined) return write(Message.failure(request.id, refused))
    if (FiberMap.unsafeHas(requestFibers, request.id)) {
      return write(Message.failure(
        request.id,
        RpcError.RpcError.invalidRequest(`A request with id ${request.id} is already in progress`)
      ))
    }
    let serve = serves.get(request.method)
    if (serve === undefined && onUnknownRequest !== undefined) {
      const fallback = onUnknownRequest
      serve = (params, context) => fallback(request.method, params, context)
    }
    if (serve === undefined) return write(Message.failure(request.id, RpcError.RpcError.methodNotFound(request.method)))
    inboundActive++
    inboundMethods.set(request.id, request.method)
    return Effect.asVoid(FiberMap.run(requestFibers, request.id, serveRequest(request, serve)))
  }

  const onCancel = (params: unknown): Effect.Effect<void> => {
    const id = cancellation.decode(params)
    if (id === undefined || !FiberMap.unsafeHas(requestFibers, id)) return Effect.void // finished already: a race
    stats.cancelledByPeer++
    cancelledInbound.add(id)
    return FiberMap.remove(requestFibers, id)
  }

  /** Notification handlers count as work in flight too: a drain waits for them, a teardown reports them. */
  const runNotification = (
    method: string,
    handle: Effect.Effect<void, never, any>
  ): Effect.Effect<void, never, any> => {
    const token = {}
    inboundActive++
    notificationMethods.set(token, method)
    return Effect.asVoid(FiberSet.run(
      notificationFibers,
      Effect.ensuring(
        handle,
        Effect.sync(() => {
          inboundActive--
          notificationMethods.delete(token)
          wakeIdle()
        })
      )
    ))
  }

  const onNotification = (notification: Message.Notification): Effect.Effect<void, never, any> => {
    stats.notificationsReceived++
    if (notification.method === cancellation.method) return onCancel(notification.params)
    if (gate?.inboundNotification?.(notification.method) === false) return Effect.void
    const handle = notifies.get(notification.method)
    if (handle !== undefined) return runNotification(notification.method, handle(notification.params))
    if (onUnknownNotification !== undefined) {
      return runNotification(notification.method, onUnknownNotification(notification.method, notification.params))
    }
    // LSP: notifications starting with `$/` may be ignored silently; others are logged, never answered.
    return notification.method.startsWith("$/")
      ? Effect.void
      : Effect.logDebug(`no handler for notification ${notification.method}`)
  }

  const onResponse = (response: Message.Response): Effect.Effect<void> => {
    stats.responsesReceived++
    const id = response.id
    const call = id === null ? undefined : pending.get(id)
    if (call !== undefined) {
      pending.delete(id!)
      complete(
        call,
        "result" in response ? Exit.succeed(response.result) : Exit.fail(RpcError.fromWire(response.error))
      )
      wakeIdle()
      return Effect.void
    }
    if (id !== null && tombstones.has(id)) {
      stats.lateResponses++
      return Effect.void
    }
    stats.unknownResponses++
    return id === null
      ? Effect.logWarning(
        "the peer reported an error it could not tie to a request",
        (response as Message.Failure).error
      )
      : Effect.logWarning(`response to an id never sent: ${JSON.stringify(id)}`)
  }

  const onItem = (item: Message.Classified): Effect.Effect<void, never, any> => {
    switch (item._tag) {
      case "Request":
        return onRequest(item.message)
      case "Notification":
        return onNotification(item.message)
      case "Response":
        return onResponse(item.message)
      case "Invalid": {
        stats.invalidMessages++
        const answer = Message.answerTo(item)
        return Effect.zipRight(
          Effect.logWarning(`invalid message: ${item.error.message}`, item.error.data),
          answer === undefined ? Effect.void : write(answer)
        )
      }
    }
  }

  /** A batch is served as a unit: its requests run concurrently and their answers go back as one array. */
  const onBatch = (items: ReadonlyArray<Message.Classified>): Effect.Effect<void, never, any> =>
    Effect.forEach(items, (item): Effect.Effect<Message.Response | undefined, never, any> => {
      if (item._tag === "Invalid") {
        stats.invalidMessages++
        return Effect.succeed(Message.answerTo(item))
      }
      if (item._tag !== "Request") return Effect.as(onItem(item), undefined)
      stats.requestsReceived++
      const request = item.message
      const refused = gate?.inbound(request.method)
      if (refused !== undefined) return Effect.succeed(Message.failure(request.id, refused))
      const serve = serves.get(request.method)
      if (serve === undefined) {
        return Effect.succeed(Message.failure(request.id, RpcError.RpcError.methodNotFound(request.method)))
      }
      return serve(request.params, { id: request.id, method: request.method }).pipe(
        Effect.map((result): Message.Response => Message.success(request.id, result)),
        Effect.catchAllCause((cause) =>
          Effect.succeed(Message.failure(
            request.id,
            Option.getOrElse(Cause.failureOption(cause), () => RpcError.RpcError.internalError())
          ))
        )
      )
    }, { concurrency: "unbounded" }).pipe(
      Effect.flatMap((answers) => {
        const batch = answers.filter((a): a is Message.Response => a !== undefined)
        return batch.length === 0 ? Effect.void : write(batch)
      }),
      Effect.ensuring(Effect.sync(() => {
        inboundActive--
        wakeIdle()
      })),
      (effect) => {
        inboundActive++
        return Effect.asVoid(FiberSet.run(notificationFibers, effect))
      }
    )

  const onFrame = (body: Uint8Array): Effect.Effect<void, never, any> => {
    const incoming = Message.parse(body)
    return incoming._tag === "Single" ? onItem(incoming.item) : onBatch(incoming.items)
  }

  // -- connection ----------------------------------------------------------------------------------------------

  const failPending = (error: PeerError.Disconnect): ReadonlyArray<Peer.CutOff> => {
    const cut: Array<Peer.CutOff> = []
    for (const [id, call] of pending) {
      cut.push({ direction: "outbound", id, method: call.method })
      tombstones.add(id)
      stats.failedByDisconnect++
      complete(call, Exit.fail(error))
    }
    pending.clear()
    wakeIdle()
    return cut
  }

  /** No answer can come any more: fail what waits for one, refuse new calls, tell whoever watches `closed`. */
  const lose = (error: PeerError.Disconnect): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (disconnect === undefined) disconnect = error
      failPending(disconnect)
      return Effect.asVoid(Deferred.succeed(closed, disconnect))
    })

  const reader = transport.incoming.pipe(
    Framing.decode(framing, options.limits),
    Stream.runForEachChunk((frames) => Effect.forEach(frames, onFrame, { discard: true })),
    Effect.matchCauseEffect({
      onSuccess: () => lose(new PeerError.PeerClosed({ reason: "TransportClosed" })),
      onFailure: (cause) =>
        Cause.isInterruptedOnly(cause) ? Effect.void : Effect.zipRight(
          Effect.logWarning("reading from the peer failed", cause),
          lose(new PeerError.PeerClosed({ reason: "TransportFailed", detail: messageOf(Cause.squash(cause)) }))
        )
    })
  )

  const writer = Effect.gen(function*() {
    while (true) {
      const frames = yield* Queue.takeUpTo(outbound, 256)
      if (Chunk.isEmpty(frames)) {
        yield* writerIdle
        continue
      }
      writing = true
      yield* transport.send(Chunk.toReadonlyArray(frames))
      writing = false
      wakeFlushed()
    }
  }).pipe(
    Effect.catchAll((error) =>
      Effect.zipRight(
        Effect.logWarning("writing to the peer failed", error),
        lose(new PeerError.PeerClosed({ reason: "TransportFailed", detail: error.message }))
      )
    ),
    Effect.ensuring(Effect.sync(() => {
      writing = false
      // Nothing will be written any more: release whoever waits for a flush.
      const waiters = flushWaiters
      flushWaiters = []
      for (const waiter of waiters) Deferred.unsafeDone(waiter, Exit.void)
    }))
  )

  yield* Effect.forkScoped(writer)
  yield* Effect.forkScoped(timer)
  yield* Effect.forkScoped(reader)

  const interruptHandlers: Effect.Effect<ReadonlyArray<Peer.CutOff>> = Effect.suspend(() => {
    const cut: Array<Peer.CutOff> = []
    for (const [id, method] of inboundMethods) {
      tombstones.add(id)
      cut.push({ direction: "inbound", id, method })
    }
    for (const method of notificationMethods.values()) cut.push({ direction: "inbound", id: null, method })
    return Effect.as(Effect.zipRight(FiberMap.clear(requestFibers), FiberSet.clear(notificationFibers)), cut)
  })

  const flush: Effect.Effect<void> = waitFor(isFlushed, (waiter) => flushWaiters.push(waiter))

  const close = (error: PeerError.Disconnect): Effect.Effect<void> =>
    Effect.gen(function*() {
      if (disconnect === undefined) disconnect = error
      failPending(disconnect)
      yield* interruptHandlers
      // Answers already queued (a `shutdown` result, say) still go out, within a bound.
      yield* Effect.timeoutOption(Effect.interruptible(flush), flushTimeout)
      yield* transport.end
      yield* Deferred.succeed(closed, disconnect)
    }).pipe(Effect.uninterruptible)

  yield* Effect.addFinalizer((exit) =>
    close(
      new PeerError.ShutdownError({
        reason: Exit.isInterrupted(exit) ? "Interrupted" : "Stop",
        phase: "Scope"
      })
    )
  )

  const peer: Peer.Peer<Serves, Calls> = {
    protocol: options.protocol,
    call: call as any,
    notify: notify as any,
    callUntyped,
    notifyUntyped,
    stats: Effect.sync(() => snapshot()),
    unsafeStats: () => snapshot(),
    closed: Deferred.await(closed),
    isClosed: Effect.sync(() => disconnect !== undefined),
    awaitIdle: waitFor(isIdle, (waiter) => idleWaiters.push(waiter)),
    flush,
    failPending: (error) => Effect.sync(() => failPending(error)),
    interruptHandlers,
    refuseNew: (error) =>
      Effect.sync(() => {
        if (disconnect === undefined) disconnect = error
      }),
    close
  }
  const snapshot = (): Peer.Stats => ({
    ...stats,
    pendingOutbound: pending.size,
    activeInbound: inboundActive,
    tombstones: tombstones.size
  })
  return peer
})
