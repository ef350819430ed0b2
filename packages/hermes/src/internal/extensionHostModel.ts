/**
 * The values `ExtensionHost.ts` shares with the host's body: the event constructors, the two refusals and the default
 * limits. In a module of their own, importing only types from `ExtensionHost.ts`, so the body does not import the
 * public module back (no value cycle); `ExtensionHost.ts` re-exports each of them, the classes themselves.
 *
 * @internal
 */
import * as Data from "effect/Data"
import * as Schema from "effect/Schema"
import type * as ExtensionHost from "../ExtensionHost.js"

/** `ExtensionHost.Event`'s constructors. @internal */
export const Event = Data.taggedEnum<ExtensionHost.Event>()

/**
 * `execute` was refused: the extension is not `Ready`, or has no such command.
 *
 * @since 0.1.0
 * @category errors
 */
export class CommandRefused extends Schema.TaggedError<CommandRefused>("@lifeline/hermes/CommandRefused")(
  "CommandRefused",
  {
    command: Schema.String,
    reason: Schema.Literals(["NotReady", "UnknownCommand", "Disconnected"]),
    detail: Schema.String
  }
) {
  override get message(): string {
    return `command ${this.command} refused (${this.reason}): ${this.detail}`
  }
}

/**
 * Settings the host will not pass: not JSON, or more than `HermesProtocol.MAX_SETTINGS_BYTES` of it. Nothing was
 * stopped or restarted.
 *
 * @since 0.1.0
 * @category errors
 */
export class SettingsRefused extends Schema.TaggedError<SettingsRefused>("@lifeline/hermes/SettingsRefused")(
  "SettingsRefused",
  {
    reason: Schema.Literals(["NotJson", "TooLarge"]),
    limit: Schema.Number,
    actual: Schema.optional(Schema.Number)
  }
) {
  override get message(): string {
    return this.reason === "NotJson"
      ? "settings refused: not JSON"
      : `settings refused: ${this.actual} bytes of JSON, over ${this.limit}`
  }
}

/**
 * The defaults of {@link Limits}, and why:
 *
 * - `historyLimit` 10,000: the recent past of a busy extension (each request it sends is one event) in a few MB: an
 *   event takes a few hundred bytes, at most about 3 KiB with `maxEventTextLength`. A flood of 32,000 requests left
 *   the host 1 to 4 MiB bigger once collected.
 * - `maxEventTextLength` 1,024: enough for an error message or a URL; the full text went to the extension or to the
 *   presenter.
 * - `maxOpenWindows` 64: more than a person can look at, and a queue the headless presenter (8 fetches at once)
 *   drains within seconds.
 * - `maxPatches` 1,000, `maxPatchValueBytes` 64 KiB, `maxPatchRequestBytes` 1 MiB: far more than an edit of one HL7
 *   message needs, and little enough not to block the host, which applies a request in one synchronous step: 1,000
 *   values of 64 KiB took 11 s there, 16 of them (1 MiB) 0.1 to 0.4 s.
 *
 * @since 0.1.0
 * @category models
 */
export const defaultLimits: ExtensionHost.Limits = {
  historyLimit: 10_000,
  maxEventTextLength: 1024,
  maxOpenWindows: 64,
  maxPatches: 1000,
  maxPatchValueBytes: 64 * 1024,
  maxPatchRequestBytes: 1024 * 1024
}
