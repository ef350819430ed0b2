/**
 * An HL7 extension for Hermes, built with the SDK: it anonymises the patient, validates the message and shows the
 * report in a window served by its own loopback HTTP server, and audits every field slowly (to show drain and
 * cancellation). Everything it does to the message goes through `editor/*`; its counters survive restarts in
 * `$HERMES_DATA_DIR/extensions/hl7-tools/state.json`.
 */
import * as Editor from "@lifeline/hermes/Editor"
import * as Extension from "@lifeline/hermes/Extension"
import * as Hl7 from "@lifeline/hermes/Hl7"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

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

const escapeHtml = (text: string) =>
  text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll("\"", "&quot;")

const renderReport = (findings: ReadonlyArray<Finding>) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>HL7 validation report</title></head><body>` +
  `<h1>HL7 validation report</h1><table>` +
  findings.map((f) => `<tr><td>${f.ok ? "✔" : "✘"}</td><td>${f.path}</td><td>${escapeHtml(f.note)}</td></tr>`)
    .join("") +
  `</table></body></html>`

/** The report server: loopback only, an ephemeral port, closed (with its connections) when the extension stops. */
const reportServer = Effect.gen(function*() {
  const report = yield* Ref.make("<!doctype html><p>No report yet.</p>")
  const server = yield* Effect.acquireRelease(
    Effect.callback<Http.Server, Error>((resume) => {
      const server = Http.createServer((request, response) => {
        if (request.url !== "/report") {
          response.writeHead(404).end()
          return
        }
        Effect.runPromise(Ref.get(report)).then((html) => {
          response.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(html)
        })
      })
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) =>
      Effect.callback<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      }).pipe(Effect.andThen(Effect.logInfo("report server stopped")))
  )
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/report`
  yield* Effect.logInfo(`report server on ${url}`)
  return { report, url }
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
          yield* Ref.set(resources.report, renderReport(findings))
          yield* SubscriptionRef.update(state, (s) => ({ ...s, validations: s.validations + 1 }))
          const failed = findings.filter((f) => !f.ok).length
          yield* Effect.logInfo(`validated ${Object.keys(json).length} segments: ${failed} problem(s)`)
          const window = yield* Editor.openWindow({ url: resources.url, title: "HL7 validation report" })
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
