/**
 * The end of every pending call at once, when the connection is lost or torn down, in two steps: `detach` takes the
 * pending table off the peer (swapped for an empty one, its ids tombstoned, the cut-off list built) without waking
 * anyone, and the handle it returns wakes the callers later, in batches with a turn of the event loop between them.
 * A teardown ends the transport between the two, so the other side starts exiting while the callers are woken (see
 * docs/peer.md, "Teardown"). `failPending` does both at once.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Peer from "../../Peer.js"
import type * as PeerError from "../../PeerError.js"
import { complete, of, type PendingCall, type State, wakeIdle } from "./state.js"

/**
 * How many callers a deferred wake-up wakes before it lets the event loop run. Waking an Effect caller resumes its
 * fiber in the waker's stack (~1.2–1.5 µs each, docs/peer.md, "Rows that still miss"), so 1,024 of them hold the
 * thread for a millisecond or two: short enough that timers and I/O (a child's `exit`, say) are not held up behind
 * 10,000 wake-ups, and few enough turns that a large table does not pay much for them.
 *
 * @internal
 */
export const WAKE_BATCH = 1024

/**
 * Pending calls taken off the peer and not woken yet. `wake` fails every one that still waits with the error the
 * table was detached with; a call whose caller gave up in the meantime is skipped.
 *
 * @internal
 */
export interface Detached {
  /** What was cut off, for a report; empty when the detach was asked for no report. */
  readonly cutOff: ReadonlyArray<Peer.CutOff>
  /** Wakes the callers, `WAKE_BATCH` at a time, a turn of the event loop before each batch (two before the first). */
  readonly wake: Effect.Effect<void>
  /** Wakes them all at once, in this stack, as `failPending` does. */
  readonly wakeNow: Effect.Effect<void>
}

const nothing: Detached = { cutOff: [], wake: Effect.void, wakeNow: Effect.void }

/** The pending table, taken off the peer: its calls (in an array of their own) and, if asked for, their record. */
interface Taken {
  readonly calls: ReadonlyArray<PendingCall>
  readonly cutOff: ReadonlyArray<Peer.CutOff>
}

const take = (s: State, report: boolean): Taken | undefined => {
  const table = s.pending
  if (table.size === 0) return undefined
  s.pending = new Map()
  s.deadlines.clear()
  s.stats.failedByDisconnect += table.size
  // The calls are read into an array of their own: the table becomes a generation of tombstones as it is, and an
  // eviction (more ids tombstoned while the callers are woken) deletes from it.
  const calls: Array<PendingCall> = new Array(table.size)
  const cutOff: Array<Peer.CutOff> = report ? new Array(table.size) : []
  let i = 0
  for (const call of table.values()) {
    if (report) cutOff[i] = { direction: "outbound", id: call.id, method: call.method }
    calls[i++] = call
  }
  s.tombstones.addFresh(table)
  return { calls, cutOff }
}

/**
 * Takes every pending call off the peer without waking its caller: the table is swapped for an empty one (a call made
 * from now on is a new entry, refused or not by the peer as usual), its ids are tombstoned (an answer that still comes
 * for one is a late answer), its deadlines are dropped, and `awaitIdle` sees no pending call any more.
 *
 * @internal
 */
export const detach = (s: State, error: PeerError.Disconnect, report = true): Detached => {
  const taken = take(s, report)
  wakeIdle(s)
  if (taken === undefined) return nothing
  // One more turn before the first batch: the end of a pipe's input (a child's stdin) is carried out by the event loop
  // after the call that ended it, and a teardown that runs from an I/O callback gets its first `setImmediate` before
  // the loop polls again. With two turns the loop has polled once before any caller is woken, whichever phase the
  // teardown ran in (measured in docs/peer.md, "Rows that still miss", "Stop → child exited").
  const exit = Exit.fail(error)
  return {
    cutOff: taken.cutOff,
    wake: Effect.andThen(Effect.yieldNow, wakeFrom(taken.calls, error, exit, 0)),
    wakeNow: Effect.sync(() => wakeRange(taken.calls, error, exit, 0, taken.calls.length))
  }
}

/**
 * `detach` on a peer made by `Peer.make`. Any other implementation of `Peer.Peer` has only `failPending`, which wakes
 * at once: its handle has nothing left to wake.
 *
 * @internal
 */
export const detachPeer = (peer: Peer.Peer<any, any>, error: PeerError.Disconnect): Effect.Effect<Detached> =>
  Effect.suspend(() => {
    const s = of(peer)
    return s === undefined
      ? Effect.map(peer.failPending(error), (cutOff): Detached => ({ cutOff, wake: Effect.void, wakeNow: Effect.void }))
      : Effect.sync(() => detach(s, error))
  })

/**
 * Wakes `calls[from..to)`. One outcome for every call: an Exit is immutable, and the error is one value whoever
 * receives it (`catchTag` matches its `_tag`), so failing N calls makes no N errors, causes or stack traces. An Effect
 * caller resumes at once, in this stack (Effect 4 runs a fiber resumed from a callback synchronously); a Promise
 * caller is rejected with the error itself, and its handlers run as microtasks once this stack is done.
 */
const wakeRange = (
  calls: ReadonlyArray<PendingCall>,
  error: PeerError.Disconnect,
  exit: Exit.Exit<never, PeerError.Disconnect>,
  from: number,
  to: number
): void => {
  for (let i = from; i < to; i++) {
    const call = calls[i]
    const reject = call.reject
    if (reject !== undefined && call.live && call.resume !== undefined) {
      call.live = false
      call.resume = undefined
      call.reject = undefined // the entry outlives the call, as a tombstone: it must not keep the Promise
      reject(error)
    } else {
      complete(call, exit)
    }
  }
}

/**
 * One batch after a turn of the event loop, then the rest. `Effect.yieldNow` hands the fiber to the scheduler, which
 * (Effect's default one) resumes it from `setImmediate`: Node runs timers and delivers I/O before that (an immediate
 * queued from an immediate waits for the next turn of the loop), which a microtask would not.
 */
const wakeFrom = (
  calls: ReadonlyArray<PendingCall>,
  error: PeerError.Disconnect,
  exit: Exit.Exit<never, PeerError.Disconnect>,
  from: number
): Effect.Effect<void> =>
  Effect.andThen(
    Effect.yieldNow,
    Effect.suspend(() => {
      const to = Math.min(from + WAKE_BATCH, calls.length)
      wakeRange(calls, error, exit, from, to)
      return to === calls.length ? Effect.void : wakeFrom(calls, error, exit, to)
    })
  )

/**
 * Fails every pending call with `error` now, in this stack, and tombstones its id; returns what it cut off, or nothing
 * when `report` is false (the peer's own teardown and a lost connection read nothing: no record per call).
 *
 * @internal
 */
export const failPending = (s: State, error: PeerError.Disconnect, report = true): ReadonlyArray<Peer.CutOff> => {
  const taken = take(s, report)
  if (taken !== undefined) wakeRange(taken.calls, error, Exit.fail(error), 0, taken.calls.length)
  wakeIdle(s)
  return taken === undefined ? [] : taken.cutOff
}
