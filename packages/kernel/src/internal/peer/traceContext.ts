/**
 * W3C trace context in `params._meta` (MCP 2026-07-28 reserves `traceparent`, `tracestate` and `baggage` there; see
 * docs/tracing.md): what an outbound request carries of the caller's span, and the inbound values, validated
 * and bounded, continued as the parent of the `rpc.serve` span.
 *
 * The `traceparent` itself is parsed by Effect's `HttpTraceContext.w3c` (version `00`, lowercase hex, ids not all
 * zero). Effect has no parser for `tracestate` or `baggage` (it neither reads nor writes them), so those two are checked
 * here, by hand, against the grammars of W3C Trace Context §3.3 and W3C Baggage §3.
 *
 * @internal
 */
import type * as Message from "@lifeline/jsonrpc/Message"
import * as Context from "effect/Context"
import * as Headers from "effect/http/Headers"
import * as HttpTraceContext from "effect/http/HttpTraceContext"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"

/** W3C Trace Context: at most 32 list members in `tracestate`, and 512 characters a vendor must propagate. @internal */
export const maxTracestateMembers = 32
/** @internal */
export const maxTracestateLength = 512
/** W3C Baggage: at most 180 list members and 8192 bytes. @internal */
export const maxBaggageMembers = 180
/** @internal */
export const maxBaggageBytes = 8192

/** `00-` + 32 + `-` + 16 + `-` + 2: a version-00 `traceparent` has exactly this length. */
const traceparentLength = 55

/**
 * What an inbound request carried besides its `traceparent`, kept on the external span it continues, so that the
 * handler's own outbound requests in the same trace carry it on.
 *
 * @internal
 */
export interface Carried {
  readonly tracestate: string | undefined
  readonly baggage: string | undefined
}

/** @internal */
export const Carried = Context.Reference<Carried | undefined>("@lifeline/kernel/TraceContext/Carried", {
  defaultValue: () => undefined
})

// -- validation --------------------------------------------------------------------------------------------------

/**
 * The parent a valid version-00 `traceparent` names, or `undefined`.
 *
 * @internal
 */
export const parseTraceparent = (value: unknown): Tracer.ExternalSpan | undefined => {
  // Checked first: `w3c` splits the whole string, and a peer may send a megabyte of it.
  if (typeof value !== "string" || value.length !== traceparentLength) return undefined
  return Option.getOrUndefined(HttpTraceContext.w3c(Headers.fromRecordUnsafe({ traceparent: value })))
}

/** Optional white space (OWS) is spaces and tabs only: `trim` would also take line breaks, which neither grammar allows. */
const trimOws = (text: string): string => text.replace(/^[ \t]+|[ \t]+$/g, "")

// tracestate: key = simple-key / multi-tenant-key; value = 0*255(chr) nblk-chr (chr = %x20 / nblk-chr).
const tracestateKey = /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})$/
const tracestateValue = /^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/

/**
 * Whether `value` is a `tracestate` within the W3C bounds: list members `key=value`, keys unique.
 *
 * @internal
 */
export const isTracestate = (value: unknown): value is string => {
  if (typeof value !== "string" || value.length > maxTracestateLength) return false
  const keys = new Set<string>()
  for (const raw of value.split(",")) {
    const member = trimOws(raw)
    if (member === "") continue // empty members (OWS) are allowed and do not count
    const eq = member.indexOf("=")
    if (eq <= 0) return false
    const key = member.slice(0, eq)
    if (!tracestateKey.test(key) || !tracestateValue.test(member.slice(eq + 1)) || keys.has(key)) return false
    keys.add(key)
    if (keys.size > maxTracestateMembers) return false
  }
  return true
}

// baggage: key = token (RFC 7230 tchar); value = *baggage-octet; properties `;key[=value]`.
const token = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+"
const baggageOctets = "[\\x21\\x23-\\x2b\\x2d-\\x3a\\x3c-\\x5b\\x5d-\\x7e]*"
const baggageMember = new RegExp(
  `^${token}[ \\t]*=[ \\t]*${baggageOctets}(?:[ \\t]*;[ \\t]*${token}(?:[ \\t]*=[ \\t]*${baggageOctets})?)*$`
)

/**
 * Whether `value` is a `baggage` within the W3C bounds (ASCII only, so its length is its size in bytes).
 *
 * @internal
 */
export const isBaggage = (value: unknown): value is string => {
  if (typeof value !== "string" || value.length > maxBaggageBytes) return false
  const members = value.split(",")
  if (members.length > maxBaggageMembers) return false
  for (const member of members) if (!baggageMember.test(trimOws(member))) return false
  return true
}

// -- inbound -----------------------------------------------------------------------------------------------------

/**
 * What an inbound request's `_meta` says: `undefined` when it names no parent (no `_meta.traceparent`: the common
 * case, decided with two property reads), the parent span it names, or `"invalid"` for each value that is not valid
 * (the caller counts them). An invalid `traceparent` drops the whole context (W3C: `tracestate` then means nothing);
 * an invalid `tracestate` or `baggage` is dropped alone.
 *
 * @internal
 */
export interface Inbound {
  readonly parent: Tracer.ExternalSpan | undefined
  readonly invalid: number
}

const none: Inbound = { parent: undefined, invalid: 0 }

/** @internal */
export const inbound = (params: Message.Params | undefined): Inbound => {
  if (typeof params !== "object" || params === null || Array.isArray(params)) return none
  const meta = (params as Record<string, unknown>)._meta
  if (typeof meta !== "object" || meta === null || !("traceparent" in meta)) return none
  const fields = meta as Record<string, unknown>
  const parsed = parseTraceparent(fields.traceparent)
  if (parsed === undefined) return { parent: undefined, invalid: 1 }
  let invalid = 0
  let tracestate: string | undefined
  let baggage: string | undefined
  if (fields.tracestate !== undefined) {
    if (isTracestate(fields.tracestate)) tracestate = fields.tracestate
    else invalid++
  }
  if (fields.baggage !== undefined) {
    if (isBaggage(fields.baggage)) baggage = fields.baggage
    else invalid++
  }
  const parent = tracestate === undefined && baggage === undefined ? parsed : Tracer.externalSpan({
    traceId: parsed.traceId,
    spanId: parsed.spanId,
    sampled: parsed.sampled,
    annotations: Context.make(Carried, { tracestate, baggage })
  })
  return { parent, invalid }
}

// -- outbound ----------------------------------------------------------------------------------------------------

/**
 * The span whose context an outbound message carries: the fiber's current one, skipping spans made with
 * `Tracer.DisablePropagation` as Effect does when it picks a parent.
 */
const propagated = (span: Tracer.AnySpan | undefined): Tracer.AnySpan | undefined => {
  while (span !== undefined && Context.get(span.annotations, Tracer.DisablePropagation)) {
    span = span._tag === "Span" ? Option.getOrUndefined(span.parent) : undefined
  }
  return span
}

/** What the external span this trace continues carried (`tracestate`, `baggage`), found up the chain of parents. */
const carriedBy = (span: Tracer.AnySpan): Carried | undefined => {
  let current: Tracer.AnySpan | undefined = span
  while (current !== undefined) {
    if (current._tag === "ExternalSpan") {
      const carried = Context.get(current.annotations, Carried)
      return carried !== undefined && current.traceId === span.traceId ? carried : undefined
    }
    current = Option.getOrUndefined(current.parent)
  }
  return undefined
}

/**
 * `params` with the span's context in `_meta`, or `params` itself when there is nothing to add: no span, ids a W3C
 * `traceparent` cannot carry (a custom tracer's), params that are an array (no `_meta` to put it in), a `_meta` that
 * is not an object, or a `_meta.traceparent` the caller set (never overwritten). Never changes the caller's object.
 *
 * Written here rather than with `HttpTraceContext.toHeaders`, which also builds a B3 header MCP has no place for.
 *
 * @internal
 */
export const inject = (
  current: Tracer.AnySpan | undefined,
  params: Message.Params | null | undefined
): Message.Params | null | undefined => {
  const span = propagated(current)
  if (span === undefined) return params
  if (Array.isArray(params)) return params
  const meta = params == null ? undefined : (params as Record<string, unknown>)._meta
  if (
    meta !== undefined && (typeof meta !== "object" || meta === null || Array.isArray(meta) || "traceparent" in meta)
  ) {
    return params
  }
  // A 64-bit trace id (B3) is widened as W3C says; anything else a custom tracer makes is checked like inbound input.
  const traceparent = `00-${span.traceId.padStart(32, "0")}-${span.spanId}-${span.sampled ? "01" : "00"}`
  if (parseTraceparent(traceparent) === undefined) return params
  const added: Record<string, unknown> = { ...(meta as Record<string, unknown> | undefined), traceparent }
  const carried = carriedBy(span)
  if (carried?.tracestate !== undefined && !("tracestate" in added)) added.tracestate = carried.tracestate
  if (carried?.baggage !== undefined && !("baggage" in added)) added.baggage = carried.baggage
  return { ...(params as Record<string, unknown> | null | undefined), _meta: added } as Message.Params
}
