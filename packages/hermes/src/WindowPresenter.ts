/**
 * How the host shows the windows extensions open with `ui/openWindow`. Hermes' UI opens a browser window; the
 * headless presenter records the window, fetches its URL once when it is a loopback http URL (127.0.0.1, localhost,
 * [::1]) to prove the server behind it is up, never any other address, and closes it. Its fetches are bounded: a few
 * at a time, a timeout each, and a cap on the bytes read. (It was the module `Windows`, which
 * remains as a deprecated alias.)
 *
 * @since 0.1.0
 */
import type * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as HttpClient from "effect/http/HttpClient"
import type * as HttpClientError from "effect/http/HttpClientError"
import * as HttpClientResponse from "effect/http/HttpClientResponse"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"

/**
 * A window an extension asked for.
 *
 * @since 0.1.0
 * @category models
 */
export interface Window {
  readonly windowId: string
  readonly extension: string
  readonly url: string
  readonly title: string | undefined
}

/**
 * What showing a window did, for the host's events: the fetch of a loopback URL (`status` and `bytes`, or `error`),
 * or why the URL was not fetched (`skipped`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Presentation {
  readonly status?: number | undefined
  readonly bytes?: number | undefined
  readonly error?: string | undefined
  readonly skipped?: string | undefined
}

/**
 * The window presenter. `present` completes when the window is closed; the host then sends `window/closed`. The host
 * interrupts it when the extension stops.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { WindowPresenter } from "@lifeline/hermes"
 *
 * const program = Effect.gen(function*() {
 *   const windows = yield* WindowPresenter.WindowPresenter
 *   return yield* windows.present({ windowId: "w1", extension: "hl7", url: "https://example.com", title: undefined })
 * }).pipe(Effect.provide(WindowPresenter.layerRecordOnly)) // { skipped: "..." }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
// The key of its first name, `Windows`: the service stays one service whichever name a layer was built with.
export class WindowPresenter
  extends Context.Service<WindowPresenter, WindowPresenter.Service>()("@lifeline/hermes/Windows")
{}

/**
 * @since 0.1.0
 */
export declare namespace WindowPresenter {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    readonly present: (window: Window) => Effect.Effect<Presentation>
  }
}

const loopbackHosts = new Set(["127.0.0.1", "localhost", "[::1]"])

/**
 * Whether `url` is an `http:` URL on a loopback host: exactly `127.0.0.1`, `localhost` or `[::1]`, and without
 * credentials. Nothing else is ever fetched by the headless presenter.
 *
 * @example
 * ```ts
 * import { WindowPresenter } from "@lifeline/hermes"
 *
 * WindowPresenter.isLoopbackHttpUrl("http://127.0.0.1:8080/report") // true
 * WindowPresenter.isLoopbackHttpUrl("http://10.0.0.1/report") // false
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const isLoopbackHttpUrl = (url: string): boolean => {
  if (!URL.canParse(url)) return false
  const parsed = new URL(url)
  return parsed.protocol === "http:" && loopbackHosts.has(parsed.hostname) && parsed.username === "" &&
    parsed.password === ""
}

/**
 * How many fetches the headless presenter runs at once, across every extension it serves. The others wait for a
 * turn; each still gets its full `timeout` once it runs.
 *
 * @since 0.1.0
 * @category models
 */
export const DEFAULT_MAX_CONCURRENT_FETCHES = 8

/**
 * How many bytes of a response body the headless presenter reads, at most: it stops reading there.
 *
 * @since 0.1.0
 * @category models
 */
export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024

/**
 * The bounds of the headless presenter.
 *
 * @since 0.1.0
 * @category models
 */
export interface HeadlessOptions {
  /** For one fetch, from the request to the last byte read, not counting the wait for a turn. Default 2 seconds. */
  readonly timeout?: Duration.Input | undefined
  /** Fetches at once; the others wait. Default {@link DEFAULT_MAX_CONCURRENT_FETCHES} (8). */
  readonly maxConcurrentFetches?: number | undefined
  /** Bytes of a body read at most; reading stops there. Default {@link DEFAULT_MAX_RESPONSE_BYTES} (1 MiB). */
  readonly maxResponseBytes?: number | undefined
}

// The size of one read when the body is a byte stream: the last read asks for exactly what is left below the cap.
const readSize = 64 * 1024

/**
 * Reads at most `limit` bytes of a Web body and cancels the rest. A byte stream (what `fetch` answers on Node) is read
 * into views no larger than what is left below the limit, so not one byte past it is taken; any other stream hands
 * out chunks of its own size, and only the part below the limit is counted.
 */
const readWebBody = (body: ReadableStream<Uint8Array>, limit: number): Effect.Effect<number, Cause.UnknownError> =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      try {
        return body.getReader({ mode: "byob" })
      } catch {
        return body.getReader()
      }
    }),
    (reader) => {
      let bytes = 0
      let buffer = new ArrayBuffer(Math.min(readSize, limit))
      const read: Effect.Effect<number, Cause.UnknownError> = Effect.suspend(() => {
        if (bytes >= limit) return Effect.succeed(bytes)
        const next = reader instanceof ReadableStreamBYOBReader
          ? reader.read(new Uint8Array(buffer, 0, Math.min(buffer.byteLength, limit - bytes)))
          : reader.read()
        return Effect.flatMap(Effect.tryPromise(() => next), ({ done, value }) => {
          if (value !== undefined) {
            bytes = Math.min(limit, bytes + value.byteLength)
            // A BYOB read transfers the buffer it was given: the next read reuses the one it came back in.
            if (reader instanceof ReadableStreamBYOBReader) buffer = value.buffer as ArrayBuffer
          }
          return done ? Effect.succeed(bytes) : read
        })
      })
      return read
    },
    // Whatever was not read is never sent for: cancelling the body closes the connection.
    (reader) => Effect.promise(() => reader.cancel().catch(() => undefined))
  )

/**
 * A body that is not a Web stream (`NodeHttpClient`): its chunks come as the client reads them, so the one that
 * crosses the limit is read whole; only the part below the limit is counted, and nothing after it is read.
 */
const readStream = <E>(stream: Stream.Stream<Uint8Array, E>, limit: number): Effect.Effect<number, E> => {
  let bytes = 0
  return stream.pipe(
    Stream.runForEachWhile((chunk) =>
      Effect.sync(() => {
        bytes = Math.min(limit, bytes + chunk.length)
        return bytes < limit
      })
    ),
    Effect.map(() => bytes)
  )
}

const readAtMost = (
  response: HttpClientResponse.HttpClientResponse,
  limit: number
): Effect.Effect<number, Cause.UnknownError | HttpClientError.HttpClientError> => {
  if (limit <= 0) return Effect.succeed(0)
  return Option.match(HttpClientResponse.toWeb(response), {
    onNone: () => readStream(response.stream, limit),
    onSome: (web) => web.body === null ? Effect.succeed(0) : readWebBody(web.body, limit)
  })
}

/**
 * A headless presenter that fetches with `client`: one GET of a loopback URL, within `timeout`, redirects not followed
 * (they could lead anywhere), at most `maxResponseBytes` read (reading stops there), at most `maxConcurrentFetches`
 * at once (a `Semaphore` of this presenter, shared by every extension it serves); then the window is closed.
 * `bytes` in the presentation is what was read, never more than `maxResponseBytes`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeHeadless = (client: HttpClient.HttpClient, options?: HeadlessOptions): WindowPresenter.Service => {
  const timeout = Duration.fromInputUnsafe(options?.timeout ?? Duration.seconds(2))
  const maxBytes = Math.max(0, Math.floor(options?.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES))
  const fetches = Semaphore.makeUnsafe(
    Math.max(1, Math.floor(options?.maxConcurrentFetches ?? DEFAULT_MAX_CONCURRENT_FETCHES))
  )
  const fetchOnce = (url: string) =>
    client.get(url).pipe(
      Effect.flatMap((response) =>
        Effect.map(readAtMost(response, maxBytes), (bytes): Presentation => ({ status: response.status, bytes }))
      ),
      Effect.scoped,
      Effect.timeoutOrElse({
        duration: timeout,
        orElse: () => Effect.fail(`no answer within ${Duration.format(timeout)}`)
      }),
      Effect.catch((error) =>
        Effect.succeed<Presentation>({ error: typeof error === "string" ? error : error.message })
      ),
      Effect.provideService(FetchHttpClient.RequestInit, { redirect: "manual" })
    )
  return {
    present: (window) => {
      if (!isLoopbackHttpUrl(window.url)) {
        return Effect.succeed({ skipped: "not a loopback http URL: never fetched" })
      }
      return fetches.withPermit(fetchOnce(window.url))
    }
  }
}

/**
 * The headless presenter over the `HttpClient` in the context (`NodeHttpClient.layer` or `FetchHttpClient.layer`).
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { FetchHttpClient } from "effect/http"
 * import { WindowPresenter } from "@lifeline/hermes"
 *
 * const PresenterLive = WindowPresenter.layerHeadless.pipe(Layer.provide(FetchHttpClient.layer))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerHeadless: Layer.Layer<WindowPresenter, never, HttpClient.HttpClient> = Layer.effect(
  WindowPresenter,
  Effect.map(HttpClient.HttpClient, (client) => makeHeadless(client))
)

/**
 * A presenter that records windows and closes them at once without fetching anything.
 *
 * @example
 * ```ts
 * import { WindowPresenter } from "@lifeline/hermes"
 *
 * const PresenterTest = WindowPresenter.layerRecordOnly
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRecordOnly: Layer.Layer<WindowPresenter> = Layer.succeed(WindowPresenter, {
  present: () => Effect.succeed({ skipped: "headless: windows are recorded, not fetched" })
})
