/**
 * The message Hermes is editing, held by the host and served to extensions through `editor/*`: read it raw or as
 * JSON, patch fields by HL7 path (all patches or none), or replace it. Every change is published.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type * as HermesProtocol from "./HermesProtocol.js"
import * as Hl7 from "./Hl7.js"

/**
 * A patch was refused: which one (`index` in the request, `path`) and why (an `Hl7Error` reason). Nothing was applied.
 * `BreaksMessage` refuses the batch as a whole; `index` is then the first patch after which the message was broken.
 *
 * @since 0.1.0
 * @category errors
 */
export class PatchRejected
  extends Schema.TaggedError<PatchRejected>("@lifeline/hermes/PatchRejected")("PatchRejected", {
    index: Schema.Int,
    path: Schema.String,
    reason: Hl7.Hl7Error.fields.reason,
    detail: Schema.String
  })
{
  override get message(): string {
    return `patch ${this.index} (${this.path}) refused: ${this.reason}: ${this.detail}`
  }
}

/**
 * The message store.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { MessageStore } from "@lifeline/hermes"
 *
 * const program = Effect.gen(function*() {
 *   const store = yield* MessageStore.MessageStore
 *   yield* store.patch([{ path: "PID-5.1", value: "ANONYMOUS" }])
 *   return yield* store.current
 * }).pipe(Effect.provide(MessageStore.layer("MSH|^~\\&|LAB\rPID|1||123||DOE^JOHN")))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class MessageStore
  extends Context.Service<MessageStore, MessageStore.Service>()("@lifeline/hermes/MessageStore")
{}

/**
 * @since 0.1.0
 */
export declare namespace MessageStore {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /** The current text, as it was set (raw). */
    readonly current: Effect.Effect<string>
    /** `raw`: the text; `json`: the JSON view, which needs the text to be HL7. */
    readonly get: (format: HermesProtocol.MessageFormat) => Effect.Effect<string, Hl7.Hl7Error>
    /**
     * Applies every patch in order, or none; answers how many were applied. The result is kept only if it is still one
     * HL7 v2 message (`Hl7.formatChecked`); otherwise the whole batch is refused with `BreaksMessage`.
     */
    readonly patch: (patches: ReadonlyArray<HermesProtocol.Patch>) => Effect.Effect<number, PatchRejected>
    /**
     * Replaces the message. The store holds one message: text that does not parse as exactly one HL7 v2 message (MSH
     * first, no second MSH, as a batch would have) is refused with `NotHl7`.
     */
    readonly set: (text: string) => Effect.Effect<void, Hl7.Hl7Error>
    /** The current text, then every new one. */
    readonly changes: Stream.Stream<string>
  }
}

/**
 * A store holding `initial`, which need not be HL7 (an empty editor holds `""`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (initial: string): Effect.Effect<MessageStore.Service> =>
  Effect.map(SubscriptionRef.make(initial), (ref): MessageStore.Service => ({
    current: SubscriptionRef.get(ref),
    get: (format) =>
      Effect.flatMap(
        SubscriptionRef.get(ref),
        (text) =>
          format === "raw"
            ? Effect.succeed(text)
            : Effect.fromResult(Result.map(Hl7.parse(text), (m) => JSON.stringify(Hl7.toJson(m))))
      ),
    patch: (patches) =>
      SubscriptionRef.modifyEffect(ref, (text) => {
        const rejected = (index: number, error: Hl7.Hl7Error) =>
          new PatchRejected({ index, path: patches[index]?.path ?? "", reason: error.reason, detail: error.detail })
        const parsed = Hl7.parse(text)
        if (Result.isFailure(parsed)) return Effect.fail(rejected(0, parsed.failure))
        // No patch: nothing changes, and no change is published.
        if (patches.length === 0) return Effect.succeed([0, text] as const)
        let message = parsed.success
        for (let i = 0; i < patches.length; i++) {
          const next = Hl7.set(message, patches[i].path, patches[i].value)
          if (Result.isFailure(next)) return Effect.fail(rejected(i, next.failure))
          message = next.success
        }
        // Checked once for the whole batch; only a refusal pays for finding the patch to blame.
        const checked = Hl7.formatChecked(message)
        if (Result.isFailure(checked)) {
          return Effect.fail(rejected(firstBreaking(parsed.success, patches), checked.failure))
        }
        return Effect.succeed([patches.length, checked.success] as const)
      }),
    set: (text) =>
      Result.match(Hl7.parse(text), {
        onFailure: Effect.fail,
        onSuccess: () => SubscriptionRef.set(ref, text)
      }),
    changes: SubscriptionRef.changes(ref)
  }))

const firstBreaking = (message: Hl7.Message, patches: ReadonlyArray<HermesProtocol.Patch>): number => {
  let current = message
  for (let i = 0; i < patches.length; i++) {
    const next = Hl7.set(current, patches[i].path, patches[i].value)
    if (Result.isFailure(next) || Result.isFailure(Hl7.formatChecked(next.success))) return i
    current = next.success
  }
  return patches.length - 1
}

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (initial: string): Layer.Layer<MessageStore> => Layer.effect(MessageStore, make(initial))
