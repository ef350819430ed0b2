/**
 * The end of every pending call at once, in two steps: `detach` takes the pending table off the peer without waking
 * anyone, and its handle wakes the callers later, in batches. A teardown ends the transport between the two, so the
 * other side starts exiting while the callers are woken (docs/peer.md, "Teardown"). `failPending` does both at once.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Peer from "../../Peer.js"
import type * as PeerError from "../../PeerError.js"
import { complete, of, type PendingCall, type State, wakeIdle } from "./state.js"

/**
 * How many callers a deferred wake-up wakes before it lets the event loop run: 1,024 Effect callers hold the thread
 * for a millisecond or two, so timers and I/O (a child's `exit`) are not held up behind 10,000 wake-ups.
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
 * Takes every pending call off the peer without waking its caller: the table is swapped for an empty one, its ids
 * tombstoned, its deadlines dropped.
 *
 * @internal
 */
export const detach = (s: State, error: PeerError.Disconnect, report = true): Detached => {
  const taken = take(s, report)
  wakeIdle(s)
  if (taken === undefined) return nothing
  // Two turns before the first batch: the event loop then has polled once (and carried out the end of a child's
  // stdin) before any caller is woken, whichever phase the teardown ran in.
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
 * Wakes `calls[from..to)` with one shared outcome (an Exit is immutable), so failing N calls makes no N errors, causes
 * or stack traces. An Effect caller resumes at once, in this stack; a Promise caller is rejected with the error.
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
 * One batch after a turn of the event loop, then the rest: `Effect.yieldNow` resumes from `setImmediate`, so Node runs
 * timers and I/O in between, which a microtask would not.
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
