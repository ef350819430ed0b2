/**
 * The host's bounds on what an extension can make it hold or do: the event history, open windows, and the size of
 * `editor/patchMessage`. Each over-the-bound request gets a typed error, nothing is applied, and the host keeps serving.
 */
import { assert, describe, it } from "@effect/vitest"
import { ExtensionHost, MessageStore, Spawner, WindowPresenter } from "@lifeline/hermes"
import { TestSpawner } from "@lifeline/hermes/testing"
import { Transport } from "@lifeline/kernel"
import { Deferred, Effect, Logger, Queue, Stream } from "effect"
import { eventually, makeRaw } from "./utils.js"

const sample = "MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|42|P|2.5\rPID|1||123||DOE^JOHN||19800101"
const spec: Spawner.Spec = { command: "flood" }
const options: ExtensionHost.Options = { dataDir: "/data", hermesVersion: "test", hostPid: 1 }

/** The extension's side, driven by the test: its own requests to the host, and what the host sends it. */
interface Client {
  /** Sends a request and answers the whole response message (`result` or `error`). */
  readonly call: (method: string, params?: unknown) => Effect.Effect<any>
  /** What the host sent after `initialized`. */
  readonly notifications: Queue.Queue<any>
  /** Sends anything, as it is. */
  readonly send: (message: unknown) => Effect.Effect<void>
  /** The host's answers with id `null` (to what it could not read). */
  readonly unreadable: Queue.Queue<any>
}

/** An extension that answers `initialize` and `shutdown`, and hands its side of the wire to the test. */
const client = (ready: Deferred.Deferred<Client>): TestSpawner.Behaviour =>
  Effect.scoped(Effect.gen(function*() {
    const raw = yield* makeRaw(yield* Transport.Transport)
    const initialize = yield* raw.next
    yield* raw.send({ jsonrpc: "2.0", id: initialize.id, result: { name: "flood", version: "1.0.0", commands: [] } })
    const pending = new Map<number, Deferred.Deferred<any>>()
    const notifications = yield* Queue.unbounded<any>()
    const unreadable = yield* Queue.unbounded<any>()
    let nextId = 0
    yield* Deferred.succeed(ready, {
      call: (method, params) =>
        Effect.gen(function*() {
          const id = ++nextId
          const answer = yield* Deferred.make<any>()
          pending.set(id, answer)
          yield* raw.send(
            params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params }
          )
          return yield* Deferred.await(answer)
        }).pipe(Effect.orDie),
      notifications,
      send: (message) => Effect.orDie(raw.send(message)),
      unreadable
    })
    for (;;) {
      const message = yield* raw.next
      if (message.method === "shutdown") {
        return yield* raw.send({ jsonrpc: "2.0", id: message.id, result: { success: true } })
      }
      if (message.method !== undefined) {
        if (message.method !== "initialized") yield* Queue.offer(notifications, message)
        continue
      }
      if (message.id === null) {
        yield* Queue.offer(unreadable, message)
        continue
      }
      const answer = pending.get(message.id)
      pending.delete(message.id)
      if (answer !== undefined) yield* Deferred.succeed(answer, message)
    }
  }))

/** Starts the host on a `client` extension; answers the extension, its client, and the store it edits. */
const startFlood = (
  limits: Partial<ExtensionHost.Options> = {},
  services: {
    readonly windows?: WindowPresenter.WindowPresenter.Service
    readonly store?: MessageStore.MessageStore.Service
  } = {}
) =>
  Effect.gen(function*() {
    const ready = yield* Deferred.make<Client>()
    const spawner = yield* TestSpawner.make(() => client(ready))
    const store = services.store ?? (yield* MessageStore.make(sample))
    const extension = yield* ExtensionHost.start(spec, { ...options, ...limits }).pipe(
      Effect.provideService(Spawner.Spawner, spawner),
      Effect.provideService(MessageStore.MessageStore, store),
      Effect.provideService(
        WindowPresenter.WindowPresenter,
        services.windows ?? { present: () => Effect.succeed({ skipped: "test" }) }
      )
    )
    assert.strictEqual(yield* extension.status, "Ready")
    return { extension, client: yield* Deferred.await(ready), store }
  })

/** Records the host's logs (message and level) while `self` runs. */
const captureLogs = <A, E, R>(self: (logs: Array<string>) => Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    const logs: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      logs.push(`${logLevel} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
    })
    return self(logs).pipe(Effect.provide(Logger.layer([logger], { mergeWithExisting: true })))
  })

const getMessage = (client: Client) =>
  Effect.map(client.call("editor/getMessage", { format: "raw" }), (response) => {
    assert.strictEqual(response.result?.message, sample)
  })

describe("ExtensionHost limits", () => {
  describe("event history", () => {
    it.effect("keeps the latest historyLimit events and counts the ones it dropped", () =>
      Effect.gen(function*() {
        // The same life twice: once kept whole, once in a history of 5.
        const lives: Array<{ history: ReadonlyArray<ExtensionHost.Event>; dropped: number }> = []
        for (const historyLimit of [1000, 5]) {
          yield* Effect.gen(function*() {
            const { client, extension } = yield* startFlood({ historyLimit })
            for (let i = 0; i < 20; i++) yield* getMessage(client)
            lives.push({ history: yield* extension.history, dropped: yield* extension.droppedEvents })
          }).pipe(Effect.scoped)
        }
        const [whole, latest] = lives
        assert.strictEqual(whole.dropped, 0)
        assert.isAbove(whole.history.length, 20)
        assert.strictEqual(latest.history.length, 5)
        assert.strictEqual(latest.dropped, whole.history.length - 5)
        assert.deepStrictEqual(latest.history, whole.history.slice(-5))
      }))

    it.effect("events replays the retained tail to a late subscriber, then follows live", () =>
      Effect.gen(function*() {
        const { client, extension } = yield* startFlood({ historyLimit: 4 })
        for (let i = 0; i < 10; i++) yield* getMessage(client)
        const tail = yield* extension.history
        assert.strictEqual(tail.length, 4)
        const received = yield* Queue.unbounded<ExtensionHost.Event>()
        yield* extension.events.pipe(Stream.runForEach((event) => Queue.offer(received, event)), Effect.forkScoped)
        yield* eventually(Effect.map(Queue.size(received), (n) => n === 4), "the retained tail is replayed")
        assert.deepStrictEqual(yield* Queue.takeAll(received), tail)
        yield* getMessage(client)
        yield* eventually(Effect.map(Queue.size(received), (n) => n === 1), "the live event arrives")
        const live = yield* Queue.takeAll(received)
        assert.strictEqual(live[0]._tag, "RequestServed")
        assert.deepStrictEqual(live, (yield* extension.history).slice(-1))
        // Nothing in between was lost or repeated: the history moved by one and the subscriber saw that one.
        assert.deepStrictEqual((yield* extension.history).slice(0, 3), tail.slice(1))
      }).pipe(Effect.scoped))

    it.effect("a subscriber that falls behind skips what left the history, and a warning says how many", () =>
      captureLogs((logs) =>
        Effect.gen(function*() {
          const { client, extension } = yield* startFlood({ historyLimit: 3 })
          const pull = yield* Stream.toPull(extension.events)
          const first = yield* pull
          assert.deepStrictEqual(first, yield* extension.history)
          const droppedBefore = yield* extension.droppedEvents
          for (let i = 0; i < 10; i++) yield* getMessage(client)
          const next = yield* pull
          assert.deepStrictEqual(next, yield* extension.history)
          // 10 events happened; the subscriber gets the 3 still held and is told of the 7 it missed.
          assert.strictEqual((yield* extension.droppedEvents) - droppedBefore, 10)
          assert.isTrue(logs.some((line) => line.startsWith("Warn") && line.includes("7 event(s) left the history")))
          assert.isTrue(logs.some((line) => line.startsWith("Info") && line.includes("the event history is full")))
        }).pipe(Effect.scoped)
      ))

    it.effect("text the extension controls is cut in events, saying how much", () =>
      Effect.gen(function*() {
        const { client, extension } = yield* startFlood({ maxEventTextLength: 50 })
        const title = "T".repeat(5000)
        const opened = yield* client.call("ui/openWindow", { url: `http://127.0.0.1:9/${"u".repeat(500)}`, title })
        assert.strictEqual(opened.result.windowId, "window-1")
        yield* client.call("editor/patchMessage", { patches: [{ path: `PID${"5".repeat(3000)}`, value: "x" }] })
        const history = yield* extension.history
        const window = history.find((e) => e._tag === "WindowOpened")
        assert.isTrue(window?._tag === "WindowOpened")
        if (window?._tag === "WindowOpened") {
          assert.strictEqual(window.title, `${"T".repeat(50)}… (4950 more characters)`)
          assert.strictEqual(window.url, `http://127.0.0.1:9/${"u".repeat(31)}… (469 more characters)`)
        }
        const refused = history.find((e) => e._tag === "RequestServed" && !e.ok)
        assert.isTrue(refused?._tag === "RequestServed" && refused.detail!.length < 100)
        assert.match(
          refused?._tag === "RequestServed" ? refused.detail! : "",
          /^-32602 Invalid params: .*more characters\)$/
        )
      }).pipe(Effect.scoped))
  })

  describe("frames (wireLimits)", () => {
    it.effect("a batch over wireLimits.maxBatchItems or a body over maxDepth: one -32600 with id null; the host serves on", () =>
      Effect.gen(function*() {
        const { client } = yield* startFlood({ wireLimits: { maxBatchItems: 2, maxDepth: 4 } })
        const request = (id: number) => ({ jsonrpc: "2.0", id: 1000 + id, method: "editor/getMessage" })
        yield* client.send([request(1), request(2), request(3)])
        assert.deepStrictEqual(yield* Queue.take(client.unreadable), {
          jsonrpc: "2.0",
          id: null,
          error: { code: -32600, message: "Invalid Request", data: "A batch of more than 2 messages (maxBatchItems)" }
        })
        yield* client.send({ jsonrpc: "2.0", id: 1004, method: "editor/getMessage", params: { format: [[[["raw"]]]] } })
        assert.strictEqual((yield* Queue.take(client.unreadable)).error.data, "Nested deeper than 4 levels (maxDepth)")
        yield* getMessage(client)
        assert.strictEqual(yield* Queue.size(client.unreadable), 0)
      }))
  })

  describe("editor/setMessage", () => {
    it.effect("over maxMessageBytes or maxSegments: -32602 with { reason, limit, actual }; nothing changed", () =>
      Effect.gen(function*() {
        const store = yield* MessageStore.make(sample, { maxMessageBytes: 100, maxSegments: 3 })
        const { client, extension } = yield* startFlood({}, { store })
        const set = (message: string) => client.call("editor/setMessage", { message })
        // "é" is 2 bytes of UTF-8: 23 of them after the sample's 77 ASCII bytes and a segment of 5 are 128 bytes.
        const long = `${sample}\rZZ1|${"é".repeat(23)}`
        assert.deepStrictEqual((yield* set(long)).error, {
          code: -32602,
          message: "Invalid params",
          data: { reason: "MessageTooLarge", limit: 100, actual: 128 }
        })
        assert.deepStrictEqual((yield* set(`${sample}\rOBX|1\rOBX|2`)).error, {
          code: -32602,
          message: "Invalid params",
          data: { reason: "TooManySegments", limit: 3, actual: 4 }
        })
        // Text that is not HL7 is answered as before, with the reason and its detail.
        const notHl7 = yield* set("hello")
        assert.strictEqual(notHl7.error.code, -32602)
        assert.deepStrictEqual(Object.keys(notHl7.error.data), ["reason", "detail"])
        assert.strictEqual(notHl7.error.data.reason, "NotHl7")
        assert.strictEqual(yield* store.current, sample)
        // Within both bounds: kept.
        assert.deepStrictEqual((yield* set(`${sample}\rOBX|1`)).result, { success: true })
        assert.strictEqual(yield* store.current, `${sample}\rOBX|1`)
        const served = (yield* extension.history).filter((e) => e._tag === "RequestServed")
        assert.deepStrictEqual(served.map((e) => e._tag === "RequestServed" && e.ok), [false, false, false, true])
      }).pipe(Effect.scoped))
  })

  describe("windows", () => {
    it.effect("ui/openWindow over maxOpenWindows gets -32803 TooManyWindows; a closed window frees its slot", () =>
      Effect.gen(function*() {
        const gate = yield* Deferred.make<void>()
        let presented = 0
        const { client, extension } = yield* startFlood({ maxOpenWindows: 2 }, {
          windows: {
            present: () =>
              Effect.suspend(() => {
                presented++
                return Effect.as(Deferred.await(gate), { skipped: "test" })
              })
          }
        })
        const answers = yield* Effect.forEach(
          Array.from({ length: 5 }, (_, i) => i),
          (i) => client.call("ui/openWindow", { url: `http://127.0.0.1:9/${i}` })
        )
        const opened = answers.filter((a) => a.result !== undefined)
        const refused = answers.filter((a) => a.error !== undefined)
        assert.deepStrictEqual(opened.map((a) => a.result.windowId), ["window-1", "window-2"])
        assert.strictEqual(refused.length, 3)
        for (const answer of refused) {
          assert.deepStrictEqual(answer.error, {
            code: ExtensionHost.REQUEST_FAILED,
            message: "Too many open windows",
            data: { reason: "TooManyWindows", limit: 2, actual: 2 }
          })
        }
        assert.strictEqual(ExtensionHost.REQUEST_FAILED, -32803)
        // The refusals are recorded, not silent, and the host keeps serving.
        const served = (yield* extension.history).filter((e) => e._tag === "RequestServed")
        assert.deepStrictEqual(served.map((e) => e._tag === "RequestServed" && e.ok), [
          true,
          true,
          false,
          false,
          false
        ])
        yield* getMessage(client)
        yield* eventually(Effect.sync(() => presented === 2), "both windows are being shown")
        // The windows close: their slots are free again.
        yield* Deferred.succeed(gate, void 0)
        const closed = [yield* Queue.take(client.notifications), yield* Queue.take(client.notifications)]
        assert.deepStrictEqual(closed.map((n) => n.method), ["window/closed", "window/closed"])
        const again = yield* client.call("ui/openWindow", { url: "http://127.0.0.1:9/again" })
        assert.strictEqual(again.result?.windowId, "window-3")
      }).pipe(Effect.scoped))

    it.effect("a flood of ui/openWindow holds at most maxOpenWindows (default 64) windows", () =>
      Effect.gen(function*() {
        const gate = yield* Deferred.make<void>()
        const { client, extension } = yield* startFlood({}, {
          windows: { present: () => Effect.as(Deferred.await(gate), { skipped: "test" }) }
        })
        const answers = yield* Effect.forEach(
          Array.from({ length: 500 }, (_, i) => i),
          (i) => client.call("ui/openWindow", { url: `http://127.0.0.1:9/${i}` }),
          { concurrency: 50 }
        )
        assert.strictEqual(answers.filter((a) => a.result !== undefined).length, 64)
        assert.strictEqual(answers.filter((a) => a.error?.data?.reason === "TooManyWindows").length, 436)
        assert.strictEqual((yield* extension.history).filter((e) => e._tag === "WindowOpened").length, 64)
        yield* Deferred.succeed(gate, void 0)
      }).pipe(Effect.scoped))
  })

  describe("editor/patchMessage", () => {
    /** A store that counts the patch requests that reach it. */
    const countingStore = Effect.gen(function*() {
      const inner = yield* MessageStore.make(sample)
      const calls = { count: 0 }
      const store: MessageStore.MessageStore.Service = {
        ...inner,
        patch: (patches) =>
          Effect.suspend(() => {
            calls.count++
            return inner.patch(patches)
          })
      }
      return { store, calls }
    })

    it.effect("too many patches, a value too large, or too many bytes in all: -32602, nothing applied", () =>
      Effect.gen(function*() {
        const { calls, store } = yield* countingStore
        const { client, extension } = yield* startFlood(
          { maxPatches: 3, maxPatchValueBytes: 10, maxPatchRequestBytes: 40 },
          { store }
        )
        const patch = (value: string, path = "PID-5.1") => ({ path, value })
        const refused = [
          [[patch("a"), patch("b"), patch("c"), patch("d")], { reason: "TooManyPatches", limit: 3, actual: 4 }],
          // "é" is 2 bytes in UTF-8: 6 of them are 12 bytes, over 10 although only 6 characters.
          [[patch("ok"), patch("éééééé")], { reason: "ValueTooLarge", index: 1, limit: 10, actual: 12 }],
          // A surrogate pair is 4 bytes.
          [[patch("😀😀😀")], { reason: "ValueTooLarge", index: 0, limit: 10, actual: 12 }],
          // Paths count too: 3 × (7 + 8) = 45 bytes.
          [[patch("12345678"), patch("12345678"), patch("12345678")], {
            reason: "PatchesTooLarge",
            limit: 40,
            actual: 45
          }]
        ] as const
        for (const [patches, data] of refused) {
          const answer = yield* client.call("editor/patchMessage", { patches })
          assert.deepStrictEqual(answer.error, { code: -32602, message: "Invalid params", data })
        }
        assert.strictEqual(calls.count, 0)
        assert.strictEqual(yield* store.current, sample)
        // At the bounds exactly, and with nulls (0 bytes): applied.
        const answer = yield* client.call("editor/patchMessage", {
          patches: [patch("0123456789"), patch("ééééé", "PID-5.2"), { path: "PID-7", value: null }]
        })
        assert.deepStrictEqual(answer.result, { applied: 3 })
        assert.include(yield* store.current, "0123456789^ééééé")
        const served = (yield* extension.history).filter((e) => e._tag === "RequestServed")
        assert.deepStrictEqual(served.map((e) => e._tag === "RequestServed" && e.ok), [
          false,
          false,
          false,
          false,
          true
        ])
      }).pipe(Effect.scoped))

    it.effect("a batch that would grow the message over maxMessageBytes: -32602 MessageTooLarge at the patch that crosses", () =>
      Effect.gen(function*() {
        const store = yield* MessageStore.make(sample)
        const { client, extension } = yield* startFlood({}, { store })
        // The request, within every bound of the host: 1,000 paths, 47 KB of JSON. Each patch pads 9,998
        // repetitions, components and subcomponents and writes "x": 29,995 bytes on the 7 fields PID has, 29,996 (a
        // field delimiter more) on each field after. It used to grow the message to 30 M characters.
        const patches = Array.from({ length: 1000 }, (_, i) => ({ path: `PID-${i + 1}[9999].9999.9999`, value: "x" }))
        assert.isBelow(JSON.stringify(patches).length, 48_000)
        const limit = MessageStore.DEFAULT_MAX_MESSAGE_BYTES
        let actual = sample.length
        let index = 0
        for (; actual <= limit; index++) actual += index < 7 ? 29_995 : 29_996
        index--
        assert.deepStrictEqual([index, actual], [139, 4_199_510])
        const answer = yield* client.call("editor/patchMessage", { patches })
        assert.deepStrictEqual(answer.error, {
          code: -32602,
          message: "Invalid params",
          data: { index, reason: "MessageTooLarge", limit, actual }
        })
        assert.strictEqual(yield* store.current, sample)
        // Recorded as refused, and the host keeps serving.
        const served = (yield* extension.history).filter((e) => e._tag === "RequestServed")
        assert.deepStrictEqual(served.map((e) => e._tag === "RequestServed" && [e.method, e.ok]), [
          ["editor/patchMessage", false]
        ])
        assert.deepStrictEqual(
          (yield* client.call("editor/patchMessage", { patches: [{ path: "PID-5.1", value: "ANON" }] })).result,
          { applied: 1 }
        )
        // Under a bound of the store's own: 6 bytes more, then 14 (PID-8 to PID-20), over sample + 10 at patch 1.
        const small = yield* MessageStore.make(sample, { maxMessageBytes: sample.length + 10 })
        const second = yield* startFlood({}, { store: small })
        const refused = yield* second.client.call("editor/patchMessage", {
          patches: [{ path: "PID-5.1", value: "ANONYMOUS" }, { path: "PID-20", value: "x" }, {
            path: "PID5",
            value: ""
          }]
        })
        assert.deepStrictEqual(refused.error.data, {
          index: 1,
          reason: "MessageTooLarge",
          limit: sample.length + 10,
          actual: sample.length + 6 + 14
        })
        assert.strictEqual(yield* small.current, sample)
      }).pipe(Effect.scoped))

    it.effect("the defaults refuse the flood of the issue at once: 50,000 patches, a 2 MB value", () =>
      Effect.gen(function*() {
        const { calls, store } = yield* countingStore
        const { client } = yield* startFlood({}, { store })
        const many = Array.from({ length: 50_000 }, (_, i) => ({ path: `PID-${(i % 30) + 1}`, value: "x" }))
        const tooMany = yield* client.call("editor/patchMessage", { patches: many })
        assert.deepStrictEqual(tooMany.error.data, { reason: "TooManyPatches", limit: 1000, actual: 50_000 })
        const big = yield* client.call("editor/patchMessage", {
          patches: [{ path: "PID-5.1", value: "x".repeat(2 * 1024 * 1024) }]
        })
        assert.deepStrictEqual(big.error.data, {
          reason: "ValueTooLarge",
          index: 0,
          limit: 64 * 1024,
          actual: 2 * 1024 * 1024
        })
        // 17 values of 64 KiB: each within its bound, over 1 MiB in all (with the paths PID-1 … PID-17).
        const heavy = Array.from({ length: 17 }, (_, i) => ({ path: `PID-${i + 1}`, value: "x".repeat(64 * 1024) }))
        const tooLarge = yield* client.call("editor/patchMessage", { patches: heavy })
        assert.deepStrictEqual(tooLarge.error.data, {
          reason: "PatchesTooLarge",
          limit: 1024 * 1024,
          actual: 17 * 64 * 1024 + 9 * "PID-1".length + 8 * "PID-10".length
        })
        assert.strictEqual(calls.count, 0)
        assert.deepStrictEqual((yield* client.call("editor/patchMessage", { patches: many.slice(0, 1000) })).result, {
          applied: 1000
        })
        assert.deepStrictEqual(ExtensionHost.defaultLimits, {
          historyLimit: 10_000,
          maxEventTextLength: 1024,
          maxOpenWindows: 64,
          maxPatches: 1000,
          maxPatchValueBytes: 65_536,
          maxPatchRequestBytes: 1_048_576
        })
      }).pipe(Effect.scoped))
  })
})
