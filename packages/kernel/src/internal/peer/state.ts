/**
 * The one record a peer's parts share: what `Peer.make` was given, read once, and every table and flag the reader, the
 * writer, the timer and callers change. Each part (`writer`, `outbound`, `inbound`, `reader`, `teardown`) is a set of
 * functions over this record; nothing else is shared between them. Bookkeeping lives in plain maps owned by the peer
 * (no fiber per outbound call), because that is what keeps the runtime off the critical path (see DESIGN.md,
 * "Performance notes").
 *
 * @internal
 */
import * as Framing from "@lifeline/jsonrpc/Framing"
import * as Message from "@lifeline/jsonrpc/Message"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as References from "effect/References"
import * as Semaphore from "effect/Semaphore"
import * as Tracer from "effect/Tracer"
import * as Bounds from "../../Bounds.js"
import * as Cancellation from "../../Cancellation.js"
import type * as Peer from "../../Peer.js"
import type * as PeerError from "../../PeerError.js"
import type * as Transport from "../../Transport.js"
import { type Deadline, Deadlines } from "../deadlines.js"
import { Tombstones } from "../tombstones.js"
import { type CallCodecs, compileNotification, compileRequest, type Notify, type Serve } from "./codecs.js"

/** @internal */
export type RequestId = Message.RequestId

/** @internal */
export type CallExit = Exit.Exit<unknown, unknown>

/**
 * An outbound call waiting for its answer. Whoever waits for it (a fiber through `Effect.callback`, or a Promise
 * client's callbacks) registers `resume`; the reader, the timer and a disconnect end it with `complete`. `deadline`
 * is relative to the peer's `epoch`.
 *
 * @internal
 */
export interface PendingCall extends Deadline {
  readonly id: RequestId
  readonly method: string
  readonly timeoutMillis: number
  /** A typed call's codecs: its answer is decoded before its caller wakes, so the caller resumes with the result. */
  readonly codecs: CallCodecs | undefined
  /** Set once the frame is in the outbound queue: a call abandoned before that needs no cancellation notification. */
  enqueued: boolean
  /** Cleared once the call has ended. */
  live: boolean
  /**
   * The caller's resume callback, once it waits; an outcome that comes before that is kept in `exit`. For a Promise
   * caller without a signal, it is the Promise's `resolve`, and `reject` is set: the outcome settles the Promise with
   * no callback of its own (a closure and its context, ~100 bytes per pending call).
   */
  resume: ((exit: any) => void) | undefined
  reject: ((error: unknown) => void) | undefined
  exit: CallExit | undefined
}

/**
 * A frame that found the outbound queue full (or other frames still waiting), oldest first. A request's caller waits
 * for the answer anyway, so its frame waits here rather than in a `Queue.offer` raced against the deadline (a fork and
 * a timer per call); a notification's or an answer's sender waits for `wake`. See `writer.ts`.
 *
 * @internal
 */
export interface Waiting {
  readonly frame: Uint8Array
  readonly call: PendingCall | undefined
  /** The frame's size when it is an answer (counted against the answers bound, see `flow.ts`), else 0. */
  readonly answerBytes: number
  /** Resumes the sender of a frame that is not a request; cleared when that sender is interrupted. */
  wake: (() => void) | undefined
}

/**
 * The counters of `Peer.Stats`; its gauges are read from the tables by `snapshot`.
 *
 * @internal
 */
export type Counters = {
  -readonly [K in Exclude<keyof Peer.Stats, keyof Gauges>]: number
}

type Gauges = Pick<
  Peer.Stats,
  "pendingOutbound" | "activeInbound" | "tombstones" | "pendingAnswers" | "pendingAnswerBytes"
>

/** @internal */
export interface State {
  // -- configuration, read once in `make` ----------------------------------------------------------------------
  readonly transport: Transport.Transport.Service
  readonly framing: Framing.Framing
  readonly limits: Partial<Framing.Limits> | undefined
  /** What one frame's body may hold (batch size, nesting), resolved once: `Message.parse` reads it per frame. */
  readonly messageLimits: Message.Limits
  /** At most one WARN about the peer's messages per this many milliseconds (the others counted, see `invalidLog`). */
  readonly invalidLogIntervalMillis: number
  readonly defaultTimeoutMillis: number
  readonly flushTimeout: Duration.Duration
  /** `undefined` when the protocol has no cancellation: nothing is sent for an abandoned call, and none is obeyed. */
  readonly cancellation: Cancellation.Spelling | undefined
  readonly exposeDefects: boolean
  readonly gate: Peer.Gate | undefined
  /**
   * Read once: a call's deadline is then a plain function call, not a step of the caller's Effect. It is the Clock of
   * the fiber that makes the peer, so a TestClock provided there drives every deadline.
   */
  readonly clock: Clock.Clock
  /**
   * The Clock's time when the peer was made. Deadlines are relative to it, so for 24 days they are small integers,
   * which V8 keeps in the call's entry itself rather than as a boxed number per pending call.
   */
  readonly epoch: number
  /**
   * Handlers run as root fibers of this context (the services and references, log annotations included, of the fiber
   * that makes the peer), started at once, in the reader's turn: a handler that answers without waiting is done before
   * the next message is looked at.
   */
  readonly context: Context.Context<any>
  readonly forkHandler: <A, E>(effect: Effect.Effect<A, E, any>) => Fiber.Fiber<A, E>
  readonly annotate: boolean
  readonly logAnnotations: Readonly<Record<string, unknown>>
  readonly spans: boolean
  /** W3C trace context in `params._meta` (`traceContext.ts`): read from outbound callers' spans, continued inbound. */
  readonly propagate: boolean
  readonly serves: ReadonlyMap<string, Serve>
  readonly notifies: ReadonlyMap<string, Notify>
  readonly onUnknownRequest: Peer.Options<any, any, any>["onUnknownRequest"]
  readonly onUnknownNotification: Peer.Options<any, any, any>["onUnknownNotification"]
  readonly semaphore: Semaphore.Semaphore | undefined
  readonly trySend: ((frame: Uint8Array) => boolean) | undefined
  readonly outbound: Queue.Queue<Uint8Array>
  /** The answers bound and the stall bound (`flow.ts`). */
  readonly maxPendingAnswers: number
  readonly maxPendingAnswerBytes: number
  readonly stallTimeout: Duration.Duration
  readonly closed: Deferred.Deferred<PeerError.Disconnect>
  readonly stats: Counters
  /** The rate limit of `warnAboutPeer`: when the last WARN was logged, and how many were left out since. */
  readonly invalidLog: { loggedAt: number | undefined; suppressed: number }

  // -- outbound calls ------------------------------------------------------------------------------------------
  nextId: number
  /** Replaced, not cleared, when every call ends at once (`detach.ts`). */
  pending: Map<RequestId, PendingCall>
  readonly tombstones: Tombstones<RequestId>
  /** One timer for every call's timeout: see `outbound.ts`. A call that ends otherwise leaves the heap at once. */
  readonly deadlines: Deadlines<PendingCall>
  timerTarget: number
  timerWake: Deferred.Deferred<void> | undefined

  // -- inbound work --------------------------------------------------------------------------------------------
  readonly cancelledInbound: Set<RequestId>
  inboundActive: number
  /** Inbound work in flight: request handlers by id (with their method), notification handlers and batches by fiber. */
  readonly requestFibers: Map<RequestId, Fiber.Fiber<void>>
  readonly inboundMethods: Map<RequestId, string>
  readonly otherFibers: Map<Fiber.Fiber<void>, string | undefined>
  /** The requests of batches whose handlers run now: a teardown reports them one by one, as single requests. */
  readonly batchedRequests: Set<Peer.CutOff>

  // -- writer --------------------------------------------------------------------------------------------------
  writing: boolean
  /** Set when the writer fiber has ended: a flush then has nothing to wait for. */
  writerEnded: boolean
  overflow: Array<Waiting>
  /** The writer's resume callback while it is parked with nothing to write. */
  parkedWriter: ((effect: Effect.Effect<void>) => void) | undefined
  /**
   * Answers handed to the writer and not yet to the transport, and their bytes (`flow.ts`). Those in the outbound
   * queue are found by `queuedAnswerBytes`: the answer bytes of each queued frame (0 for a request or a notification),
   * a ring in queue order, so the writer knows what it takes without a record per frame.
   */
  pendingAnswers: number
  pendingAnswerBytes: number
  queuedAnswerBytes: Float64Array
  queuedHead: number
  queuedCount: number
  /** The reader, while it holds a request until answers drain below the bound. */
  drainWaiters: Array<Deferred.Deferred<void>>

  // -- connection ----------------------------------------------------------------------------------------------
  /** Set when `close` begins: from then on nothing new is started, so nothing escapes its interruption. */
  tornDown: boolean
  disconnect: PeerError.Disconnect | undefined
  idleWaiters: Array<Deferred.Deferred<void>>
  flushWaiters: Array<Deferred.Deferred<void>>
}

/** Effect's built-in tracer: its spans go nowhere, so `tracing: "auto"` makes none while it is the one installed. */
const builtInTracer = Tracer.nativeTracer

/**
 * Reads the options once and makes the record, with its compiled handlers and its outbound queue.
 *
 * @internal
 */
export const make = Effect.fnUntraced(function*<R>(
  options: Peer.Options<any, any, R>
): Effect.fn.Return<State, never, R> {
  const clock = yield* Clock.Clock
  const context = yield* Effect.context<R>()
  const tracing = options.tracing ?? "auto"
  const serves = new Map<string, Serve>()
  const notifies = new Map<string, Notify>()
  const handlers = options.handlers as Record<string, any>
  for (const method of options.protocol.serves) {
    const handler = handlers[method.name]
    if (handler === undefined) continue
    if (method._tag === "Request") serves.set(method.name, compileRequest(method, handler))
    else notifies.set(method.name, compileNotification(method, handler))
  }
  const state: State = {
    transport: options.transport,
    framing: options.framing ?? Framing.contentLength,
    limits: options.limits,
    messageLimits: Message.resolveLimits(options.limits),
    invalidLogIntervalMillis: Duration.toMillis(
      Duration.fromInputUnsafe(options.invalidMessageLogInterval ?? Duration.seconds(1))
    ),
    invalidLog: { loggedAt: undefined, suppressed: 0 },
    defaultTimeoutMillis: Duration.toMillis(Duration.fromInputUnsafe(options.requestTimeout ?? Bounds.requestTimeout)),
    flushTimeout: Duration.fromInputUnsafe(options.flushTimeout ?? Bounds.flushTimeout),
    cancellation: Cancellation.spelling(options.cancellation ?? options.protocol.cancellation),
    exposeDefects: options.exposeDefects ?? false,
    gate: options.gate,
    clock,
    epoch: clock.currentTimeMillisUnsafe(),
    context,
    forkHandler: Effect.runForkWith(context),
    annotate: tracing !== false,
    logAnnotations: Context.get(context, References.CurrentLogAnnotations),
    spans: tracing === true || (tracing === "auto" && (yield* Effect.tracer) !== builtInTracer),
    propagate: (options.traceContext ?? options.protocol.traceContext ?? "off") === "propagate",
    serves,
    notifies,
    onUnknownRequest: options.onUnknownRequest,
    onUnknownNotification: options.onUnknownNotification,
    semaphore: options.maxConcurrentHandlers === undefined
      ? undefined
      : yield* Semaphore.make(options.maxConcurrentHandlers),
    trySend: options.transport.unsafeTrySend,
    outbound: yield* Queue.bounded<Uint8Array>(options.outboundCapacity ?? 1024),
    maxPendingAnswers: options.maxPendingAnswers ?? 4096,
    maxPendingAnswerBytes: options.maxPendingAnswerBytes ?? 16 * 1024 * 1024,
    stallTimeout: Duration.fromInputUnsafe(options.stallTimeout ?? Duration.seconds(30)),
    closed: yield* Deferred.make<PeerError.Disconnect>(),
    stats: {
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
      handlerDefects: 0,
      readsHeld: 0,
      unresponsive: 0,
      traceContextInvalid: 0
    },
    nextId: 1,
    pending: new Map(),
    tombstones: new Tombstones<RequestId>(options.tombstoneCapacity ?? 10_000),
    deadlines: new Deadlines<PendingCall>(),
    timerTarget: Infinity,
    timerWake: undefined,
    cancelledInbound: new Set(),
    inboundActive: 0,
    requestFibers: new Map(),
    inboundMethods: new Map(),
    otherFibers: new Map(),
    batchedRequests: new Set(),
    writing: false,
    writerEnded: false,
    overflow: [],
    parkedWriter: undefined,
    pendingAnswers: 0,
    pendingAnswerBytes: 0,
    queuedAnswerBytes: new Float64Array(64),
    queuedHead: 0,
    queuedCount: 0,
    drainWaiters: [],
    tornDown: false,
    disconnect: undefined,
    idleWaiters: [],
    flushWaiters: []
  }
  return state
})

/** The record behind each running peer: the Promise client reaches the pending table through it, with no fiber. */
const states = new WeakMap<Peer.Peer<any, any>, State>()

/** @internal */
export const register = (peer: Peer.Peer<any, any>, state: State): void => {
  states.set(peer, state)
}

/**
 * The record behind a peer made by `Peer.make`; `undefined` for any other implementation of `Peer.Peer`.
 *
 * @internal
 */
export const of = (peer: Peer.Peer<any, any>): State | undefined => states.get(peer)

/**
 * Ends a call once: wakes its caller, or keeps the outcome for when it starts waiting.
 *
 * @internal
 */
export const complete = (call: PendingCall, exit: CallExit): void => {
  if (!call.live) return
  call.live = false
  const resume = call.resume
  call.resume = undefined
  if (resume === undefined) call.exit = exit
  else if (call.reject === undefined) resume(exit)
  else if (Exit.isSuccess(exit)) resume(exit.value)
  else call.reject(Cause.squash(exit.cause))
}

/** @internal */
export const isIdle = (s: State): boolean => s.pending.size === 0 && s.inboundActive === 0

/** @internal */
export const wakeIdle = (s: State): void => {
  if (s.idleWaiters.length === 0 || !isIdle(s)) return
  const waiters = s.idleWaiters
  s.idleWaiters = []
  for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
}

/**
 * Whether answers waiting to be written are at their bound (`maxPendingAnswers`, `maxPendingAnswerBytes`): the reader
 * then holds the next request (`flow.ts`).
 *
 * @internal
 */
export const answersFull = (s: State): boolean =>
  s.pendingAnswers >= s.maxPendingAnswers || s.pendingAnswerBytes >= s.maxPendingAnswerBytes

/**
 * Wakes the reader holding a request, once answers are below their bound again.
 *
 * @internal
 */
export const wakeDrained = (s: State): void => {
  if (s.drainWaiters.length === 0 || answersFull(s)) return
  const waiters = s.drainWaiters
  s.drainWaiters = []
  for (const waiter of waiters) Deferred.doneUnsafe(waiter, Exit.void)
}

/**
 * Completes at once when `ready()`, else once whoever changes the state completes the registered waiter.
 *
 * @internal
 */
export const waitFor = (
  ready: () => boolean,
  register: (waiter: Deferred.Deferred<void>) => void
): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (ready()) return Effect.void
    const waiter = Deferred.makeUnsafe<void>()
    register(waiter)
    return Deferred.await(waiter)
  })

/** @internal */
export const snapshot = (s: State): Peer.Stats => ({
  ...s.stats,
  pendingOutbound: s.pending.size,
  activeInbound: s.inboundActive,
  tombstones: s.tombstones.size,
  pendingAnswers: s.pendingAnswers,
  pendingAnswerBytes: s.pendingAnswerBytes
})

/**
 * A WARN about what the peer sent, at most one per `invalidMessageLogInterval` on the peer's Clock, so a peer that
 * sends nothing but garbage gets one line per interval, not one per frame. The next line logged says how many were
 * left out; `Stats` and answers are unchanged.
 *
 * @internal
 */
export const warnAboutPeer = (s: State, message: string, data?: unknown): Effect.Effect<void> => {
  const log = s.invalidLog
  const now = s.clock.currentTimeMillisUnsafe()
  if (log.loggedAt !== undefined && now - log.loggedAt < s.invalidLogIntervalMillis) {
    log.suppressed++
    return Effect.void
  }
  const suppressed = log.suppressed
  log.loggedAt = now
  log.suppressed = 0
  const line = suppressed === 0
    ? message
    : `${message} (and ${suppressed} more warning(s) about the peer's messages not logged since the last one)`
  return data === undefined ? Effect.logWarning(line) : Effect.logWarning(line, data)
}
