/**
 * An HL7 extension for Hermes, built with the SDK: it anonymises the patient, validates the message and shows the
 * report in a window served by its own loopback HTTP server (at a secret URL per window: see `reportServer`), and
 * audits every field slowly (to show drain and cancellation). Everything it does to the message goes through
 * `editor/*`; its counters survive restarts in `$HERMES_DATA_DIR/extensions/hl7-tools/state.json`.
 */
import * as Editor from "@lifeline/hermes/Editor"
import * as Extension from "@lifeline/hermes/Extension"
import * as Hl7 from "@lifeline/hermes/Hl7"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import type * as Net from "node:net"

const State = Schema.Struct({
  anonymised: Schema.Number,
  validations: Schema.Number,
  audits: Schema.Number
})

interface Finding {
  readonly path: string
  readonly ok: boolean
  readonly note: string
}

/** A few checks a receiving system would make before accepting an ADT message. */
const validate = (message: Hl7.Message): ReadonlyArray<Finding> => {
  const present = (path: string, what: string): Finding => {
    const value = Hl7.get(message, path)
    return { path, ok: value !== undefined && value !== "", note: value ? `${what}: ${value}` : `${what} is missing` }
  }
  const birth = Hl7.get(message, "PID-7") ?? ""
  const sex = Hl7.get(message, "PID-8") ?? ""
  return [
    present("MSH-9.1", "message type"),
    present("MSH-10", "control id"),
    present("MSH-12", "version"),
    present("PID-3.1", "patient identifier"),
    present("PID-5.1", "family name"),
    {
      path: "PID-7",
      ok: /^\d{4}(\d{2}(\d{2})?)?$/.test(birth),
      note: birth === "" ? "birth date is missing" : `birth date ${birth}`
    },
    { path: "PID-8", ok: ["F", "M", "O", "U", "A", "N"].includes(sex), note: `administrative sex "${sex}"` }
  ]
}

/**
 * HL7 values are untrusted text: every one goes into the page through this, so no message can add markup. Enough for
 * element content and quoted attribute values, the only places the report puts text.
 */
const escapeHtml = (text: string) =>
  text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll("\"", "&quot;")
    .replaceAll("'", "&#39;")

const renderReport = (message: Hl7.Message, findings: ReadonlyArray<Finding>) => {
  const value = (path: string) => escapeHtml(Hl7.get(message, path) ?? "")
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>HL7 validation report</title></head>` +
    `<body><h1>HL7 validation report</h1>` +
    `<p>Patient <strong>${value("PID-5.1")}, ${value("PID-5.2")}</strong> (${value("PID-3.1")}), ` +
    `born ${value("PID-7")}; message ${value("MSH-10")}</p><table>` +
    findings.map((f) =>
      `<tr><td>${f.ok ? "✔" : "✘"}</td><td>${escapeHtml(f.path)}</td><td>${escapeHtml(f.note)}</td></tr>`
    ).join("") +
    `</table></body></html>`
}

/**
 * Sent with every answer, refusals included. The page is static HTML: it loads nothing, runs nothing, may not be
 * framed, stored, sniffed as another type, or embedded by another site, and it names no referrer (its URL holds
 * the token).
 */
const securityHeaders = {
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "content-security-policy": "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "cross-origin-resource-policy": "same-origin"
} as const

/**
 * The report server's bounds (docs/writing-an-extension.md, "Serving a window's page safely"). Any local process can
 * connect to it, so a connection that sends nothing for `idleTimeoutMs` is closed (Node's `server.timeout`: a silent
 * socket, a request stalled halfway, an idle keep-alive connection); one that trickles bytes may take at most
 * `headersTimeoutMs` for a request's headers and `requestTimeoutMs` for the whole request, which Node checks every
 * `connectionsCheckingIntervalMs` (its default, 30 s, would hold such a socket up to 30 s).
 */
export const windowServerLimits = {
  idleTimeoutMs: 2_000,
  headersTimeoutMs: 2_000,
  requestTimeoutMs: 5_000,
  keepAliveTimeoutMs: 2_000,
  connectionsCheckingIntervalMs: 250,
  /** Open connections at most: one more closes the oldest (see `reportServer`). */
  maxConnections: 64
} as const

/** 256 bits from the operating system's CSPRNG (`effect/Random` is `Math.random` by default: not for secrets). */
const tokenBytes = 32

const sha256 = (text: string) => Crypto.createHash("sha256").update(text, "utf8").digest()

/**
 * The report server: one page per open window, each at `/w/<token>/` under its own unguessable token, served only
 * while its window is open. Any process on the machine can connect to a loopback port and any web page can make the
 * browser send requests to one, so the server answers nothing without the token (404) and refuses every request whose
 * `Host` is not exactly the address it announces (421): a DNS-rebinding page reaches the port under its own name.
 * Loopback only, an ephemeral port, closed (with its connections) when the extension stops.
 */
const reportServer = Effect.gen(function*() {
  // Read synchronously by the request handler; tokens are compared by their SHA-256 digests in constant time.
  const pages = new Map<string, { readonly digest: Buffer; readonly html: string }>()
  const find = (candidate: string) => {
    const digest = sha256(candidate)
    let found: string | undefined
    // Every page is compared, a match or not: the time taken says nothing about how close a guess was.
    for (const page of pages.values()) {
      if (Crypto.timingSafeEqual(page.digest, digest)) found = page.html
    }
    return found
  }
  const { host } = yield* Effect.acquireRelease(
    Effect.callback<{ readonly server: Http.Server; readonly host: string }, Error>((resume) => {
      // Set when the port is bound; until then (no one can know the port yet) every request is refused.
      let host: string | undefined
      // Only the page for the exact URL and Host; nothing at all otherwise.
      const route = (request: Http.IncomingMessage): { readonly status: number; readonly html?: string } => {
        // Exactly what the URL names: `localhost` is not announced (it may resolve to ::1, where nothing listens),
        // and a request without a Host (HTTP/1.0) is refused like a foreign one.
        if (host === undefined || request.headers.host !== host) return { status: 421 }
        if (request.method !== "GET" && request.method !== "HEAD") return { status: 405 }
        const token = /^\/w\/([^/?#]+)\/$/.exec(request.url ?? "")?.[1]
        const html = token === undefined ? undefined : find(token)
        return html === undefined ? { status: 404 } : { status: 200, html }
      }
      // A client that connects and sends nothing, or half a request (any local process can), is dropped within the
      // bounds rather than held until shutdown.
      const limits = windowServerLimits
      const server = Http.createServer({
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        keepAliveTimeout: limits.keepAliveTimeoutMs,
        connectionsCheckingInterval: limits.connectionsCheckingIntervalMs
      }, (request, response) => {
        const { html, status } = route(request)
        if (html === undefined) {
          const allow = status === 405 ? { allow: "GET, HEAD" } : {}
          response.writeHead(status, { ...securityHeaders, ...allow, "content-length": "0" }).end()
        } else {
          response.writeHead(200, {
            ...securityHeaders,
            "content-type": "text/html; charset=utf-8",
            "content-length": String(Buffer.byteLength(html, "utf8"))
          }).end(html)
        }
      })
      // Without a 'timeout' listener, Node destroys a socket silent for this long.
      server.setTimeout(limits.idleTimeoutMs)
      // Written by hand rather than Node's `server.maxConnections`, which refuses the newest connection: a flood of
      // idle sockets would then lock the window's own page out until they time out. Here the oldest connection goes
      // instead (the page is answered at once, so an old connection is an idle or a stalled one), and a new client
      // is served at once.
      const open = new Set<Net.Socket>()
      server.on("connection", (socket: Net.Socket) => {
        if (open.size >= limits.maxConnections) {
          const oldest = open.values().next().value!
          open.delete(oldest)
          oldest.destroy()
        }
        open.add(socket)
        socket.once("close", () => open.delete(socket))
      })
      // Node reports a timed-out or malformed request here; without a listener it answers 408 or 400 but leaves a
      // silent client's socket open. Answered the same way, then closed for sure.
      server.on("clientError", (error: NodeJS.ErrnoException, socket: Net.Socket) => {
        const status = error.code === "ERR_HTTP_REQUEST_TIMEOUT" ? "408 Request Timeout" : "400 Bad Request"
        if (socket.writable) socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`)
        socket.destroy()
      })
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(0, "127.0.0.1", () => {
        host = `127.0.0.1:${(server.address() as AddressInfo).port}`
        resume(Effect.succeed({ server, host }))
      })
    }),
    ({ server }) =>
      Effect.callback<void>((resume) => {
        pages.clear()
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      }).pipe(Effect.andThen(Effect.logInfo("report server stopped")))
  )
  yield* Effect.logInfo(`report server on http://${host}`)
  return {
    /**
     * Serves `html` at a new unguessable URL until the Scope closes: the window's life, in a command's Scope.
     */
    publish: (html: string): Effect.Effect<string, never, Scope.Scope> =>
      Effect.acquireRelease(
        Effect.sync(() => {
          const token = Crypto.randomBytes(tokenBytes).toString("base64url")
          pages.set(token, { digest: sha256(token), html })
          return token
        }),
        (token) => Effect.sync(() => pages.delete(token))
      ).pipe(Effect.map((token) => `http://${host}/w/${token}/`))
  }
})

const parse = (text: string) =>
  Result.match(Hl7.parse(text), {
    onFailure: (error) => Effect.fail(error),
    onSuccess: Effect.succeed
  })

/** The extension. */
export const hl7Extension = Extension.make({
  name: "hl7-tools",
  version: "1.0.0",
  state: { schema: State, initial: { anonymised: 0, validations: 0, audits: 0 } },
  resources: reportServer,
  commands: {
    "hl7.anonymise": {
      title: "Anonymise the patient",
      description: "Replaces names, identifiers, address and phone in PID; keeps only the year of birth",
      run: ({ state }) =>
        Effect.gen(function*() {
          const message = yield* parse(yield* Editor.getMessage("raw"))
          const identifiers = (Hl7.get(message, "PID-3") ?? "").split(message.delimiters.repetition)
          const birth = Hl7.get(message, "PID-7") ?? ""
          const applied = yield* Editor.patchMessage([
            { path: "PID-5.1", value: "ANONYMOUS" },
            { path: "PID-5.2", value: "PATIENT" },
            { path: "PID-5.3", value: null },
            ...identifiers.map((_, i) => ({ path: `PID-3[${i + 1}].1`, value: `ANON-${i + 1}` })),
            { path: "PID-7", value: birth.slice(0, 4) || null },
            { path: "PID-11", value: null },
            { path: "PID-13", value: null },
            { path: "PID-19", value: null }
          ])
          const { anonymised } = yield* SubscriptionRef.updateAndGet(
            state,
            (s) => ({ ...s, anonymised: s.anonymised + 1 })
          )
          yield* Effect.logInfo(`anonymised: ${applied} fields patched (${anonymised} messages so far)`)
        })
    },
    "hl7.validate": {
      title: "Validate and show the report",
      description: "Checks MSH and PID, then opens the report in a window served on a loopback port",
      run: ({ resources, state }) =>
        Effect.gen(function*() {
          const json = JSON.parse(yield* Editor.getMessage("json"))
          const message = yield* parse(yield* Editor.getMessage("raw"))
          const findings = validate(message)
          yield* SubscriptionRef.update(state, (s) => ({ ...s, validations: s.validations + 1 }))
          const failed = findings.filter((f) => !f.ok).length
          yield* Effect.logInfo(`validated ${Object.keys(json).length} segments: ${failed} problem(s)`)
          // The page lives as long as this command's Scope: it is gone once the window has closed.
          const url = yield* resources.publish(renderReport(message, findings))
          const window = yield* Editor.openWindow({ url, title: "HL7 validation report" })
          yield* window.closed
          yield* Effect.logInfo(`report window ${window.windowId} closed`)
        })
    },
    "hl7.audit": {
      title: "Audit every field (slow, cancellable)",
      description: "Walks every field for two seconds, then adds an NTE note; cancelled cleanly at shutdown",
      run: ({ state }) => {
        let step = 0
        return Effect.gen(function*() {
          const message = yield* parse(yield* Editor.getMessage("raw"))
          const fields = message.segments.reduce((n, s) => n + s.fields.length - 1, 0)
          for (step = 1; step <= 20; step++) yield* Effect.sleep(Duration.millis(100))
          const now = yield* Editor.getMessage("raw")
          yield* Editor.setMessage(`${now.replace(/\r+$/, "")}\rNTE|1||Audited ${fields} fields`)
          yield* SubscriptionRef.update(state, (s) => ({ ...s, audits: s.audits + 1 }))
          yield* Effect.logInfo(`audit finished: ${fields} fields`)
        }).pipe(Effect.onInterrupt(() => Effect.logWarning(`audit cancelled at step ${step} of 20`)))
      }
    }
  }
})
