/**
 * The Promise client's calls: an entry in the pending table whose outcome settles a Promise (its `resolve` and
 * `reject` are the entry's resume callback), so a pending call costs no fiber, and a rejection is the typed error
 * itself. A peer that `Peer.make` did not make (a test double) is called through its Effects instead, one fiber per
 * call.
 *
 * @internal
 */
import type * as Message from "@lifeline/jsonrpc/Message"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Result from "effect/Result"
import type * as Method from "../../Method.js"
import type * as Peer from "../../Peer.js"
import type * as PromiseClient from "../../PromiseClient.js"
import { type CallCodecs, codecsOf, notificationEncoderOf } from "./codecs.js"
import { cancelByCaller, encodeParams, issue, sendNotification, timeoutMillisOf } from "./outbound.js"
import * as State from "./state.js"

const resolved = Promise.resolve()

/** An outcome as a settled Promise: a failure rejects with its error (or defect) as it is. */
const settled = (exit: Exit.Exit<unknown, unknown>): Promise<any> =>
  Exit.isSuccess(exit) ? Promise.resolve(exit.value) : Promise.reject(Cause.squash(exit.cause))

const abortReason = (signal: AbortSignal): unknown => signal.reason

/**
 * Sends a request and returns a Promise of its answer; `signal` abandons it as an interrupted Effect caller would. An
 * answer that arrived while the request was being sent (an in-memory peer) is already in `exit`. Without a signal, the
 * Promise's own `resolve` and `reject` wait in the entry: no closure of ours is kept per pending call.
 */
const callWith = (
  s: State.State,
  method: string,
  params: Message.Params | null | undefined,
  timeoutMillis: number,
  codecs: CallCodecs | undefined,
  signal: AbortSignal | undefined
): Promise<any> => {
  if (signal?.aborted) return Promise.reject(abortReason(signal))
  const call = issue(s, method, params, timeoutMillis, codecs)
  if (Exit.isExit(call)) return settled(call)
  if (call.exit !== undefined) {
    const exit = call.exit
    call.exit = undefined
    return settled(exit)
  }
  if (signal === undefined) {
    return new Promise((resolve, reject) => {
      call.resume = resolve
      call.reject = reject
    })
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      cancelByCaller(s, call)
      reject(abortReason(signal))
    }
    signal.addEventListener("abort", onAbort, { once: true })
    call.resume = (exit) => {
      signal.removeEventListener("abort", onAbort)
      if (Exit.isSuccess(exit)) resolve(exit.value)
      else reject(Cause.squash(exit.cause))
    }
  })
}

/** A notification queued at once settles at once; one that waits for room in the outbound queue runs as a fiber. */
const notifyWith = (s: State.State, method: string, params: Message.Params | null | undefined): Promise<void> => {
  const sent = sendNotification(s, method, params)
  if (sent === Effect.void) return resolved
  return Exit.isExit(sent) ? settled(sent) : Effect.runPromise(sent)
}

const ignore = () => {}

/*
 * A notification is fire and forget: a program that does not await one must not be crashed by its rejection (Node ends
 * the process on an unhandled rejection). The rejection is marked handled here; whoever awaits the Promise still sees it.
 */
const handled = (promise: Promise<void>): Promise<void> => {
  promise.catch(ignore)
  return promise
}

const paramsRefused = (method: Method.AnyNotification, failure: string): Error =>
  new Error(`${method.name}: params do not match their Schema: ${failure}`)

/** @internal */
export const make = <Serves extends Method.Any, Calls extends Method.Any>(
  peer: Peer.Peer<Serves, Calls>
): PromiseClient.PromiseClient<Calls> => {
  const s = State.of(peer)
  if (s === undefined) return throughEffects(peer)
  const client: PromiseClient.PromiseClient<any> = {
    peer,
    call: (method: Method.AnyRequest, params: unknown, options?: PromiseClient.CallOptions) => {
      const codecs = codecsOf(method)
      const encoded = encodeParams(codecs, params)
      if (Result.isFailure(encoded)) return Promise.reject(encoded.failure)
      const timeoutMillis = timeoutMillisOf(s, options?.timeout ?? method.timeout)
      return callWith(s, method.name, encoded.success, timeoutMillis, codecs, options?.signal)
    },
    callUntyped: (method, params, options) =>
      callWith(s, method, params, timeoutMillisOf(s, options?.timeout), undefined, options?.signal),
    notify: (method: Method.AnyNotification, params: unknown) => {
      const encoded = notificationEncoderOf(method)(params)
      if (Result.isFailure(encoded)) return handled(Promise.reject(paramsRefused(method, encoded.failure)))
      return handled(notifyWith(s, method.name, encoded.success as Message.Params | undefined))
    },
    notifyUntyped: (method, params) => handled(notifyWith(s, method, params))
  }
  return client
}

/** Any other `Peer.Peer`: each call is its Effect run as a fiber, which `signal` interrupts. */
const throughEffects = <Calls extends Method.Any>(peer: Peer.Peer<any, Calls>): PromiseClient.PromiseClient<Calls> => {
  const run = (effect: Effect.Effect<any, unknown>, signal: AbortSignal | undefined): Promise<any> => {
    if (signal?.aborted) return Promise.reject(abortReason(signal))
    return Effect.runPromiseExit(effect, { signal }).then((exit) =>
      Exit.isSuccess(exit)
        ? exit.value
        : Promise.reject(
          signal?.aborted && Cause.hasInterruptsOnly(exit.cause) ? abortReason(signal) : Cause.squash(exit.cause)
        )
    )
  }
  const client: PromiseClient.PromiseClient<any> = {
    peer,
    call: (method: Method.AnyRequest, params: unknown, options?: PromiseClient.CallOptions) =>
      run(peer.call(method as never, params as never, options), options?.signal),
    callUntyped: (method, params, options) => run(peer.callUntyped(method, params, options), options?.signal),
    notify: (method: Method.AnyNotification, params: unknown) =>
      handled(run(peer.notify(method as never, params as never), undefined)),
    notifyUntyped: (method, params) => handled(run(peer.notifyUntyped(method, params), undefined))
  }
  return client
}
