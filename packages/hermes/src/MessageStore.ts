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
 * A patch was refused: which one (`index` in the request, `path`) and why (an `Hl7Error` reason, or
 * `MessageTooLarge`). Nothing was applied. `BreaksMessage` refuses the batch as a whole; `index` is then the first
 * patch after which the message was broken. `MessageTooLarge` does too: `index` is the first patch after which the
 * message would have been larger than `maxMessageBytes` (`limit`), and `actual` that size as `Hl7.patch` counts it
 * (`Hl7.PatchOptions.maxBytes`); only this reason has `limit` and `actual`.
 *
 * @since 0.1.0
 * @category errors
 */
export class PatchRejected
  extends Schema.TaggedError<PatchRejected>("@lifeline/hermes/PatchRejected")("PatchRejected", {
    index: Schema.Int,
    path: Schema.String,
    reason: Schema.Literals([...Hl7.Hl7Error.fields.reason.literals, "MessageTooLarge"]),
    detail: Schema.String,
    limit: Schema.optionalKey(Schema.Int),
    actual: Schema.optionalKey(Schema.Int)
  })
{
  override get message(): string {
    return `patch ${this.index} (${this.path}) refused: ${this.reason}: ${this.detail}`
  }
}

/**
 * `editor/setMessage` was refused because the text is over a bound of the store; the message is unchanged. `reason`
 * says which: `MessageTooLarge`, `actual` bytes of UTF-8 over `maxMessageBytes`; `TooManySegments`, `actual`
 * segments over `maxSegments`. On the wire: -32602 with `data` `{ reason, limit, actual }`.
 *
 * @since 0.1.0
 * @category errors
 */
export class MessageTooLarge
  extends Schema.TaggedError<MessageTooLarge>("@lifeline/hermes/MessageTooLarge")("MessageTooLarge", {
    reason: Schema.Literals(["MessageTooLarge", "TooManySegments"]),
    limit: Schema.Int,
    actual: Schema.Int
  })
{
  /** The refusal in words, so that it reads like an `Hl7Error` where only `reason` and `detail` are shown. */
  get detail(): string {
    return this.reason === "MessageTooLarge"
      ? `the message is ${this.actual} bytes of UTF-8, more than the limit of ${this.limit}`
      : `the message has ${this.actual} segments, more than the limit of ${this.limit}`
  }
  override get message(): string {
    return `${this.reason}: ${this.detail}`
  }
}

/**
 * The default of `maxMessageBytes`: 4 MiB of UTF-8. Far more than one HL7 v2 message needs (a large lab result is
 * tens of KiB), and little enough that a request stays short: each one parses the whole message, and a patch request
 * formats and checks it once too. 4 MiB of 70-byte segments took about 0.15 s to patch and 0.4 s to serve as JSON
 * when measured.
 *
 * @since 0.1.0
 * @category models
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024

/**
 * The default of `maxSegments`: 100,000, some 30 times the segments of a large real message. A request costs time per
 * segment as well as per byte: 4 MiB of near-empty segments is 700,000 of them, which took about 0.5 s to patch and
 * 1.1 s to serve as JSON when measured; 100,000 took 0.2 s and 0.45 s.
 *
 * @since 0.1.0
 * @category models
 */
export const DEFAULT_MAX_SEGMENTS = 100_000

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * UTF-8 bytes of a message `set` accepts; a longer one is refused with `MessageTooLarge` (reason
   * `MessageTooLarge`). `patch` keeps to it too: a batch that would make the message larger is refused with
   * `PatchRejected` (reason `MessageTooLarge`) at the patch that crosses it, counted as `Hl7.patch` counts under
   * `maxBytes` (a character outside the Basic Multilingual Plane counts 6 bytes, not 4). Default
   * {@link DEFAULT_MAX_MESSAGE_BYTES} (4 MiB); `Infinity` sets no bound.
   */
  readonly maxMessageBytes?: number | undefined
  /**
   * Segments of a message `set` accepts (its non-empty lines); more are refused with `MessageTooLarge` (reason
   * `TooManySegments`). Default {@link DEFAULT_MAX_SEGMENTS} (100,000); `Infinity` sets no bound.
   */
  readonly maxSegments?: number | undefined
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
     * HL7 v2 message (`Hl7.formatChecked`); otherwise the whole batch is refused with `BreaksMessage`. A batch that
     * would make the message larger than `maxMessageBytes` is refused with `MessageTooLarge` as soon as it crosses
     * the bound, before the rest is applied. One request costs time in proportion to the message plus the patches
     * (`Hl7.patch`), whatever they address.
     */
    readonly patch: (patches: ReadonlyArray<HermesProtocol.Patch>) => Effect.Effect<number, PatchRejected>
    /**
     * Replaces the message. Text over `maxMessageBytes` or `maxSegments` is refused with `MessageTooLarge` before it
     * is read. The store holds one message: text that does not parse as exactly one HL7 v2 message (MSH first, no
     * second MSH, as a batch would have) is refused with `NotHl7`.
     */
    readonly set: (text: string) => Effect.Effect<void, Hl7.Hl7Error | MessageTooLarge>
    /** The current text, then every new one. */
    readonly changes: Stream.Stream<string>
  }
}

/**
 * A store holding `initial`, which need not be HL7 (an empty editor holds `""`). `initial` is the host's own, so the
 * bounds of `options` apply to what `set` is given, not to it; if it is over `maxMessageBytes`, `patch` may make it
 * smaller but never larger.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (initial: string, options?: Options | undefined): Effect.Effect<MessageStore.Service> => {
  const maxMessageBytes = Math.floor(options?.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES)
  const maxSegments = Math.floor(options?.maxSegments ?? DEFAULT_MAX_SEGMENTS)
  return Effect.map(SubscriptionRef.make(initial), (ref): MessageStore.Service => ({
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
        const rejected = (index: number, error: Hl7.Hl7Error | Hl7.PatchTooLarge) => {
          const path = patches[index]?.path ?? ""
          const { detail, reason } = error
          return error._tag === "PatchTooLarge"
            ? new PatchRejected({ index, path, reason, detail, limit: error.limit, actual: error.actual })
            : new PatchRejected({ index, path, reason, detail })
        }
        const parsed = Hl7.parse(text)
        if (Result.isFailure(parsed)) return Effect.fail(rejected(0, parsed.failure))
        // No patch: nothing changes, and no change is published.
        if (patches.length === 0) return Effect.succeed([0, text] as const)
        return Result.match(Hl7.patch(parsed.success, patches, { maxBytes: maxMessageBytes }), {
          onFailure: ({ error, index }) => Effect.fail(rejected(index, error)),
          onSuccess: (patched) => Effect.succeed([patches.length, patched] as const)
        })
      }),
    set: (text) => {
      // Both counted before the text is parsed, which costs far more. A UTF-16 unit is 1 to 3 bytes of UTF-8, and a
      // segment at least one unit and a line break: shorter text is within the bounds uncounted.
      if (text.length > maxMessageBytes / 3) {
        const actual = utf8Bytes(text)
        if (actual > maxMessageBytes) {
          return Effect.fail(new MessageTooLarge({ reason: "MessageTooLarge", limit: maxMessageBytes, actual }))
        }
      }
      if (text.length > 2 * maxSegments) {
        const actual = countSegments(text)
        if (actual > maxSegments) {
          return Effect.fail(new MessageTooLarge({ reason: "TooManySegments", limit: maxSegments, actual }))
        }
      }
      return Result.match(Hl7.parse(text), {
        onFailure: Effect.fail,
        onSuccess: () => SubscriptionRef.set(ref, text)
      })
    },
    changes: SubscriptionRef.changes(ref)
  }))
}

/** The segments `Hl7.parse` would read: the non-empty lines, ended by CR, LF or CR LF. */
const countSegments = (text: string): number => {
  let segments = 0
  let inLine = false
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code === 13 || code === 10) inLine = false
    else if (!inLine) {
      inLine = true
      segments++
    }
  }
  return segments
}

/**
 * UTF-8 bytes of `text` without encoding it (a lone surrogate counts as the 3 bytes of the U+FFFD it is sent as): how
 * the host's size bounds are counted.
 *
 * @since 0.1.0
 * @category models
 */
export const utf8Bytes = (text: string): number => {
  let bytes = text.length
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code < 0x80) continue
    if (code < 0x800) {
      bytes += 1
      continue
    }
    bytes += 2
    // A surrogate pair: 2 UTF-16 units, 4 bytes.
    if (code >= 0xd800 && code <= 0xdbff && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) i++
  }
  return bytes
}

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (initial: string, options?: Options | undefined): Layer.Layer<MessageStore> =>
  Layer.effect(MessageStore, make(initial, options))
