/**
 * How the host shows the windows extensions open with `ui/openWindow`. Hermes' UI opens a browser window; the
 * headless presenter records the window, fetches its URL once when it is a loopback http URL (127.0.0.1, localhost,
 * [::1]) to prove the server behind it is up, never any other address, and closes it.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as HttpClient from "effect/http/HttpClient"
import * as Layer from "effect/Layer"
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
 * import { Windows } from "@lifeline/hermes"
 *
 * const program = Effect.gen(function*() {
 *   const windows = yield* Windows.Windows
 *   return yield* windows.present({ windowId: "w1", extension: "hl7", url: "https://example.com", title: undefined })
 * }).pipe(Effect.provide(Windows.layerRecordOnly)) // { skipped: "..." }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class Windows extends Context.Service<Windows, Windows.Service>()("@lifeline/hermes/Windows") {}

/**
 * @since 0.1.0
 */
export declare namespace Windows {
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
 * import { Windows } from "@lifeline/hermes"
 *
 * Windows.isLoopbackHttpUrl("http://127.0.0.1:8080/report") // true
 * Windows.isLoopbackHttpUrl("http://10.0.0.1/report") // false
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

const maxBytes = 1024 * 1024

/**
 * A headless presenter that fetches with `client`: one GET of a loopback URL, within `timeout`, redirects not followed
 * (they could lead anywhere), at most 1 MiB read; then the window is closed.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeHeadless = (
  client: HttpClient.HttpClient,
  options?: { readonly timeout?: Duration.Input | undefined }
): Windows.Service => {
  const timeout = Duration.fromInputUnsafe(options?.timeout ?? Duration.seconds(2))
  return {
    present: (window) => {
      if (!isLoopbackHttpUrl(window.url)) {
        return Effect.succeed({ skipped: "not a loopback http URL: never fetched" })
      }
      return client.get(window.url).pipe(
        Effect.flatMap((response) => {
          let bytes = 0
          return response.stream.pipe(
            Stream.runForEachWhile((chunk) =>
              Effect.sync(() => {
                bytes += chunk.length
                return bytes < maxBytes
              })
            ),
            Effect.map((): Presentation => ({ status: response.status, bytes }))
          )
        }),
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
 * import { Windows } from "@lifeline/hermes"
 *
 * const WindowsLive = Windows.layerHeadless.pipe(Layer.provide(FetchHttpClient.layer))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerHeadless: Layer.Layer<Windows, never, HttpClient.HttpClient> = Layer.effect(
  Windows,
  Effect.map(HttpClient.HttpClient, (client) => makeHeadless(client))
)

/**
 * A presenter that records windows and closes them at once without fetching anything.
 *
 * @example
 * ```ts
 * import { Windows } from "@lifeline/hermes"
 *
 * const WindowsTest = Windows.layerRecordOnly
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRecordOnly: Layer.Layer<Windows> = Layer.succeed(Windows, {
  present: () => Effect.succeed({ skipped: "headless: windows are recorded, not fetched" })
})
