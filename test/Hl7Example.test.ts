/**
 * The HL7 example's report window (examples/hl7-extension) as a real process under `ExtensionHost`: the page it opens
 * with `ui/openWindow` is served at its announced URL only, to requests naming the address it announced, with
 * headers that keep it out of caches and other sites, and with the message's text escaped. Loopback only: the tests
 * talk to the extension's own server on 127.0.0.1.
 */
import { assert, describe, it } from "@effect/vitest"
import { ExtensionHost, MessageStore, WindowPresenter } from "@lifeline/hermes"
import type { Spawner } from "@lifeline/hermes"
import { NodeSpawner } from "@lifeline/hermes-node"
import { Deferred, Effect, Exit, Option, References } from "effect"
import { FetchHttpClient, HttpClient } from "effect/http"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { root } from "./support/framed.js"

const hl7: Spawner.Spec = {
  command: Path.join(root, "examples", "hl7-extension", "bin", "hl7-extension")
}

// A patient whose name and identifier are markup: `\T\` is HL7's escape for `&`, so PID-5.1 reads
// `<script>alert("x")</script>&'` once decoded.
const hostileName = "<script>alert(\"x\")</script>\\T\\'"
const hostile = [
  "MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|MSG-1|P|2.5",
  `PID|1||<b>4711</b>^^^HOSP||${hostileName}^<img src=x onerror=alert(1)>||19800101|M`
].join("\r")

interface Reply {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

/** One request to 127.0.0.1:`port`, on a fresh connection, bounded by 5 s. `host` replaces the Host header. */
const request = (
  port: number,
  path: string,
  options: { readonly host?: string; readonly method?: string } = {}
) =>
  Effect.callback<Reply, Error>((resume) => {
    const req = Http.request(
      {
        host: "127.0.0.1",
        port,
        path,
        method: options.method ?? "GET",
        headers: options.host === undefined ? {} : { host: options.host },
        agent: false,
        timeout: 5_000
      },
      (response) => {
        const chunks: Array<Buffer> = []
        response.on("data", (chunk: Buffer) => chunks.push(chunk))
        response.on("end", () =>
          resume(Effect.succeed({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: Buffer.concat(chunks).toString("utf8")
          })))
        response.on("error", (error) => resume(Effect.fail(error)))
      }
    )
    req.on("timeout", () => req.destroy(new Error(`no answer to ${path} within 5 s`)))
    req.on("error", (error) => resume(Effect.fail(error)))
    req.end()
    return Effect.sync(() => req.destroy())
  })

/** Raw bytes to 127.0.0.1:`port`, for a request Node's client would not send (HTTP/1.0 without a Host). */
const raw = (port: number, text: string) =>
  Effect.callback<string, Error>((resume) => {
    const socket = Net.connect({ host: "127.0.0.1", port })
    const chunks: Array<Buffer> = []
    socket.setTimeout(5_000, () => socket.destroy(new Error("no answer within 5 s")))
    socket.on("data", (chunk: Buffer) => chunks.push(chunk))
    socket.on("end", () => resume(Effect.succeed(Buffer.concat(chunks).toString("latin1"))))
    socket.on("error", (error) => resume(Effect.fail(error)))
    socket.end(text)
    return Effect.sync(() => socket.destroy())
  })

interface Probed {
  readonly url: URL
  readonly page: Reply
  readonly head: Reply
  readonly refusals: ReadonlyArray<{ readonly what: string; readonly reply: Reply }>
  readonly noHost: string
}

/** Everything the tests ask the server while the window is open. */
const probe = (announced: string) =>
  Effect.gen(function*() {
    const url = new URL(announced)
    const port = Number(url.port)
    const token = url.pathname.split("/")[2]
    const other = token.slice(0, -1) + (token.endsWith("A") ? "B" : "A")
    const page = yield* request(port, url.pathname)
    const head = yield* request(port, url.pathname, { method: "HEAD" })
    const refusals: Array<{ readonly what: string; readonly reply: Reply }> = []
    const refused = (what: string, path: string, options: { readonly host?: string; readonly method?: string } = {}) =>
      Effect.map(request(port, path, options), (reply) => {
        refusals.push({ what, reply })
      })
    yield* refused("no token", "/")
    yield* refused("the old fixed path", "/report")
    yield* refused("no token under /w/", "/w/")
    yield* refused("a wrong token of the same length", `/w/${other}/`)
    yield* refused("a prefix of the token", `/w/${token.slice(0, -1)}/`)
    yield* refused("the token and more", `/w/${token}x/`)
    yield* refused("the token without the final slash", `/w/${token}`)
    yield* refused("the token with a query", `/w/${token}/?x=1`)
    yield* refused("the token in a query", `/?token=${token}`)
    yield* refused("a foreign Host (DNS rebinding)", url.pathname, { host: `evil.example:${port}` })
    yield* refused("Host localhost (not announced)", url.pathname, { host: `localhost:${port}` })
    yield* refused("Host without the port", url.pathname, { host: "127.0.0.1" })
    yield* refused("another port in Host", url.pathname, { host: `127.0.0.1:${port === 1 ? 2 : port - 1}` })
    yield* refused("POST", url.pathname, { method: "POST" })
    const noHost = yield* raw(port, `GET ${url.pathname} HTTP/1.0\r\n\r\n`)
    return { url, page, head, refusals, noHost } satisfies Probed
  })

const quiet = Effect.provideService(References.MinimumLogLevel, "Error")

describe("HL7 example: the report window's server", () => {
  it.live(
    "serves each window's escaped page at its own secret URL only, to its own Host, while the window is open",
    () =>
      Effect.gen(function*() {
        const dataDir = yield* Effect.acquireRelease(
          Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "hl7-example-test-"))),
          (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
        )
        const store = yield* MessageStore.make(hostile)
        // The real headless presenter shows the window after the probes: its fetch must get the page as well.
        const headless = yield* Effect.map(HttpClient.HttpClient, (client) => WindowPresenter.makeHeadless(client))
          .pipe(
            Effect.provide(FetchHttpClient.layer)
          )
        const probed = yield* Deferred.make<Probed, Error>()
        const shown = yield* Deferred.make<WindowPresenter.Presentation>()
        // The first window is probed, then shown by the real presenter; the next one by `later`.
        let later: (window: WindowPresenter.Window) => Effect.Effect<WindowPresenter.Presentation> = headless.present
        let first = true
        const windows: WindowPresenter.WindowPresenter.Service = {
          present: (window) => {
            if (!first) return later(window)
            first = false
            return Effect.gen(function*() {
              yield* Deferred.done(probed, yield* Effect.exit(probe(window.url)))
              const presentation = yield* headless.present(window)
              yield* Deferred.succeed(shown, presentation)
              return presentation
            })
          }
        }
        const extension = yield* ExtensionHost.start(hl7, { dataDir, hostPid: process.pid }).pipe(
          Effect.provideService(MessageStore.MessageStore, store),
          Effect.provideService(WindowPresenter.WindowPresenter, windows)
        )
        assert.strictEqual(yield* extension.status, "Ready")
        yield* extension.execute("hl7.validate")
        const { head, noHost, page, refusals, url } = yield* Deferred.await(probed).pipe(Effect.timeout("20 seconds"))
        const port = Number(url.port)

        // The announced URL: loopback, the port it bound, a 256-bit token in the path.
        assert.strictEqual(url.protocol, "http:")
        assert.strictEqual(url.hostname, "127.0.0.1")
        assert.match(url.pathname, /^\/w\/[A-Za-z0-9_-]{43}\/$/)
        assert.strictEqual(url.search, "")

        // The page: escaped patient data, and headers that keep it private.
        assert.strictEqual(page.status, 200)
        assert.strictEqual(page.headers["content-type"], "text/html; charset=utf-8")
        assert.strictEqual(page.headers["cache-control"], "no-store")
        assert.strictEqual(page.headers["x-content-type-options"], "nosniff")
        assert.strictEqual(page.headers["referrer-policy"], "no-referrer")
        assert.include(page.headers["content-security-policy"], "default-src 'none'")
        assert.include(page.headers["content-security-policy"], "frame-ancestors 'none'")
        assert.include(page.body, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;")
        assert.include(page.body, "&lt;img src=x onerror=alert(1)&gt;")
        assert.include(page.body, "&lt;b&gt;4711&lt;/b&gt;")
        assert.notInclude(page.body, "<script")
        assert.notInclude(page.body, "<img")
        assert.notInclude(page.body, "<b>")
        assert.strictEqual(head.status, 200)
        assert.strictEqual(head.body, "")

        // Everything else: the status, no body, and the same headers.
        const statuses = Object.fromEntries(refusals.map(({ reply, what }) => [what, reply.status]))
        assert.deepStrictEqual(statuses, {
          "no token": 404,
          "the old fixed path": 404,
          "no token under /w/": 404,
          "a wrong token of the same length": 404,
          "a prefix of the token": 404,
          "the token and more": 404,
          "the token without the final slash": 404,
          "the token with a query": 404,
          "the token in a query": 404,
          "a foreign Host (DNS rebinding)": 421,
          "Host localhost (not announced)": 421,
          "Host without the port": 421,
          "another port in Host": 421,
          "POST": 405
        })
        for (const { reply, what } of refusals) {
          assert.strictEqual(reply.body, "", what)
          assert.strictEqual(reply.headers["cache-control"], "no-store", what)
          assert.strictEqual(reply.headers["x-content-type-options"], "nosniff", what)
        }
        assert.match(noHost, /^HTTP\/1\.1 421 /)
        assert.notInclude(noHost, "alert")

        // The host's own fetch (Node's fetch, Host 127.0.0.1:<port>) got the page.
        const presentation = yield* Deferred.await(shown).pipe(Effect.timeout("10 seconds"))
        assert.deepStrictEqual(presentation, { status: 200, bytes: Buffer.byteLength(page.body, "utf8") })

        // Once the window has closed, its URL serves nothing, though the server is still up.
        let afterClose = yield* request(port, url.pathname)
        for (let i = 0; afterClose.status === 200 && i < 100; i++) {
          yield* Effect.sleep("50 millis")
          afterClose = yield* request(port, url.pathname)
        }
        assert.strictEqual(afterClose.status, 404)
        assert.strictEqual(afterClose.body, "")

        // The next window gets a token of its own; the first one's still serves nothing.
        const second = yield* Deferred.make<{ readonly url: string; readonly own: number; readonly first: number }>()
        later = (window) =>
          Effect.gen(function*() {
            const own = yield* request(port, new URL(window.url).pathname)
            const first = yield* request(port, url.pathname)
            yield* Deferred.succeed(second, { url: window.url, own: own.status, first: first.status })
            return { status: own.status, bytes: own.body.length }
          }).pipe(Effect.orDie)
        yield* extension.execute("hl7.validate")
        const next = yield* Deferred.await(second).pipe(Effect.timeout("20 seconds"))
        assert.notStrictEqual(next.url, url.href)
        assert.strictEqual(new URL(next.url).host, url.host)
        assert.deepStrictEqual([next.own, next.first], [200, 404])

        yield* extension.awaitQuiet("200 millis")
        const summary = yield* extension.shutdown("closing")
        assert.isTrue(Option.isSome(summary) && summary.value.success)

        // Shut down: the port is closed.
        const after = yield* Effect.exit(request(port, url.pathname))
        assert.isTrue(Exit.isFailure(after), "the server is closed at shutdown")
      }).pipe(Effect.scoped, Effect.provide(NodeSpawner.layer()), quiet),
    { timeout: 60_000 }
  )
})
