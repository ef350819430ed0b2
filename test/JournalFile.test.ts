/**
 * The file a supervised spawner records its children in (packages/node/src/internal/journalFile.ts), deferred mode:
 * its writes run off the event loop one at a time, a change made during a write is written by the next one, and
 * `close` waits for the write under way, writes last, and nothing lands after it (a removed file stays removed).
 */
import { assert, describe, it } from "@effect/vitest"
import type * as JournalBackend from "@lifeline/journal/JournalBackend"
import { Effect, Logger } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as journalFile from "../packages/node/src/internal/journalFile.js"

const row = (key: string): JournalBackend.Row => ({
  key,
  kind: "process",
  owner: "spawner/test",
  status: "InFlight",
  attempts: 1,
  payload: "{}",
  result: null,
  error: null,
  reason: null,
  startedAt: 1,
  updatedAt: 1,
  finishedAt: null
})

const keysIn = (file: string): Array<string> =>
  (JSON.parse(Fs.readFileSync(file, "utf8")) as { rows: Array<{ key: string }> }).rows.map((r) => r.key).sort()

const withDirectory = <A, E>(body: (directory: string) => Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-journal-file-"))),
    body,
    (directory) => Effect.sync(() => Fs.rmSync(directory, { recursive: true, force: true }))
  )

/** Runs `effect` with its warnings (and errors) collected in `into`: a failed background write is logged, not thrown. */
const collectingWarnings = (into: Array<string>) =>
  Effect.provide(Logger.layer([
    Logger.make(({ logLevel, message }) => {
      if (logLevel === "Warn" || logLevel === "Error") into.push(String(message))
    })
  ]))

/** Lets the event loop run `turns` times: background writes go through libuv's thread pool. */
const turns = (n: number) =>
  Effect.promise(async () => {
    for (let i = 0; i < n; i++) await new Promise((resolve) => setTimeout(resolve, 1))
  })

describe("journalFile (deferred)", () => {
  it.live("changes made while a write is under way are written by the next write", () =>
    withDirectory((directory) =>
      Effect.gen(function*() {
        const path = Path.join(directory, "own.json")
        const file = yield* journalFile.make(path, { deferred: true })
        // 200 inserts, each yielding: many land while a write is in the thread pool.
        for (let i = 0; i < 200; i++) {
          yield* file.backend.insert(row(`k${String(i).padStart(3, "0")}`))
          if (i % 7 === 0) yield* Effect.yieldNow
        }
        yield* turns(50)
        assert.strictEqual(keysIn(path).length, 200)
        yield* file.close
      })
    ))

  it.live("close writes what is pending, after the write under way, and nothing lands after it", () => {
    const warnings: Array<string> = []
    return withDirectory((directory) =>
      Effect.gen(function*() {
        const path = Path.join(directory, "own.json")
        const file = yield* journalFile.make(path, { deferred: true })
        yield* file.backend.insert(row("a"))
        // The write of "a" starts in the background (its fiber yields once first); "b" comes while it runs.
        for (let i = 0; i < 3; i++) yield* Effect.yieldNow
        yield* file.backend.insert(row("b"))
        yield* file.close
        assert.deepStrictEqual(keysIn(path), ["a", "b"])
        // The owner removes its file after the close: no late background write may bring it back.
        Fs.rmSync(path)
        yield* file.backend.insert(row("c"))
        yield* turns(20)
        assert.isFalse(Fs.existsSync(path))
        assert.deepStrictEqual(Fs.readdirSync(directory), [])
        // No write overlapped another (two writes of one temporary file: one rename fails, logged).
        assert.deepStrictEqual(warnings, [])
      }).pipe(collectingWarnings(warnings))
    )
  })

  it.live("a write that fails is logged, and the next change writes the whole state", () => {
    const warnings: Array<string> = []
    return withDirectory((directory) =>
      Effect.gen(function*() {
        const path = Path.join(directory, "own.json")
        const file = yield* journalFile.make(path, { deferred: true })
        // The temporary file's name taken by a directory: the write fails (EISDIR).
        const temporary = `${path}.${process.pid}.tmp`
        Fs.mkdirSync(temporary)
        yield* file.backend.insert(row("a"))
        // "b" comes while the write of "a" is under way (and fails): its fiber yields once before it writes.
        yield* Effect.yieldNow
        yield* Effect.yieldNow
        yield* file.backend.insert(row("b"))
        yield* turns(20)
        assert.isFalse(Fs.existsSync(path))
        assert.isAtLeast(warnings.length, 1)
        Fs.rmdirSync(temporary)
        yield* file.backend.insert(row("c"))
        yield* turns(20)
        assert.deepStrictEqual(keysIn(path), ["a", "b", "c"])
        yield* file.close
      }).pipe(collectingWarnings(warnings))
    )
  })
})
