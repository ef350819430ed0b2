/**
 * What an extension's commands use to work on Hermes: read, patch and replace the current message, and open windows.
 * Each call is a request to the host (`editor/*`, `ui/openWindow`); the SDK provides the service to every command.
 *
 * @since 0.1.0
 */
import type * as Peer from "@lifeline/kernel/Peer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as HermesProtocol from "./HermesProtocol.js"

/**
 * How an editor call can fail: the host answered with an error, did not answer in time, or the connection is gone or
 * shutting down. The host's answers include -32602 for a bad patch path or a patch request over one of its bounds
 * (`data.reason` `TooManyPatches`, `ValueTooLarge`, `PatchesTooLarge`), and -32803 for a window over its bound of
 * open windows (`TooManyWindows`): see `docs/hosting.md`, "Limits and defences".
 *
 * @since 0.1.0
 * @category models
 */
export type EditorError = Peer.CallError

/**
 * A window the extension opened.
 *
 * @since 0.1.0
 * @category models
 */
export interface Window {
  readonly windowId: string
  readonly url: string
  /** Completes when the host reports `window/closed` for it, or when the extension shuts down. */
  readonly closed: Effect.Effect<void>
}

/**
 * The editor service.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Editor } from "@lifeline/hermes"
 *
 * const anonymise = Effect.gen(function*() {
 *   const editor = yield* Editor.Editor
 *   const before = yield* editor.getMessage("raw")
 *   yield* editor.patchMessage([{ path: "PID-5.1", value: "ANONYMOUS" }])
 *   return before
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class Editor extends Context.Service<Editor, Editor.Service>()("@lifeline/hermes/Editor") {}

/**
 * @since 0.1.0
 */
export declare namespace Editor {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /** The current message: raw HL7 text (default) or its JSON view. */
    readonly getMessage: (format?: HermesProtocol.MessageFormat) => Effect.Effect<string, EditorError>
    /**
     * Applies every patch or none; answers how many were applied. The host bounds one request (by default 1,000
     * patches, 64 KiB a value, 1 MiB in all): split bigger edits.
     */
    readonly patchMessage: (patches: ReadonlyArray<HermesProtocol.Patch>) => Effect.Effect<number, EditorError>
    readonly setMessage: (message: string) => Effect.Effect<void, EditorError>
    /** Opens a window; the host refuses one over its bound of open windows (64 by default) until another closes. */
    readonly openWindow: (params: HermesProtocol.OpenWindowParams) => Effect.Effect<Window, EditorError>
  }
}

/**
 * @example
 * ```ts
 * import { Editor } from "@lifeline/hermes"
 *
 * const json = Editor.getMessage("json")
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const getMessage = (format?: HermesProtocol.MessageFormat): Effect.Effect<string, EditorError, Editor> =>
  Effect.flatMap(Editor, (editor) => editor.getMessage(format))

/**
 * @example
 * ```ts
 * import { Editor } from "@lifeline/hermes"
 *
 * const clearBirthDate = Editor.patchMessage([{ path: "PID-7", value: null }])
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const patchMessage = (
  patches: ReadonlyArray<HermesProtocol.Patch>
): Effect.Effect<number, EditorError, Editor> => Effect.flatMap(Editor, (editor) => editor.patchMessage(patches))

/**
 * @example
 * ```ts
 * import { Editor } from "@lifeline/hermes"
 *
 * const replace = Editor.setMessage("MSH|^~\\&|LAB\rPID|1")
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const setMessage = (message: string): Effect.Effect<void, EditorError, Editor> =>
  Effect.flatMap(Editor, (editor) => editor.setMessage(message))

/**
 * @example
 * ```ts
 * import { Editor } from "@lifeline/hermes"
 *
 * const report = Editor.openWindow({ url: "http://127.0.0.1:8080/report", title: "Report" })
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const openWindow = (params: HermesProtocol.OpenWindowParams): Effect.Effect<Window, EditorError, Editor> =>
  Effect.flatMap(Editor, (editor) => editor.openWindow(params))
