import { assert, describe, it } from "@effect/vitest"
import { Windows } from "@lifeline/hermes"
import { Effect } from "effect"
import { HttpClient, HttpClientResponse } from "effect/http"

const window = (url: string): Windows.Window => ({ windowId: "w1", extension: "test", url, title: undefined })

describe("Windows", () => {
  it("only http URLs on 127.0.0.1, localhost or [::1] are loopback", () => {
    for (const url of ["http://127.0.0.1:8080/report", "http://localhost/x", "http://[::1]:9/"]) {
      assert.isTrue(Windows.isLoopbackHttpUrl(url), url)
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
      assert.isFalse(Windows.isLoopbackHttpUrl(url), url)
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
      const presenter = Windows.makeHeadless(client)
      const shown = yield* presenter.present(window("http://127.0.0.1:4000/report"))
      assert.deepStrictEqual(shown, { status: 200, bytes: 19 })
      const skipped = yield* presenter.present(window("http://203.0.113.7/report"))
      assert.isString(skipped.skipped)
      assert.deepStrictEqual(fetched, ["http://127.0.0.1:4000/report"])
    }))
})
