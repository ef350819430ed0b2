/**
 * The conformance kit's host side of one run: it numbers the kit's requests and waits for their answers, sorts every
 * frame from the extension (an answer to a pending request, an answer to nothing, a request), serves the extension's
 * `editor/*` and `ui/*` requests from an HL7 message as Hermes would, checks each of them against docs/protocol.md,
 * and keeps the marks the HTML timeline is drawn from.
 */
import * as HermesProtocol from "@lifeline/hermes/HermesProtocol"
import * as Hl7 from "@lifeline/hermes/Hl7"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type { Child, Received } from "./conformanceDriver.js"

/** The message served by `editor/getMessage` at the start of every run: the HL7 example's sample. */
export const sampleMessage = [
  "MSH|^~\\&|LAB|GENERAL HOSPITAL|HERMES|HERMES|20240315083000||ADT^A01^ADT_A01|MSG00042|P|2.5",
  "EVN|A01|20240315083000",
  "PID|1||4711^^^GH^MR~123-45-6789^^^SSA^SS||DOE^JOHN^QUINCY||19800229|M|||12 MAIN ST^^SPRINGFIELD^IL^62701||" +
  "(217)555-0199||||||123-45-6789",
  "PV1|1|I|WARD3^301^A|||||||MED",
  "OBX|1|NM|GLU^Glucose||5.4|mmol/L|3.9-6.1|N|||F"
].join("\r")

export type MarkKind =
  | "spawn"
  | "initialize"
  | "notification"
  | "command"
  | "request"
  | "window"
  | "shutdown"
  | "stdin"
  | "signal"
  | "exit"
  | "ping"

/** A point (or, with `end`, a span) on the run's timeline, in ms since the spawn. */
export interface Mark {
  readonly kind: MarkKind
  readonly at: number
  readonly end?: number | undefined
  readonly label: string
}

/** A request from the extension, and what the kit did with it. */
export interface Served {
  readonly frame: Received
  readonly method: string
  readonly at: number
  answeredAt?: number
  ok?: boolean
  withheld?: boolean
}

/** A notification the kit sent while the extension waited for the answer to `request`. */
interface DuringRequest {
  readonly at: number
  readonly notification: string
  readonly request: string
}

/** The kit's request and its answer, if one came in time. */
export interface Exchange {
  readonly id: number
  readonly method: string
  readonly sentAt: number
  readonly answer: Option.Option<Received>
}

type BeforeAnswer = (served: Served, session: Session) => "answer" | "withhold"

export interface Session {
  readonly run: string
  readonly child: Child
  readonly dataDir: string
  readonly marks: Array<Mark>
  readonly served: Array<Served>
  /** What was wrong with the extension's requests (and notifications), one line each. */
  readonly malformed: Array<string>
  /** Answers to no pending request of the kit (a notification answered, an answer twice). */
  readonly unexpected: Array<Received>
  readonly during: Array<DuringRequest>
  /** Milliseconds since the spawn. */
  readonly ms: (at: number) => number
  readonly mark: (kind: MarkKind, at: number, label: string, end?: number) => void
  readonly request: (method: string, params: unknown, timeoutMs: number) => Effect.Effect<Exchange>
  /** Writes `bytes` (which hold a request with `id`) as they are, and waits for the answer like `request`. */
  readonly requestRaw: (method: string, id: number, bytes: Uint8Array, timeoutMs: number) => Effect.Effect<Exchange>
  readonly notify: (method: string, params?: unknown) => number
  /** Answers with `id: null` that the next malformed input is allowed to get. */
  readonly expectNullAnswer: () => void
  /** Serves a withheld request now (the late answer). */
  readonly answer: (served: Served) => number
  readonly setBeforeAnswer: (hook: BeforeAnswer) => void
  readonly lastActivity: () => number
}

/** Marks kept per run: the timeline of a flood is drawn up to here. */
const maxMarks = 2000
/** Characters of a mark's label. */
const maxLabel = 120

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** An answer: `result` or `error` without `method` (docs/protocol.md, "Notifications during requests"). */
export const isAnswer = (frame: Received): frame is Received & { readonly message: Record<string, unknown> } =>
  isRecord(frame.message) && !("method" in frame.message) && ("result" in frame.message || "error" in frame.message)

export const errorCode = (frame: Received): number | undefined => {
  const error = isRecord(frame.message) ? frame.message.error : undefined
  return isRecord(error) && typeof error.code === "number" ? error.code : undefined
}

const paramsSchemas: Record<string, Schema.Top> = {
  "editor/getMessage": HermesProtocol.GetMessage.params,
  "editor/patchMessage": HermesProtocol.PatchMessage.params,
  "editor/setMessage": HermesProtocol.SetMessage.params,
  "ui/openWindow": HermesProtocol.OpenWindow.params
}

type Answer = { readonly result: unknown } | {
  readonly error: { readonly code: number; readonly message: string; readonly data?: unknown }
}
const invalidParams = (data: unknown): Answer => ({ error: { code: -32602, message: "Invalid params", data } })

export const makeSession = (run: string, child: Child, dataDir: string): Session => {
  let message = sampleMessage
  let nextId = 1
  let windows = 0
  let nullAnswers = 0
  let lastActivity = child.spawnedAt
  const pending = new Set<unknown>()
  const seenIds = new Set<unknown>()
  const marks: Array<Mark> = []
  const served: Array<Served> = []
  const malformed: Array<string> = []
  const unexpected: Array<Received> = []
  const during: Array<DuringRequest> = []
  let beforeAnswer: BeforeAnswer = () => "answer"
  const ms = (at: number) => Math.round(at - child.spawnedAt)
  const mark = (kind: MarkKind, at: number, label: string, end?: number) => {
    // An extension that floods the host gets its requests, commands and windows drawn up to a bound; the lifecycle
    // always.
    if (marks.length >= maxMarks && (kind === "request" || kind === "command" || kind === "window")) return
    // Labels hold what the extension chose (command ids, methods): cut, so the timeline stays bounded too.
    const shown = label.length > maxLabel ? `${label.slice(0, maxLabel - 1)}…` : label
    marks.push({ kind, at: ms(at), label: shown, end: end === undefined ? undefined : ms(end) })
  }

  /** What Hermes would answer: docs/protocol.md, "Extension → host". */
  const serve = (method: string, params: unknown, label: string, session: Session): Answer => {
    const schema = paramsSchemas[method]
    if (schema === undefined) return { error: { code: -32601, message: `Method not found: ${method}` } }
    const decoded = Schema.decodeUnknownResult(schema as Schema.Codec<unknown, unknown>)(params ?? undefined)
    if (Result.isFailure(decoded)) return invalidParams(decoded.failure.message)
    const p = decoded.success as any
    switch (method) {
      case "editor/getMessage": {
        if (p?.format !== "json") return { result: { message } }
        const parsed = Hl7.parse(message)
        return Result.isSuccess(parsed)
          ? { result: { message: JSON.stringify(Hl7.toJson(parsed.success)) } }
          : invalidParams({ reason: parsed.failure.reason, detail: parsed.failure.detail })
      }
      case "editor/patchMessage": {
        const parsed = Hl7.parse(message)
        if (Result.isFailure(parsed)) return invalidParams({ reason: "NotHl7", detail: parsed.failure.detail })
        const patched = Hl7.patch(parsed.success, p.patches, { maxBytes: 4 * 1024 * 1024 })
        if (Result.isFailure(patched)) {
          const { error, index } = patched.failure
          return invalidParams({ index, reason: error.reason, detail: error.detail })
        }
        message = patched.success
        return { result: { applied: p.patches.length } }
      }
      case "editor/setMessage": {
        const parsed = Hl7.parse(p.message)
        if (Result.isFailure(parsed)) return invalidParams({ reason: "NotHl7", detail: parsed.failure.detail })
        message = p.message
        return { result: { success: true } }
      }
      default: {
        // docs/protocol.md, "window/closed": it may arrive before the extension has read the answer with the id,
        // so the kit sends it first, while the extension waits for that answer.
        const windowId = `conformance-window-${++windows}`
        session.mark("window", performance.now(), `window/closed ${windowId} (before its answer)`)
        during.push({
          at: session.notify("window/closed", { windowId }),
          notification: "window/closed",
          request: label
        })
        return { result: { windowId } }
      }
    }
  }

  /** docs/protocol.md: "Transport" (ids, `params: null` never sent), "Extension → host" (methods and params). */
  const check = (m: Record<string, unknown>): Array<string> => {
    const problems: Array<string> = []
    const label = `${typeof m.method === "string" ? m.method : "request"} (id ${JSON.stringify(m.id)})`
    if (m.jsonrpc !== "2.0") problems.push(`${label}: "jsonrpc" is ${JSON.stringify(m.jsonrpc)}, not "2.0"`)
    if (!(typeof m.id === "string" || Number.isSafeInteger(m.id))) {
      problems.push(`${label}: the id is neither an integer nor a string`)
    } else if (seenIds.has(m.id)) problems.push(`${label}: id used twice (each side keeps its own id sequence)`)
    seenIds.add(m.id)
    if (typeof m.method !== "string" || paramsSchemas[m.method] === undefined) {
      problems.push(`${label}: not a method the host serves (editor/getMessage, editor/patchMessage, ...)`)
    } else if (m.params === null) {
      problems.push(`${label}: "params": null, which the protocol says is never sent`)
    } else {
      const decoded = Schema.decodeUnknownResult(paramsSchemas[m.method] as Schema.Codec<unknown, unknown>)(m.params)
      if (Result.isFailure(decoded)) problems.push(`${label}: invalid params: ${decoded.failure.message}`)
    }
    return problems
  }

  const answer = (s: Served, session: Session): number => {
    const m = s.frame.message as Record<string, unknown>
    const reply = serve(s.method, m.params, `${s.method} (id ${JSON.stringify(m.id)})`, session)
    const at = child.send({ jsonrpc: "2.0", id: m.id, ...reply })
    s.answeredAt = at
    s.ok = "result" in reply
    lastActivity = at
    const r = s.frame.at
    mark("request", r, `${s.method}${s.ok ? "" : " (refused)"}`, at)
    return at
  }

  const exchange = (method: string, id: number, sentAt: number, timeoutMs: number): Effect.Effect<Exchange> =>
    Effect.map(
      child.next((f) => isAnswer(f) && f.message.id === id, timeoutMs),
      (answer) => ({ id, method, sentAt, answer })
    )

  const session: Session = {
    run,
    child,
    dataDir,
    marks,
    served,
    malformed,
    unexpected,
    during,
    ms,
    mark,
    request: (method, params, timeoutMs) => {
      const id = nextId++
      pending.add(id)
      const sentAt = child.send({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) })
      lastActivity = sentAt
      return exchange(method, id, sentAt, timeoutMs)
    },
    requestRaw: (method, id, bytes, timeoutMs) => {
      nextId = Math.max(nextId, id + 1)
      pending.add(id)
      const sentAt = child.write(bytes)
      return exchange(method, id, sentAt, timeoutMs)
    },
    notify: (method, params) => {
      const at = child.send({ jsonrpc: "2.0", method, ...(params === undefined ? {} : { params }) })
      lastActivity = at
      return at
    },
    expectNullAnswer: () => {
      nullAnswers++
    },
    answer: (s) => answer(s, session),
    setBeforeAnswer: (hook) => {
      beforeAnswer = hook
    },
    lastActivity: () => lastActivity
  }

  child.onFrame((frame) => {
    lastActivity = frame.at
    const m = frame.message
    if (!isRecord(m)) return
    if (isAnswer(frame)) {
      if (pending.delete(m.id)) return
      if (m.id === null && nullAnswers > 0) {
        nullAnswers--
        return
      }
      unexpected.push(frame)
      return
    }
    if (typeof m.method !== "string") return
    if (!("id" in m)) {
      malformed.push(
        m.method === "$/cancelRequest"
          ? `$/cancelRequest: the protocol has no cancellation ("neither side sends $/cancelRequest")`
          : `${m.method}: a notification, and the protocol defines none from the extension`
      )
      return
    }
    malformed.push(...check(m))
    const s: Served = { frame, method: m.method, at: frame.at }
    served.push(s)
    if (beforeAnswer(s, session) === "withhold") s.withheld = true
    else answer(s, session)
  })

  return session
}
