import { assert, describe, it } from "@effect/vitest"
import { WindowPresenter } from "@lifeline/hermes"
import { Deferred, Effect, Fiber } from "effect"
import { HttpClient, HttpClientResponse } from "effect/http"
import { TestClock } from "effect/testing"

const window = (url: string): WindowPresenter.Window => ({ windowId: "w1", extension: "test", url, title: undefined })

describe("WindowPresenter", () => {
  it("only http URLs on 127.0.0.1, localhost or [::1] are loopback", () => {
    for (const url of ["http://127.0.0.1:8080/report", "http://localhost/x", "http://[::1]:9/"]) {
      assert.isTrue(WindowPresenter.isLoopbackHttpUrl(url), url)
    }
    for (
      const url of [
        "https://127.0.0.1/",
        "http://127.0.0.2/",
        "http://10.0.0.1/",
        "http://192.168.1.1/",
        "http://example.com/",
        "http://localhost.example.com/",
        "http://user:secret@127.0.0.1/",
        "file:///etc/passwd",
        "not a url"
      ]
    ) {
      assert.isFalse(WindowPresenter.isLoopbackHttpUrl(url), url)
    }
  })

  it.effect("the headless presenter fetches a loopback URL once and never any other address", () =>
    Effect.gen(function*() {
      const fetched: Array<string> = []
      const client = HttpClient.make((request) =>
        Effect.sync(() => {
          fetched.push(request.url)
          return HttpClientResponse.fromWeb(request, new Response("<html>report</html>", { status: 200 }))
        })
      )
      const presenter = WindowPresenter.makeHeadless(client)
      const shown = yield* presenter.present(window("http://127.0.0.1:4000/report"))
      assert.deepStrictEqual(shown, { status: 200, bytes: 19 })
      const skipped = yield* presenter.present(window("http://203.0.113.7/report"))
      assert.isString(skipped.skipped)
      assert.deepStrictEqual(fetched, ["http://127.0.0.1:4000/report"])
    }))
})

/** A client whose every GET answers `body()` with status 200. */
const answering = (body: () => ReadableStream<Uint8Array>) =>
  HttpClient.make((request) =>
    Effect.sync(() => HttpClientResponse.fromWeb(request, new Response(body(), { status: 200 })))
  )

/** An endless body, as a byte stream (what `fetch` answers on Node) or a plain one, counting what it handed out. */
const endless = (kind: "bytes" | "default", chunk = 64 * 1024) => {
  const source = { served: 0, cancelled: false }
  const stream = (): ReadableStream<Uint8Array> =>
    kind === "bytes"
      ? new ReadableStream({
        type: "bytes",
        pull: (controller) => {
          const view = controller.byobRequest?.view
          if (view) {
            // Exactly what the reader asked for, never more.
            source.served += view.byteLength
            controller.byobRequest!.respond(view.byteLength)
          } else {
            source.served += chunk
            controller.enqueue(new Uint8Array(chunk))
          }
        },
        cancel: () => {
          source.cancelled = true
        }
      })
      : new ReadableStream({
        pull: (controller) => {
          source.served += chunk
          controller.enqueue(new Uint8Array(chunk))
        },
        cancel: () => {
          source.cancelled = true
        }
      })
  return { source, stream }
}

describe("WindowPresenter: the headless presenter's bounds", () => {
  it.effect("reads a byte-stream body up to exactly maxResponseBytes (default 1 MiB), not one byte past, and cancels it", () =>
    Effect.gen(function*() {
      const { source, stream } = endless("bytes")
      const shown = yield* WindowPresenter.makeHeadless(answering(stream)).present(window("http://127.0.0.1:4000/"))
      assert.deepStrictEqual(shown, { status: 200, bytes: 1024 * 1024 })
      assert.strictEqual(source.served, 1024 * 1024)
      assert.isTrue(source.cancelled)
      assert.strictEqual(WindowPresenter.DEFAULT_MAX_RESPONSE_BYTES, 1024 * 1024)
    }))

  it.effect("with a cap that is not a multiple of the read size, the last read asks for what is left", () =>
    Effect.gen(function*() {
      const { source, stream } = endless("bytes")
      const presenter = WindowPresenter.makeHeadless(answering(stream), { maxResponseBytes: 100_001 })
      assert.deepStrictEqual(yield* presenter.present(window("http://127.0.0.1:4000/")), {
        status: 200,
        bytes: 100_001
      })
      assert.strictEqual(source.served, 100_001)
    }))

  it.effect("a plain stream's chunks are counted up to the cap only, and the body is cancelled there", () =>
    Effect.gen(function*() {
      const { source, stream } = endless("default", 64 * 1024 + 1)
      const presenter = WindowPresenter.makeHeadless(answering(stream), { maxResponseBytes: 200_000 })
      assert.deepStrictEqual(yield* presenter.present(window("http://127.0.0.1:4000/")), {
        status: 200,
        bytes: 200_000
      })
      assert.isTrue(source.cancelled)
      // The chunk that crosses the cap is read whole (a plain stream cannot be asked for less); none after it.
      assert.isAtMost(source.served, 4 * (64 * 1024 + 1) + 64 * 1024 + 1)
    }))

  it.effect("maxResponseBytes 0: the window is fetched for its status, the body not read", () =>
    Effect.gen(function*() {
      const { source, stream } = endless("bytes")
      const presenter = WindowPresenter.makeHeadless(answering(stream), { maxResponseBytes: 0 })
      assert.deepStrictEqual(yield* presenter.present(window("http://127.0.0.1:4000/")), { status: 200, bytes: 0 })
      assert.strictEqual(source.served, 0)
    }))

  it.effect("at most maxConcurrentFetches fetches at once (default 8); the others wait for a turn", () =>
    Effect.gen(function*() {
      for (const [limit, expected] of [[undefined, 8], [3, 3]] as const) {
        const gate = yield* Deferred.make<void>()
        let inFlight = 0
        let most = 0
        const client = HttpClient.make((request) =>
          Effect.gen(function*() {
            inFlight++
            most = Math.max(most, inFlight)
            yield* Deferred.await(gate)
            inFlight--
            return HttpClientResponse.fromWeb(request, new Response("ok", { status: 200 }))
          })
        )
        const presenter = WindowPresenter.makeHeadless(client, { maxConcurrentFetches: limit })
        const all = yield* Effect.forEach(
          Array.from({ length: 20 }, (_, i) => window(`http://127.0.0.1:4000/${i}`)),
          presenter.present,
          { concurrency: "unbounded" }
        ).pipe(Effect.forkChild)
        for (let i = 0; i < 100; i++) yield* Effect.yieldNow
        assert.strictEqual(inFlight, expected)
        yield* Deferred.succeed(gate, void 0)
        const shown = yield* Fiber.join(all)
        assert.deepStrictEqual(shown.map((s) => s.status), Array.from({ length: 20 }, () => 200))
        assert.strictEqual(most, expected)
      }
      assert.strictEqual(WindowPresenter.DEFAULT_MAX_CONCURRENT_FETCHES, 8)
    }))

  it.effect("the timeout bounds each fetch from its turn, not the wait for it", () =>
    Effect.gen(function*() {
      // Each fetch takes 1.5 s of a 2 s timeout; one at a time, the second finishes at 3 s and is still on time.
      const client = HttpClient.make((request) =>
        Effect.as(Effect.sleep("1500 millis"), HttpClientResponse.fromWeb(request, new Response("ok", { status: 200 })))
      )
      const presenter = WindowPresenter.makeHeadless(client, { maxConcurrentFetches: 1 })
      const both = yield* Effect.forEach(
        [window("http://127.0.0.1:4000/a"), window("http://127.0.0.1:4000/b")],
        presenter.present,
        { concurrency: "unbounded" }
      ).pipe(Effect.forkChild)
      for (let i = 0; i < 6; i++) {
        for (let j = 0; j < 20; j++) yield* Effect.yieldNow
        yield* TestClock.adjust("500 millis")
      }
      assert.deepStrictEqual(yield* Fiber.join(both), [{ status: 200, bytes: 2 }, { status: 200, bytes: 2 }])
      // A fetch slower than the timeout is reported as such.
      const slow = HttpClient.make((request) =>
        Effect.as(Effect.sleep("3 seconds"), HttpClientResponse.fromWeb(request, new Response("ok", { status: 200 })))
      )
      const late = yield* WindowPresenter.makeHeadless(slow).present(window("http://127.0.0.1:4000/")).pipe(
        Effect.forkChild
      )
      for (let j = 0; j < 20; j++) yield* Effect.yieldNow
      yield* TestClock.adjust("2 seconds")
      assert.deepStrictEqual(yield* Fiber.join(late), { error: "no answer within 2s" })
    }))
})
