import { assert, describe, it } from "@effect/vitest"
import {
  Editor,
  Extension,
  ExtensionHost,
  HermesProtocol,
  MessageStore,
  Spawner,
  WindowPresenter
} from "@lifeline/hermes"
import { TestSpawner } from "@lifeline/hermes/testing"
import { Transport } from "@lifeline/kernel"
import { TestTransport } from "@lifeline/testing"
import { ConfigProvider, Effect, Option, Ref } from "effect"
import { eventually, makeMemoryFs, makeRaw } from "./utils.js"

const sample = "MSH|^~\\&|LAB|HOSP|||20240101||ADT^A01|42|P|2.5\rPID|1||123||DOE^JOHN||19800101"
const spec: Spawner.Spec = { command: "greeter", args: ["--style", "plain"], env: { GREETER_MODE: "quiet" } }
const options: ExtensionHost.Options = {
  dataDir: "/data",
  hermesVersion: "test",
  hostPid: 1,
  settings: { greeting: "HELLO" }
}

/**
 * An SDK extension whose command writes what it was started with into PID-5.1: its `settings.greeting`, the
 * environment's GREETER_MODE and its arguments (which a real process reads from its command line).
 */
const greeter = (started: Spawner.Spec, reasons: Ref.Ref<Array<string>>) =>
  Extension.run(Extension.make({
    name: "greeter",
    version: "1.0.0",
    commands: {
      "greeter.greet": {
        title: "Greet",
        run: ({ settings }) =>
          Editor.patchMessage([{
            path: "PID-5.1",
            value: `${String(settings.greeting ?? "none")}-${started.env?.GREETER_MODE}-${
              (started.args ?? []).join("_")
            }`
          }])
      }
    }
  })).pipe(
    Effect.tap((outcome) => Ref.update(reasons, (r) => [...r, String(outcome.reason)])),
    Effect.provide(makeMemoryFs().layer)
  )

const provide =
  (spawner: TestSpawner.TestSpawner, store: MessageStore.MessageStore.Service) =>
  <A, E, R>(self: Effect.Effect<A, E, R>) =>
    self.pipe(
      Effect.provideService(Spawner.Spawner, spawner),
      Effect.provideService(MessageStore.MessageStore, store),
      Effect.provideService(WindowPresenter.WindowPresenter, { present: () => Effect.succeed({ skipped: "test" }) })
    )

const greeted = (store: MessageStore.MessageStore.Service, value: string) =>
  eventually(Effect.map(store.current, (m) => m.includes(`||${value}^JOHN`)), `PID-5.1 is ${value}`)

describe("ExtensionHost settings", () => {
  it.effect("reloadWith: shut down with reason reload, restarted with the new arguments, environment and settings", () =>
    Effect.gen(function*() {
      const reasons = yield* Ref.make<Array<string>>([])
      const spawner = yield* TestSpawner.make((started) => greeter(started, reasons))
      const store = yield* MessageStore.make(sample)
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        yield* extension.execute("greeter.greet")
        yield* greeted(store, "HELLO-quiet---style_plain")
        const status = yield* extension.reloadWith({
          args: ["--style", "fancy"],
          env: { GREETER_MODE: "loud" },
          settings: { greeting: "BONJOUR" }
        })
        assert.strictEqual(status, "Ready")
        yield* extension.execute("greeter.greet")
        yield* greeted(store, "BONJOUR-loud---style_fancy")
        assert.deepStrictEqual(yield* Ref.get(reasons), ["reload"])
        const spawned = yield* spawner.spawned
        assert.deepStrictEqual(spawned.map((s) => [s.args, s.env]), [
          [["--style", "plain"], { GREETER_MODE: "quiet", [HermesProtocol.DATA_DIR_VARIABLE]: "/data" }],
          [["--style", "fancy"], { GREETER_MODE: "loud", [HermesProtocol.DATA_DIR_VARIABLE]: "/data" }]
        ])
        assert.deepStrictEqual(extension.spec, {
          command: "greeter",
          args: ["--style", "fancy"],
          env: { GREETER_MODE: "loud" }
        })
        // What is left out is kept: only the settings change.
        yield* extension.reloadWith({ settings: { greeting: "HOLA" } })
        yield* extension.execute("greeter.greet")
        yield* greeted(store, "HOLA-loud---style_fancy")
        // A plain reload keeps them all.
        yield* extension.reload
        yield* extension.execute("greeter.greet")
        yield* greeted(store, "HOLA-loud---style_fancy")
        assert.strictEqual((yield* spawner.spawned).length, 4)
      }).pipe(Effect.scoped, provide(spawner, store))
    }))

  it.effect("an extension that ignores settings keeps working; one started without any has none in initialize", () =>
    Effect.gen(function*() {
      const received = yield* Ref.make<Array<unknown>>([])
      const spawner = yield* TestSpawner.make(() =>
        Effect.scoped(Effect.flatMap(Transport.Transport, (transport) =>
          Effect.gen(function*() {
            const raw = yield* makeRaw(transport)
            const init = yield* raw.next
            yield* Ref.update(received, (r) => [...r, init.params])
            yield* raw.send({ jsonrpc: "2.0", id: init.id, result: { name: "old", version: "0.1.0", commands: [] } })
            for (;;) {
              const message = yield* raw.next
              if (message.method === "shutdown") {
                return yield* raw.send({ jsonrpc: "2.0", id: message.id, result: { success: true } })
              }
            }
          })))
      )
      const store = yield* MessageStore.make(sample)
      yield* Effect.gen(function*() {
        const { settings: _, ...without } = options
        const extension = yield* ExtensionHost.start(spec, without)
        assert.strictEqual(yield* extension.status, "Ready")
        assert.strictEqual(
          yield* extension.reloadWith({ settings: { greeting: "HI", nested: { a: [1, 2] } } }),
          "Ready"
        )
        const params = (yield* Ref.get(received)) as Array<Record<string, unknown>>
        assert.isFalse("settings" in params[0])
        assert.deepStrictEqual(params[1].settings, { greeting: "HI", nested: { a: [1, 2] } })
        assert.isTrue(Option.getOrThrow(yield* extension.shutdown("closing")).success)
      }).pipe(Effect.scoped, provide(spawner, store))
    }))

  it.effect("settings over MAX_SETTINGS_BYTES, or not JSON, are refused with SettingsRefused: nothing restarts", () =>
    Effect.gen(function*() {
      const reasons = yield* Ref.make<Array<string>>([])
      const spawner = yield* TestSpawner.make((started) => greeter(started, reasons))
      const store = yield* MessageStore.make(sample)
      yield* Effect.gen(function*() {
        const extension = yield* ExtensionHost.start(spec, options)
        // {"big":"xxx…"} is 10 bytes of JSON besides the value: one byte over the bound.
        const big = { big: "x".repeat(HermesProtocol.MAX_SETTINGS_BYTES - 9) }
        const tooLarge = yield* Effect.flip(extension.reloadWith({ settings: big }))
        assert.deepStrictEqual([tooLarge._tag, tooLarge.reason, tooLarge.limit, tooLarge.actual], [
          "SettingsRefused",
          "TooLarge",
          65536,
          65537
        ])
        const notJson = yield* Effect.flip(extension.reloadWith({ settings: { n: 1n } }))
        assert.strictEqual(notJson.reason, "NotJson")
        // At the bound exactly: passed.
        assert.strictEqual(
          yield* extension.reloadWith({ settings: { big: "x".repeat(HermesProtocol.MAX_SETTINGS_BYTES - 10) } }),
          "Ready"
        )
        assert.deepStrictEqual(yield* Ref.get(reasons), ["reload"])
        assert.strictEqual((yield* spawner.spawned).length, 2)
      }).pipe(Effect.scoped, provide(spawner, store))
    }))

  it.effect("a settings option over the bound: the extension is not started and ends Failed", () =>
    Effect.gen(function*() {
      const reasons = yield* Ref.make<Array<string>>([])
      const spawner = yield* TestSpawner.make((started) => greeter(started, reasons))
      const store = yield* MessageStore.make(sample)
      yield* Effect.gen(function*() {
        const big = { big: "x".repeat(HermesProtocol.MAX_SETTINGS_BYTES) }
        const extension = yield* ExtensionHost.start(spec, { ...options, settings: big })
        assert.strictEqual(yield* extension.status, "Failed")
        const failed = (yield* extension.history).find((e) => e._tag === "Failed")
        assert.match(
          failed?._tag === "Failed" ? failed.reason : "",
          /settings refused: 65546 bytes of JSON, over 65536/
        )
        assert.strictEqual((yield* spawner.spawned).length, 0)
      }).pipe(Effect.scoped, provide(spawner, store))
    }))
})

describe("Extension (SDK) settings", () => {
  const run = (params: unknown) =>
    Effect.gen(function*() {
      const pair = yield* TestTransport.makePair()
      const seen = yield* Ref.make<unknown>(undefined)
      yield* Extension.run(Extension.make({
        name: "reader",
        version: "1.0.0",
        commands: { "reader.read": { title: "Read", run: ({ settings }) => Ref.set(seen, settings) } }
      })).pipe(
        Effect.provideService(Transport.Transport, pair.right),
        Effect.provide(makeMemoryFs().layer),
        Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env: {} })),
        Effect.forkScoped
      )
      const raw = yield* makeRaw(pair.left)
      yield* raw.send({ jsonrpc: "2.0", id: 1, method: "initialize", params })
      const answer = yield* raw.next
      if (answer.result !== undefined) {
        yield* raw.send({ jsonrpc: "2.0", method: "initialized" })
        yield* raw.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "reader.read" } })
        yield* eventually(Effect.map(Ref.get(seen), (s) => s !== undefined), "the command ran")
      }
      return { answer, settings: yield* Ref.get(seen) }
    }).pipe(Effect.scoped)

  it.effect("the command sees the settings of initialize; none is an empty object", () =>
    Effect.gen(function*() {
      const given = yield* run({ dataDir: "/data", settings: { greeting: "HI", list: [1, "two"] } })
      assert.deepStrictEqual(given.settings, { greeting: "HI", list: [1, "two"] })
      const none = yield* run({ dataDir: "/data" })
      assert.deepStrictEqual(none.settings, {})
    }))

  it.effect("settings over MAX_SETTINGS_BYTES, or not an object, answer initialize -32602", () =>
    Effect.gen(function*() {
      const big = yield* run({ dataDir: "/data", settings: { big: "x".repeat(HermesProtocol.MAX_SETTINGS_BYTES) } })
      assert.strictEqual(big.answer.error?.code, -32602)
      assert.include(JSON.stringify(big.answer.error), "over 65536")
      const list = yield* run({ dataDir: "/data", settings: [1, 2] })
      assert.strictEqual(list.answer.error?.code, -32602)
    }))
})
