/**
 * A state file the extension could not read, on a real disk, under a real SDK extension (the probe fixture): an
 * unreadable one (a directory in its place: the tests run as root, whom permissions do not stop), a truncated one,
 * corrupt bytes, and JSON of another shape. None is overwritten: each is moved aside as `state.json.bad-<timestamp>`
 * while the extension answers `initialize`, and the shutdown answer says where (docs/protocol.md, "shutdown").
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { spawnFramed } from "./support/framed.js"

const probe = "test/fixtures/hermes-probe.ts"

interface Cause {
  readonly name: string
  readonly reason: "Unreadable" | "InvalidJson" | "SchemaMismatch"
  /** Puts the bad state in place. */
  readonly make: (file: string) => void
  /** Checks that what was put in place is intact at `moved`. */
  readonly intact: (moved: string) => void
}

const bytes = (content: Buffer): Pick<Cause, "make" | "intact"> => ({
  make: (file) => Fs.writeFileSync(file, content),
  intact: (moved) => assert.isTrue(Fs.readFileSync(moved).equals(content))
})

const causes: ReadonlyArray<Cause> = [
  {
    name: "unreadable (a directory named state.json)",
    reason: "Unreadable",
    make: (file) => {
      Fs.mkdirSync(file)
      Fs.writeFileSync(Path.join(file, "keep.txt"), "kept")
    },
    intact: (moved) => assert.strictEqual(Fs.readFileSync(Path.join(moved, "keep.txt"), "utf8"), "kept")
  },
  { name: "truncated", reason: "InvalidJson", ...bytes(Buffer.from("{\"runs\": 41", "utf8")) },
  { name: "corrupt", reason: "InvalidJson", ...bytes(Buffer.from([0xff, 0xfe, 0x00, 0x7b, 0x80, 0x0a, 0xc3])) },
  { name: "of another shape", reason: "SchemaMismatch", ...bytes(Buffer.from("{\"runs\": \"many\"}\n", "utf8")) }
]

describe("Hermes: a state file that could not be read is moved aside, never overwritten", () => {
  for (const cause of causes) {
    it.live(
      `${cause.name}: moved aside at initialize, reported in the shutdown answer, the new state saved`,
      () =>
        Effect.gen(function*() {
          const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "hermes-state-"))
          const directory = Path.join(dataDir, "extensions", "probe")
          const file = Path.join(directory, "state.json")
          Fs.mkdirSync(directory, { recursive: true })
          cause.make(file)

          const extension = yield* spawnFramed(probe)
          extension.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { dataDir, hostPid: 0 } })
          const answer = yield* extension.next((m) => m.id === 1, "the answer to initialize")
          assert.strictEqual(answer.result?.name, "probe", JSON.stringify(answer))
          // Moved before anything could write: by the time initialize is answered.
          const names = Fs.readdirSync(directory)
          assert.strictEqual(names.length, 1, names.join(", "))
          assert.match(names[0], /^state\.json\.bad-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}Z$/)
          const moved = Path.join(directory, names[0])
          cause.intact(moved)
          assert.match(extension.stderr(), /level=WARN .*moved to .*state\.json\.bad-/)

          extension.send({ jsonrpc: "2.0", method: "initialized" })
          extension.send({ jsonrpc: "2.0", method: "command/execute", params: { command: "probe.count" } })
          extension.send({ jsonrpc: "2.0", id: 2, method: "shutdown", params: { reason: "closing" } })
          const shutdown = yield* extension.next((m) => m.id === 2, "the answer to shutdown")
          assert.isUndefined(shutdown.error, JSON.stringify(shutdown.error))
          assert.strictEqual(shutdown.result.success, true)
          assert.strictEqual(shutdown.result.data.stateSetAside.path, moved)
          assert.strictEqual(shutdown.result.data.stateSetAside.reason, cause.reason)
          assert.include(shutdown.result.data.stateSetAside.detail, file)
          const exit = yield* Effect.promise(() => extension.exited)
          assert.strictEqual(exit.code, 0, extension.stderr())

          // The new state is saved; the bad one is still there, as it was.
          assert.deepStrictEqual(JSON.parse(Fs.readFileSync(file, "utf8")), { runs: 1 })
          cause.intact(moved)
          assert.sameMembers(Fs.readdirSync(directory), [names[0], "state.json"])
        }).pipe(Effect.scoped),
      { timeout: 30_000 }
    )
  }
})
