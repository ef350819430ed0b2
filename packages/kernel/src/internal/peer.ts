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
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as References from "effect/References"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import * as Cancellation from "../Cancellation.js"
import type * as Method from "../Method.js"
import type * as Peer from "../Peer.js"
import * as PeerError from "../PeerError.js"
import type * as Transport from "../Transport.js"
import { type Deadline, Deadlines } from "./deadlines.js"
import { Tombstones } from "./tombstones.js"

type RequestId = Message.RequestId

type CallExit = Exit.Exit<unknown, unknown>

interface PendingCall extends Deadline {
  readonly id: RequestId
  readonly method: string
  readonly timeoutMillis: number
  /** A typed call's codecs: its answer is decoded before its caller wakes, so the caller resumes with the result. */
  readonly codecs: CallCodecs | undefined
  /** Set once the frame is in the outbound queue: a call abandoned before that needs no cancellation notification. */
  enqueued: boolean
  /** Cleared once the call has ended. */
  live: boolean
  /** The caller's resume callback, once it waits; an outcome that comes before that is kept in `exit`. */
  resume: ((exit: CallExit) => void) | undefined
  exit: CallExit | undefined
}

/** Ends a call once: wakes its caller, or keeps the outcome for when it starts waiting. */
const complete = (call: PendingCall, exit: CallExit): void => {
  if (!call.live) return
  call.live = false
  const resume = call.resume
  call.resume = undefined
  if (resume === undefined) call.exit = exit
  else resume(exit)
}

/** An answer as the caller sees it: decoded with the method's Schemas when the call is typed. */
const answerExit = (call: PendingCall, response: Message.Response): CallExit => {
  const codecs = call.codecs
  if ("result" in response) {
    if (codecs === undefined) return Exit.succeed(response.result)
    const decoded = codecs.decodeResult(response.result)
    return Result.isSuccess(decoded) ? Exit.succeed(decoded.success) : Exit.fail(
      RpcError.RpcError.internalError(`${call.method}: the result does not match its Schema: ${decoded.failure}`)
    )
  }
  const error = RpcError.fromWire(response.error)
  if (codecs?.decodeError === undefined) return Exit.fail(error)
  const typed = codecs.decodeError(error.data)
  return Exit.fail(Result.isSuccess(typed) ? typed.success : error)
}

/**
 * How an inbound request is served. The codecs are plain functions rather than steps of an Effect: a request whose
 * params do not decode is answered without a fiber, and a served one costs the fewest runtime steps.
 */
interface Serve {
  readonly decode: (params: unknown) => Result.Result<unknown, string>
  readonly handle: (params: unknown, context: Peer.HandlerContext) => Effect.Effect<unknown, unknown, any>
  readonly encode: (result: unknown) => Result.Result<unknown, string>
  /** A handler's typed failure as the error to answer with. */
  readonly toError: (error: unknown) => RpcError.RpcError
}

interface Notify {
  readonly decode: (params: unknown) => Result.Result<unknown, string>
  readonly handle: (params: unknown) => Effect.Effect<void, unknown, any>
}

/** Effect's built-in tracer: its spans go nowhere, so `tracing: "auto"` makes none while it is the one installed. */
const builtInTracer = Tracer.nativeTracer

const messageOf = (u: unknown): string => u instanceof Error ? u.message : String(u)

/**
 * A Schema codec as a function that never throws. Method codecs are synchronous (no services, no async transforms),
 * and `Schema.decodeUnknownResult` and its kin throw when decoding dies instead of failing (an input whose getter
 * throws, for one): both come back as a parse failure, so a peer's bad input is -32602, not a defect.
 */
const safely = <A>(
  codec: (u: unknown) => Result.Result<A, Schema.SchemaError>
) =>
(u: unknown): Result.Result<A, string> => {
  try {
    return Result.mapError(codec(u), (error) => error.message)
  } catch (cause) {
    return Result.fail(messageOf(cause))
  }
}

interface CallCodecs {
  readonly encodeParams: (u: unknown) => Result.Result<unknown, string>
  readonly decodeResult: (u: unknown) => Result.Result<unknown, string>
  readonly decodeError: ((u: unknown) => Result.Result<unknown, string>) | undefined
}

/** A method's call codecs, built once per method definition rather than on every call. */
const callCodecs = new WeakMap<Method.AnyRequest, CallCodecs>()
const codecsOf = (method: Method.AnyRequest): CallCodecs => {
  let codecs = callCodecs.get(method)
  if (codecs === undefined) {
    codecs = {
      encodeParams: safely(Schema.encodeUnknownResult(method.params)),
      decodeResult: safely(Schema.decodeUnknownResult(method.result)),
      decodeError: isNever(method.error) ? undefined : safely(Schema.decodeUnknownResult(method.error))
    }
    callCodecs.set(method, codecs)
  }
  return codecs
}

/** A notification's params encoder, built once per method definition. */
const notificationEncoders = new WeakMap<Method.AnyNotification, (u: unknown) => Result.Result<unknown, string>>()
const notificationEncoderOf = (method: Method.AnyNotification) => {
  let encode = notificationEncoders.get(method)
  if (encode === undefined) {
    encode = safely(Schema.encodeUnknownResult(method.params))
    notificationEncoders.set(method, encode)
  }
  return encode
}

const isNever = (schema: Schema.Top): boolean => SchemaAST.isNever(schema.ast)

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
  const data = safely(Schema.encodeUnknownResult(method.error))(error)
  return RpcError.make(code, message, Result.isSuccess(data) ? data.success : undefined)
}

/** What absent params are offered to a params Schema as, in this order of preference. */
const absentCandidates: ReadonlyArray<() => unknown> = [() => undefined, () => null, () => ({}), () => []]

/**
 * A method's params decoder. Absent params (left out, or `null` on the wire, which the classifier reads as left out)
 * are offered to the Schema as `undefined` when it accepts that (`Method.NoParams`, an optional Schema), else as the
 * first of `null`, `{}`, `[]` it accepts (an empty `Struct`, a `Struct` of optional fields, an empty `Tuple`), else as
 * `undefined`, whose refusal is the -32602 answer. Which one is found once, on the first request without params: a
 * request with params pays nothing for it. A fresh `{}` or `[]` each time, since a handler may keep what it gets.
 */
const paramsDecoder = (schema: Method.Codec<any>): (params: unknown) => Result.Result<unknown, string> => {
  const decode = safely(Schema.decodeUnknownResult(schema))
  let absent: (() => unknown) | undefined
  return (params) => {
    if (params !== undefined) return decode(params)
    absent ??= absentCandidates.find((candidate) => Result.isSuccess(decode(candidate()))) ?? absentCandidates[0]
    return decode(absent())
  }
}

const compileRequest = (method: Method.AnyRequest, handler: Peer.RequestHandler<any, any>): Serve => ({
  decode: paramsDecoder(method.params),
  handle: handler as Serve["handle"],
  encode: safely(Schema.encodeUnknownResult(method.result)),
  toError: (error) => toRpcError(method, error)
})

const compileNotification = (method: Method.AnyNotification, handler: Peer.NotificationHandler<any, any>): Notify => ({
  decode: paramsDecoder(method.params),
  handle: handler as Notify["handle"]
})

/** `onUnknownRequest` as a `Serve`: params and results pass as they are, and its failures are `RpcError`s. */
const compileFallback = (
  method: string,
  fallback: NonNullable<Peer.Options<any, any, any>["onUnknownRequest"]>
): Serve => ({
  decode: Result.succeed,
  handle: (params, context) => fallback(method, params, context),
  encode: Result.succeed,
  toError: (error) => error as RpcError.RpcError
})

/** @internal */
export const make = Effect.fnUntraced(function*<Serves extends Method.Any, Calls extends Method.Any, R>(
  options: Peer.Options<Serves, Calls, R>
): Effect.fn.Return<Peer.Peer<Serves, Calls>, never, Scope.Scope | R> {
  const transport: Transport.Transport.Service = options.transport
  const framing = options.framing ?? Framing.contentLength
  const defaultTimeoutMillis = Duration.toMillis(
    Duration.fromInputUnsafe(options.requestTimeout ?? Duration.seconds(5))
  )
  const flushTimeout = Duration.fromInputUnsafe(options.flushTimeout ?? Duration.seconds(1))
  // `undefined` when the protocol has no cancellation: nothing is sent for an abandoned call, and no notification
  // cancels a handler.
  const cancellation = Cancellation.spelling(options.cancellation ?? options.protocol.cancellation)
  const exposeDefects = options.exposeDefects ?? false
  const tracing = options.tracing ?? "auto"
  const gate = options.gate
  // Read once: a call's deadline is then a plain function call, not a step of the caller's Effect. It is the Clock
  // of the fiber that makes the peer, so a TestClock provided there drives every deadline.
  const clock = yield* Clock.Clock
  // Handlers run as root fibers of this context (the services and references, log annotations included, of the fiber
  // that makes the peer), started at once, in the reader's turn: a handler that answers without waiting is done before
  // the next message is looked at.
  const context = yield* Effect.context<R>()
  const forkHandler = Effect.runForkWith(context)
  const annotate = tracing !== false
  const logAnnotations = Context.get(context, References.CurrentLogAnnotations)
  const spans = tracing === true || (tracing === "auto" && (yield* Effect.tracer) !== builtInTracer)

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
  // Inbound work in flight: request handlers by id (with their method), notification handlers and batches by fiber.
  const requestFibers = new Map<RequestId, Fiber.Fiber<void>>()
  const inboundMethods = new Map<RequestId, string>()
  const otherFibers = new Map<Fiber.Fiber<void>, string | undefined>()
  /** Set when `close` begins: from then on nothing new is started, so nothing escapes its interruption. */
  let tornDown = false
  let idleWaiters: Array<Deferred.Deferred<void>> = []
  let flushWaiters: Array<Deferred.Deferred<void>> = []
  let writing = false
  let disconnect: PeerError.Disconnect | undefined
  const closed = yield* Deferred.make<PeerError.Disconnect>()

  const outbound = yield* Queue.bounded<Uint8Array>(options.outboundCapacity ?? 1024)
  const semaphore = options.maxConcurrentHandlers === undefined
    ? undefined
    : yield* Semaphore.make(options.maxConcurrentHandlers)

  const isIdle = () => pending.size === 0 && inboundActive === 0
  const wakeIdle = () => {
    if (idleWaiters.length === 0 || !isIdle()) return
    const waiters = idleWaiters
    idleWaiters = []
    for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
  }
  /** Frames waiting in the outbound queue. */
  const queued = () => Queue.sizeUnsafe(outbound)
  /**
   * Frames that found the outbound queue full (or other frames still waiting here), oldest first. A request's caller
   * waits for the answer anyway, so its frame waits here rather than in a `Queue.offer` raced against the deadline (a
   * fork and a timer per call); a notification's or an answer's sender waits for `wake`. The writer moves them into
   * the queue as room frees up, in order, and skips the ones that ended meanwhile (a call timed out, interrupted or
   * failed by a disconnect; a sender interrupted). While anything waits here, no frame goes ahead of it (see
   * `offerNow`): frames leave in the order they were issued.
   */
  interface Waiting {
    readonly frame: Uint8Array
    readonly call: PendingCall | undefined
    /** Resumes the sender of a frame that is not a request; cleared when that sender is interrupted. */
    wake: (() => void) | undefined
  }
  let overflow: Array<Waiting> = []
  const isLive = (waiting: Waiting): boolean =>
    waiting.call === undefined ? waiting.wake !== undefined : waiting.call.live
  const refill = (): void => {
    let i = 0
    let woken: Array<() => void> | undefined
    while (i < overflow.length) {
      const waiting = overflow[i]
      if (isLive(waiting)) {
        if (!Queue.offerUnsafe(outbound, waiting.frame)) break
        if (waiting.call !== undefined) waiting.call.enqueued = true
        else {
          ;(woken ??= []).push(waiting.wake!)
          waiting.wake = undefined
        }
      }
      i++
    }
    if (i > 0) overflow = overflow.slice(i)
    // A woken sender runs at once, in this stack, and may queue more or look at `overflow` (a flush): it is woken
    // only once `overflow` holds what is still waiting.
    if (woken !== undefined) { for (const wake of woken) wake() }
  }
  const isFlushed = () => {
    if (overflow.length > 0) overflow = overflow.filter(isLive)
    return !writing && queued() === 0 && overflow.length === 0
  }
  const wakeFlushed = () => {
    if (flushWaiters.length === 0 || !isFlushed()) return
    const waiters = flushWaiters
    flushWaiters = []
    for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
  }
  const waitFor = (ready: () => boolean, register: (waiter: Deferred.Deferred<void>) => void) =>
    Effect.suspend(() => {
      if (ready()) return Effect.void
      const waiter = Deferred.makeUnsafe<void>()
      register(waiter)
      return Deferred.await(waiter)
    })

  const frameOf = (message: Message.Message | ReadonlyArray<Message.Message>) =>
    Result.map(Message.stringify(message), framing.encodeString)

  // The writer parks on its own callback rather than in `Queue.take`, which every round trip would go through twice
  // (both writers wake). It parks only when both the queue and `overflow` are empty, so a frame waiting for room never
  // finds it parked. A resumed fiber runs at once, in the stack that resumes it: the writer is resumed into
  // `Effect.yieldNow`, so it runs on the scheduler's next turn rather than inside whoever queued a frame, and takes
  // every frame queued meanwhile into one `send` (and the queue has room again for what comes after them).
  let parkedWriter: ((effect: Effect.Effect<void>) => void) | undefined
  const wakeWriter = (): void => {
    const resume = parkedWriter
    if (resume === undefined) return
    parkedWriter = undefined
    resume(Effect.yieldNow)
  }
  const writerIdle = Effect.callback<void>((resume) => {
    if (queued() > 0 || overflow.length > 0) return resume(Effect.void)
    parkedWriter = resume
    return Effect.sync(() => {
      parkedWriter = undefined
    })
  })
  const trySend = transport.unsafeTrySend
  /**
   * Hands a frame on without waiting, if it can: straight to the transport while the writer is parked (so nothing of
   * ours is queued or being sent, and order holds), else into the queue for the writer.
   */
  const handOver = (frame: Uint8Array): boolean => {
    if (parkedWriter !== undefined && trySend !== undefined && trySend(frame)) return true
    if (!Queue.offerUnsafe(outbound, frame)) return false
    wakeWriter()
    return true
  }
  /** `handOver`, but never ahead of a frame that waits in `overflow`. */
  const offerNow = (frame: Uint8Array): boolean => overflow.length === 0 && handOver(frame)
  /** Queues a frame, waiting while the queue is full: this is where a slow reader pushes back. */
  const enqueue = (frame: Uint8Array): Effect.Effect<void> =>
    offerNow(frame) ? Effect.void : Effect.callback<void>((resume) => {
      const waiting: Waiting = { frame, call: undefined, wake: () => resume(Effect.void) }
      overflow.push(waiting)
      wakeWriter()
      return Effect.sync(() => {
        waiting.wake = undefined
      })
    })
  /** Queues a message; the result is `Effect.void` when it was queued at once, so callers in a loop can skip it. */
  const write = (message: Message.Message | ReadonlyArray<Message.Message>): Effect.Effect<void> => {
    const frame = frameOf(message)
    if (Result.isFailure(frame)) return Effect.logError("BUG: a message could not be serialised", frame.failure)
    return enqueue(frame.success)
  }
  /** For finalizers: never waits. A full queue means the other side is not reading, so the frame would not help. */
  const unsafeWrite = (message: Message.Message): void => {
    const frame = frameOf(message)
    // A cancellation or a -32800 answer may pass frames waiting in `overflow`: it concerns a request already sent.
    if (Result.isSuccess(frame)) handOver(frame.success)
  }

  // -- outbound ------------------------------------------------------------------------------------------------

  // A lost connection says how it was lost; a shutdown is best described by the lifecycle's current phase.
  const refusal = (): PeerError.Disconnect | undefined =>
    disconnect !== undefined && disconnect._tag !== "ShutdownError" ? disconnect : gate?.outbound() ?? disconnect

  // One timer for every call's timeout: it sleeps (on the Clock, so TestClock drives it) until the earliest
  // deadline, expires what is due, and is woken when a call with an earlier deadline arrives. A call that ends
  // otherwise leaves the heap at once.
  const deadlines = new Deadlines<PendingCall>()
  let timerTarget = Infinity
  let timerWake: Deferred.Deferred<void> | undefined
  const schedule = (call: PendingCall): void => {
    deadlines.push(call)
    if (call.deadline < timerTarget && timerWake !== undefined) Deferred.doneUnsafe(timerWake, Exit.void)
  }

  /**
   * The call ended without an answer (timed out, or its caller was interrupted): forget it, and tell the other side
   * when the protocol has a way to.
   */
  const abandon = (call: PendingCall, timedOut: boolean): void => {
    deadlines.remove(call)
    if (pending.get(call.id) !== call) return // answered, or failed by a disconnect
    pending.delete(call.id)
    tombstones.add(call.id)
    // The answer may already be on its way: if it arrives it meets the tombstone and is dropped and counted.
    if (cancellation !== undefined && call.enqueued && disconnect === undefined) {
      const reason = timedOut ? `timed out after ${call.timeoutMillis} ms` : "cancelled by the caller"
      unsafeWrite(Message.notification(cancellation.method, cancellation.encode(call.id, reason)))
    }
    wakeIdle()
  }

  const expire = (now: number): void => {
    while (true) {
      const next = deadlines.peek()
      if (next === undefined || next.deadline > now) return
      deadlines.pop()
      stats.timedOut++
      abandon(next, true)
      complete(
        next,
        Exit.fail(new PeerError.RequestTimeout({ method: next.method, id: next.id, timeoutMillis: next.timeoutMillis }))
      )
    }
  }
  const timer = Effect.gen(function*() {
    while (true) {
      const wake = Deferred.makeUnsafe<void>()
      timerWake = wake
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

  /** The caller was interrupted while its call was pending: end the call (and tell the other side, if we can). */
  const cancelByCaller = (call: PendingCall): void => {
    if (!call.live) return
    call.live = false
    call.resume = undefined
    stats.cancelledByUs++
    abandon(call, false)
  }

  const awaitCall = (call: PendingCall): Effect.Effect<unknown, unknown> =>
    Effect.callback((resume) => {
      if (call.exit !== undefined) {
        const exit = call.exit
        call.exit = undefined
        return resume(exit)
      }
      call.resume = resume
      return Effect.sync(() => cancelByCaller(call))
    })

  const timeoutMillisOf = (timeout: Duration.Input | undefined): number =>
    timeout === undefined ? defaultTimeoutMillis : Duration.toMillis(Duration.fromInputUnsafe(timeout))

  /**
   * Sends a request and waits for its answer; run inside the caller's `Effect.suspend`. A typed call passes its
   * codecs, and its caller wakes with the decoded result or typed error.
   */
  const startCall = (
    method: string,
    params: Message.Params | undefined,
    timeoutMillis: number,
    codecs: CallCodecs | undefined
  ): Effect.Effect<unknown, unknown> => {
    const refused = refusal()
    if (refused !== undefined) return Effect.fail(refused)
    const id = nextId++
    const frame = frameOf(Message.request(id, method, params))
    if (Result.isFailure(frame)) return Effect.fail(frame.failure)
    const call: PendingCall = {
      id,
      method,
      timeoutMillis,
      deadline: clock.currentTimeMillisUnsafe() + timeoutMillis,
      heapIndex: -1,
      codecs,
      live: true,
      enqueued: false,
      resume: undefined,
      exit: undefined
    }
    // Registered before the frame can leave, so even an instant answer finds its call.
    pending.set(id, call)
    stats.requestsSent++
    if (offerNow(frame.success)) {
      call.enqueued = true
    } else {
      // The queue is full (a slow reader), or frames wait for room before this one: the frame waits in `overflow`
      // until the writer has room for it, or the call ends first (its deadline, its caller's interruption), and then
      // it is never sent.
      overflow.push({ call, frame: frame.success, wake: undefined })
      wakeWriter()
    }
    // Its deadline is set once the frame is on its way: waking the timer runs it at once, in this stack, and a call it
    // expires is then cancelled on the wire like any other. An instant answer may have ended the call already.
    if (call.live) schedule(call)
    return awaitCall(call)
  }

  const callUntyped = (
    method: string,
    params?: Message.Params | undefined,
    callOptions?: Peer.CallOptions | undefined
  ) =>
    Effect.suspend(() => startCall(method, params, timeoutMillisOf(callOptions?.timeout), undefined)) as Effect.Effect<
      unknown,
      RpcError.RpcError | PeerError.RequestTimeout | PeerError.Disconnect
    >

  const call = (method: Method.AnyRequest, params: unknown, callOptions?: Peer.CallOptions) =>
    Effect.suspend(() => {
      const codecs = codecsOf(method)
      const encoded = codecs.encodeParams(params)
      if (Result.isFailure(encoded)) return Effect.fail(RpcError.RpcError.invalidParams(encoded.failure))
      return startCall(
        method.name,
        encoded.success as Message.Params | undefined,
        timeoutMillisOf(callOptions?.timeout ?? method.timeout),
        codecs
      )
    })

  const sendNotification = (
    method: string,
    params: Message.Params | undefined
  ): Effect.Effect<void, PeerError.Disconnect> => {
    const refused = refusal()
    if (refused !== undefined) return Effect.fail(refused)
    stats.notificationsSent++
    return write(Message.notification(method, params))
  }

  const notifyUntyped = (
    method: string,
    params?: Message.Params | undefined
  ): Effect.Effect<void, PeerError.Disconnect> => Effect.suspend(() => sendNotification(method, params))

  const notify = (method: Method.AnyNotification, params: unknown) =>
    Effect.suspend(() => {
      const encoded = notificationEncoderOf(method)(params)
      if (Result.isFailure(encoded)) {
        return Effect.die(new Error(`${method.name}: params do not match their Schema: ${encoded.failure}`))
      }
      return sendNotification(method.name, encoded.success as Message.Params | undefined)
    })

  // -- inbound -------------------------------------------------------------------------------------------------

  const failWith = (id: RequestId, cause: Cause.Cause<unknown>, method: string, serve: Serve): Effect.Effect<void> => {
    const failure = Cause.findErrorOption(cause)
    if (Option.isSome(failure)) return write(Message.failure(id, serve.toError(failure.value)))
    stats.handlerDefects++
    return Effect.andThen(
      Effect.logError(`handler ${method} died`, cause),
      write(Message.failure(id, RpcError.RpcError.internalError(exposeDefects ? Cause.pretty(cause) : undefined)))
    )
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
   * Starts an inbound request's handler as its own fiber, with its log annotations written into the context the new
   * fiber starts with. `Effect.annotateLogs` would provide them in a step of the handler's own: on effect 4.1, forking
   * with it cost ~0.4 µs against ~0.2 µs this way (~0.1 µs for the bare fork).
   */
  const forkRequest = (id: RequestId, method: string, effect: Effect.Effect<void, never, any>) => {
    if (!annotate) return forkHandler(effect)
    return Effect.runForkWith(
      Context.add(context, References.CurrentLogAnnotations, { ...logAnnotations, "rpc.method": method, "rpc.id": id })
    )(
      spans
        ? Effect.withSpan(effect, `rpc.serve ${method}`, {
          kind: "server",
          attributes: { "rpc.id": id },
          // No stack trace: it would point here, never at the caller, and capturing it cost ~3 µs per request.
          captureStackTrace: false
        })
        : effect
    )
  }

  const serveRequest = (request: Message.Request, serve: Serve, params: unknown): Effect.Effect<void, never, any> => {
    const id = request.id
    const run = serve.handle(params, { id, method: request.method })
    return Effect.matchCauseEffect(semaphore === undefined ? run : semaphore.withPermits(1)(run), {
      onSuccess: (result) => write(success(request, serve, result)),
      onFailure: (cause) => Cause.hasInterruptsOnly(cause) ? Effect.void : failWith(id, cause, request.method, serve)
    })
  }

  /**
   * Starts inbound work as its own fiber, counted as in flight until it ends: a drain waits for it, a teardown
   * interrupts and reports it.
   */
  const start = (effect: Effect.Effect<void, never, any>, method: string | undefined): void => {
    inboundActive++
    const fiber = forkHandler(effect)
    if (fiber.pollUnsafe() === undefined) otherFibers.set(fiber, method)
    fiber.addObserver(() => {
      otherFibers.delete(fiber)
      inboundActive--
      wakeIdle()
    })
  }

  const onRequest = (request: Message.Request): Effect.Effect<void> => {
    stats.requestsReceived++
    const id = request.id
    const refused = gate?.inbound(request.method) ??
      (tornDown ? RpcError.RpcError.shuttingDown(request.method) : undefined)
    if (refused !== undefined) return write(Message.failure(id, refused))
    if (requestFibers.has(id)) {
      return write(
        Message.failure(id, RpcError.RpcError.invalidRequest(`A request with id ${id} is already in progress`))
      )
    }
    let serve = serves.get(request.method)
    if (serve === undefined && onUnknownRequest !== undefined) serve = compileFallback(request.method, onUnknownRequest)
    if (serve === undefined) return write(Message.failure(id, RpcError.RpcError.methodNotFound(request.method)))
    const params = serve.decode(request.params)
    if (Result.isFailure(params)) return write(Message.failure(id, RpcError.RpcError.invalidParams(params.failure)))
    inboundActive++
    inboundMethods.set(id, request.method)
    const fiber = forkRequest(id, request.method, serveRequest(request, serve, params.success))
    if (fiber.pollUnsafe() === undefined) requestFibers.set(id, fiber)
    // The bookkeeping runs as the fiber's observer rather than as an `Effect.onExit` step inside it: one
    // uninterruptible region less per request.
    fiber.addObserver((exit) => {
      if (requestFibers.get(id) === fiber) requestFibers.delete(id)
      // Cancelled by the peer: LSP still wants an answer, MCP does not. Interrupted by a shutdown: nobody is waiting
      // for one.
      const cancelled = cancelledInbound.delete(id)
      if (cancelled && Exit.isFailure(exit) && cancellation!.answerCancelled !== false) {
        unsafeWrite(Message.failure(id, RpcError.RpcError.requestCancelled()))
      }
      inboundMethods.delete(id)
      inboundActive--
      wakeIdle()
    })
    return Effect.void
  }

  const onCancel = (cancellation: Cancellation.Spelling, params: unknown): void => {
    const id = cancellation.decode(params)
    const fiber = id === undefined ? undefined : requestFibers.get(id)
    if (fiber === undefined || cancelledInbound.has(id!)) return // finished already (a race), or cancelled twice
    stats.cancelledByPeer++
    cancelledInbound.add(id!)
    // Without waiting: the handler's finalizers run at once up to their first wait, and the reader reads on while they
    // finish.
    fiber.interruptUnsafe()
  }

  const notificationFailed = (method: string) => (cause: Cause.Cause<unknown>) =>
    Cause.hasInterruptsOnly(cause) ? Effect.void : Effect.logWarning(`notification ${method} failed`, cause)

  const onNotification = (notification: Message.Notification): Effect.Effect<void> => {
    stats.notificationsReceived++
    const method = notification.method
    if (cancellation !== undefined && method === cancellation.method) {
      onCancel(cancellation, notification.params)
      return Effect.void
    }
    if (gate?.inboundNotification?.(method) === false || tornDown) return Effect.void
    const notify = notifies.get(method)
    if (notify !== undefined) {
      const params = notify.decode(notification.params)
      if (Result.isFailure(params)) return Effect.logWarning(`notification ${method} failed: ${params.failure}`)
      start(Effect.catchCause(notify.handle(params.success), notificationFailed(method)), method)
      return Effect.void
    }
    if (onUnknownNotification !== undefined) {
      start(
        Effect.catchCause(onUnknownNotification(method, notification.params), notificationFailed(method)),
        method
      )
      return Effect.void
    }
    // LSP: notifications starting with `$/` may be ignored silently; others are logged, never answered.
    return method.startsWith("$/") ? Effect.void : Effect.logDebug(`no handler for notification ${method}`)
  }

  const onResponse = (response: Message.Response): Effect.Effect<void> => {
    stats.responsesReceived++
    const id = response.id
    const call = id === null ? undefined : pending.get(id)
    if (call !== undefined) {
      pending.delete(id!)
      deadlines.remove(call)
      complete(call, answerExit(call, response))
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

  const onItem = (item: Message.Classified): Effect.Effect<void> => {
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
        return Effect.andThen(
          Effect.logWarning(`invalid message: ${item.error.message}`, item.error.data),
          answer === undefined ? Effect.void : write(answer)
        )
      }
    }
  }

  /** One request of a batch, answered as a value: the batch's answers go back together. */
  const answerInBatch = (request: Message.Request): Effect.Effect<Message.Response, never, any> => {
    stats.requestsReceived++
    const id = request.id
    const refused = gate?.inbound(request.method)
    if (refused !== undefined) return Effect.succeed(Message.failure(id, refused))
    let serve = serves.get(request.method)
    if (serve === undefined && onUnknownRequest !== undefined) serve = compileFallback(request.method, onUnknownRequest)
    if (serve === undefined) {
      return Effect.succeed(Message.failure(id, RpcError.RpcError.methodNotFound(request.method)))
    }
    const params = serve.decode(request.params)
    if (Result.isFailure(params)) {
      return Effect.succeed(Message.failure(id, RpcError.RpcError.invalidParams(params.failure)))
    }
    const answering = serve
    return answering.handle(params.success, { id, method: request.method }).pipe(
      Effect.matchCauseEffect({
        onSuccess: (result) => Effect.succeed(success(request, answering, result)),
        onFailure: (cause) => {
          const failure = Cause.findErrorOption(cause)
          if (Option.isSome(failure)) return Effect.succeed(Message.failure(id, answering.toError(failure.value)))
          // A defect is counted, logged and answered as in a single request (`failWith`).
          stats.handlerDefects++
          return Effect.as(
            Effect.logError(`handler ${request.method} died`, cause),
            Message.failure(id, RpcError.RpcError.internalError(exposeDefects ? Cause.pretty(cause) : undefined))
          )
        }
      })
    )
  }

  /** A batch is served as a unit: its requests run concurrently and their answers go back as one array. */
  const onBatch = (items: ReadonlyArray<Message.Classified>): Effect.Effect<void> => {
    if (tornDown) {
      // Closing: nothing new starts, but each request still gets its -32003, as a single request would.
      const refused = items.flatMap((item) =>
        item._tag === "Request"
          ? [Message.failure(item.message.id, RpcError.RpcError.shuttingDown(item.message.method))]
          : []
      )
      return refused.length === 0 ? Effect.void : write(refused)
    }
    start(
      Effect.forEach(items, (item): Effect.Effect<Message.Response | undefined, never, any> => {
        if (item._tag === "Invalid") {
          stats.invalidMessages++
          return Effect.succeed(Message.answerTo(item))
        }
        if (item._tag === "Request") return answerInBatch(item.message)
        return Effect.as(onItem(item), undefined)
      }, { concurrency: "unbounded" }).pipe(
        Effect.flatMap((answers) => {
          const batch = answers.filter((a): a is Message.Response => a !== undefined)
          return batch.length === 0 ? Effect.void : write(batch)
        })
      ),
      undefined
    )
    return Effect.void
  }

  const onFrame = (body: Uint8Array): Effect.Effect<void> => {
    const incoming = Message.parse(body)
    return incoming._tag === "Single" ? onItem(incoming.item) : onBatch(incoming.items)
  }

  /**
   * Handles frames in order, in plain code for as long as each one is done at once (an answer matched, a handler
   * started, a frame queued), stepping into the Effect only for the frame that has to wait.
   */
  const onFrames = (
    frames: ReadonlyArray<Uint8Array>,
    from: number,
    error: Framing.FramingError | undefined
  ): Effect.Effect<void, Framing.FramingError> => {
    for (let i = from; i < frames.length; i++) {
      const effect = onFrame(frames[i])
      if (effect !== Effect.void) {
        return i + 1 === frames.length && error === undefined
          ? effect
          : Effect.andThen(effect, Effect.suspend(() => onFrames(frames, i + 1, error)))
      }
    }
    return error === undefined ? Effect.void : Effect.fail(error)
  }

  /** The framing decoder is driven here rather than through `Framing.decode`'s Channel: one stage less per chunk. */
  const onChunks = (decoder: Framing.Decoder, chunks: ReadonlyArray<Uint8Array>) =>
    Effect.suspend(() => {
      if (chunks.length === 1) {
        const step = decoder.push(chunks[0])
        return onFrames(step.frames, 0, step.error)
      }
      const frames: Array<Uint8Array> = []
      let error: Framing.FramingError | undefined
      for (const chunk of chunks) {
        const step = decoder.push(chunk)
        for (let i = 0; i < step.frames.length; i++) frames.push(step.frames[i])
        error = step.error
        if (error !== undefined) break
      }
      return onFrames(frames, 0, error)
    })

  // -- connection ----------------------------------------------------------------------------------------------

  const failPending = (error: PeerError.Disconnect): ReadonlyArray<Peer.CutOff> => {
    const cut: Array<Peer.CutOff> = []
    // Taken out of the table first: a caller woken below runs at once, in this stack, and may call again.
    const calls = Array.from(pending.values())
    pending.clear()
    deadlines.clear()
    for (const call of calls) {
      cut.push({ direction: "outbound", id: call.id, method: call.method })
      tombstones.add(call.id)
      stats.failedByDisconnect++
      complete(call, Exit.fail(error))
    }
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

  const reader = Effect.suspend(() => {
    const decoder = framing.unsafeMakeDecoder(options.limits)
    return transport.incoming.pipe(
      Stream.runForEachArray((chunks) => onChunks(decoder, chunks)),
      Effect.andThen(Effect.suspend(() => {
        const error = decoder.end()
        return error === undefined ? Effect.void : Effect.fail(error)
      }))
    )
  }).pipe(
    Effect.matchCauseEffect({
      onSuccess: () => lose(new PeerError.PeerClosed({ reason: "TransportClosed" })),
      onFailure: (cause) =>
        Cause.hasInterruptsOnly(cause) ? Effect.void : Effect.andThen(
          Effect.logWarning("the connection to the peer failed", cause),
          lose(new PeerError.PeerClosed({ reason: "TransportFailed", detail: messageOf(Cause.squash(cause)) }))
        )
    })
  )

  const writer = Effect.gen(function*() {
    while (true) {
      if (overflow.length > 0) refill()
      if (queued() === 0) {
        yield* writerIdle
        continue
      }
      // At least one frame is queued, so this takes without waiting.
      const frames = yield* Queue.takeBetween(outbound, 1, 256)
      writing = true
      yield* transport.send(frames)
      writing = false
      wakeFlushed()
    }
  }).pipe(
    Effect.catch((error) =>
      Effect.andThen(
        Effect.logWarning("writing to the peer failed", error),
        lose(new PeerError.PeerClosed({ reason: "TransportFailed", detail: error.message }))
      )
    ),
    Effect.ensuring(Effect.sync(() => {
      writing = false
      // Nothing will be written any more: release whoever waits for a flush.
      const waiters = flushWaiters
      flushWaiters = []
      for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
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
    for (const method of otherFibers.values()) {
      if (method !== undefined) cut.push({ direction: "inbound", id: null, method })
    }
    return Effect.as(Fiber.interruptAll([...requestFibers.values(), ...otherFibers.keys()]), cut)
  })

  const flush: Effect.Effect<void> = waitFor(isFlushed, (waiter) => flushWaiters.push(waiter))

  const close = (error: PeerError.Disconnect): Effect.Effect<void> =>
    Effect.gen(function*() {
      tornDown = true
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
        reason: Exit.hasInterrupts(exit) ? "Interrupted" : "Stop",
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
