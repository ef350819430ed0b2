/**
 * The extension host's request handlers: what it serves the extension (`editor/getMessage`, `editor/patchMessage`,
 * `editor/setMessage`, `ui/openWindow`), each request bounded before anything is applied (`ExtensionHost.Limits`) and
 * published as a `RequestServed` event. The supervisor (`extensionHost.ts`) makes one set per generation.
 *
 * @internal
 */
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import type * as Peer from "@lifeline/kernel/Peer"

import * as Effect from "effect/Effect"
import * as FiberMap from "effect/FiberMap"
import * as Option from "effect/Option"
import * as HermesProtocol from "../HermesProtocol.js"
import type * as Hl7 from "../Hl7.js"
import * as MessageStore from "../MessageStore.js"
import type * as WindowPresenter from "../WindowPresenter.js"
import type * as EventLog from "./extensionHostEvents.js"
import * as Model from "./extensionHostModel.js"
import * as Stop from "./extensionHostStop.js"
import type { Generation } from "./extensionHostStop.js"

/** What the handlers need from the supervisor. @internal */
export interface Context {
  readonly store: MessageStore.MessageStore.Service
  readonly windows: WindowPresenter.WindowPresenter.Service
  readonly emit: EventLog.EventLog["emit"]
  /** Text the extension controls, cut to `maxEventTextLength`. */
  readonly text: (value: string) => string
  /** Marks the extension active now (for `awaitQuiet`). */
  readonly touch: Effect.Effect<void>
  /** The running extension's `initialize` answer, if any (its name labels its windows). */
  readonly info: () => Option.Option<HermesProtocol.InitializeResult>
  /** Used for the window's extension when `initialize` has not answered. */
  readonly label: string
  readonly maxOpenWindows: number
  readonly maxPatches: number
  readonly maxPatchValueBytes: number
  readonly maxPatchRequestBytes: number
}

/** @internal */
export const make = (context: Context) => {
  const { emit, maxOpenWindows, maxPatchRequestBytes, maxPatchValueBytes, maxPatches, store, text, touch, windows } =
    context
  let windowCount = 0
  let activeRequests = 0

  const served = <A>(
    method: string,
    effect: Effect.Effect<A, RpcError.RpcError>
  ): Effect.Effect<A, RpcError.RpcError> =>
    Effect.suspend(() => {
      activeRequests++
      return effect
    }).pipe(
      Effect.tap(() => emit((at) => Model.Event.RequestServed({ at, method, ok: true, detail: undefined }))),
      Effect.tapError((error) =>
        emit((at) => Model.Event.RequestServed({ at, method, ok: false, detail: text(Stop.describeWireError(error)) }))
      ),
      Effect.ensuring(Effect.andThen(
        Effect.sync(() => {
          activeRequests--
        }),
        touch
      ))
    )

  const invalid = (
    error: { readonly reason: string; readonly detail: string; readonly index?: number; readonly path?: string }
  ) =>
    RpcError.RpcError.invalidParams(
      error.index === undefined
        ? { reason: error.reason, detail: error.detail }
        : { index: error.index, path: error.path, reason: error.reason, detail: error.detail }
    )

  /** A refused `editor/patchMessage`: over `maxMessageBytes` with its bound and size, else its `Hl7Error` reason. */
  const patchRefused = (error: MessageStore.PatchRejected) =>
    error.reason === "MessageTooLarge"
      ? RpcError.RpcError.invalidParams({
        index: error.index,
        reason: error.reason,
        limit: error.limit,
        actual: error.actual
      })
      : invalid(error)

  /** A refused `editor/setMessage`: over a bound of the store with the bound and the size, else not HL7. */
  const setRefused = (error: Hl7.Hl7Error | MessageStore.MessageTooLarge) =>
    error._tag === "MessageTooLarge"
      ? RpcError.RpcError.invalidParams({ reason: error.reason, limit: error.limit, actual: error.actual })
      : invalid(error)

  const tooLarge = (
    reason: "TooManyPatches" | "ValueTooLarge" | "PatchesTooLarge",
    limit: number,
    actual: number,
    index?: number
  ) =>
    RpcError.RpcError.invalidParams(
      index === undefined ? { reason, limit, actual } : { reason, index, limit, actual }
    )

  /** The bounds of one `editor/patchMessage`: the count first, then each value, then the whole. */
  const checkPatches = (patches: ReadonlyArray<HermesProtocol.Patch>): RpcError.RpcError | undefined => {
    if (patches.length > maxPatches) return tooLarge("TooManyPatches", maxPatches, patches.length)
    let total = 0
    for (let index = 0; index < patches.length; index++) {
      const { path, value } = patches[index]
      const valueBytes = value === null ? 0 : MessageStore.utf8Bytes(value)
      if (valueBytes > maxPatchValueBytes) return tooLarge("ValueTooLarge", maxPatchValueBytes, valueBytes, index)
      total += MessageStore.utf8Bytes(path) + valueBytes
    }
    if (total > maxPatchRequestBytes) return tooLarge("PatchesTooLarge", maxPatchRequestBytes, total)
    return undefined
  }

  const makeHandlers = (
    generation: Generation
  ): Peer.Handlers<HermesProtocol.HostServes, never> => ({
    "editor/getMessage": (params) =>
      served(
        "editor/getMessage",
        store.get(params?.format ?? "raw").pipe(
          Effect.map((message) => ({ message })),
          Effect.mapError(invalid)
        )
      ),
    "editor/patchMessage": ({ patches }) =>
      served(
        "editor/patchMessage",
        Effect.suspend(() => {
          // Checked before anything is applied: the store applies a request in one synchronous step.
          const refused = checkPatches(patches)
          if (refused !== undefined) return Effect.fail(refused)
          return store.patch(patches).pipe(Effect.map((applied) => ({ applied })), Effect.mapError(patchRefused))
        })
      ),
    "editor/setMessage": ({ message }) =>
      served(
        "editor/setMessage",
        store.set(message).pipe(Effect.as({ success: true }), Effect.mapError(setRefused))
      ),
    "ui/openWindow": (params) =>
      served(
        "ui/openWindow",
        Effect.gen(function*() {
          // A permit per open window, given back when it has closed: the windows of a flood wait for their fetch
          // in a bounded queue, and the rest are refused. From the permit to the window's fiber nothing may be
          // interrupted (a cancelled request would keep its permit for good); the fiber itself is interruptible, as
          // every Effect 4 fork is unless asked otherwise.
          if (!(yield* generation.windowSlots.takeIfAvailable(1))) {
            return yield* RpcError.RpcError.requestFailed("Too many open windows", {
              reason: "TooManyWindows",
              limit: maxOpenWindows,
              actual: yield* FiberMap.size(generation.windows)
            })
          }
          const windowId = `window-${++windowCount}`
          const window: WindowPresenter.Window = {
            windowId,
            extension: Option.match(context.info(), { onNone: () => context.label, onSome: (i) => i.name }),
            url: params.url,
            title: params.title
          }
          yield* emit((at) =>
            Model.Event.WindowOpened({
              at,
              windowId,
              url: text(params.url),
              title: params.title === undefined ? undefined : text(params.title)
            })
          )
          const connection = generation.connection
          // Starts after this handler returns, as Effect 3's fork did (Effect 4 would run it here up to a wait).
          yield* FiberMap.run(
            generation.windows,
            windowId,
            Effect.gen(function*() {
              // The answer carrying the id goes out first: `window/closed` must not overtake it.
              if (connection !== undefined) yield* connection.peer.flush
              const presentation = yield* windows.present(window)
              yield* emit((at) => Model.Event.WindowShown({ at, windowId, presentation }))
              if (connection !== undefined) {
                yield* Effect.ignore(connection.peer.notify(HermesProtocol.WindowClosed, { windowId }))
              }
              yield* emit((at) => Model.Event.WindowClosed({ at, windowId }))
            }).pipe(Effect.ensuring(generation.windowSlots.release(1))),
            { startImmediately: false }
          )
          return { windowId }
        }).pipe(Effect.uninterruptible)
      )
  })

  return {
    makeHandlers,
    /** Requests being served now. */
    activeRequests: () => activeRequests
  }
}
