/**
 * Crash recovery with real processes, signals and files: a host (`fixtures/recovery-worker.ts`) journals operations
 * in SQLite and is killed with SIGKILL at the moment under test; a new journal on the same file then finds what was
 * interrupted and recovers it. Runs on the live clock: the bounds are real process start-up and exit.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import type { JournalClaim, JournalEntry } from "@lifeline/journal"
import { Journal, JournaledOperation, ProcessRecord, Recovery } from "@lifeline/journal"
import * as NodeReaper from "@lifeline/node/NodeReaper"
import * as SqliteJournal from "@lifeline/sqlite/SqliteJournal"
import { Effect, Option } from "effect"
import type { Scope } from "effect"
import { SqlClient } from "effect/sql"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import type { Exit } from "./support/processes.js"
import { isAlive, killOnExit, spawnLines } from "./support/processes.js"

const here = Path.dirname(Url.fileURLToPath(import.meta.url))
const root = Path.join(here, "..")
const fixture = Path.join(here, "fixtures", "recovery-worker.ts")

// Each test starts one to six processes through tsx, which takes seconds on a busy machine.
const processTimeout = 120_000

const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-recovery-"))
afterAll(() => Fs.rmSync(directory, { recursive: true, force: true }))
let files = 0
const freshFile = () => Path.join(directory, `case-${++files}`, "journal.db")

interface Worker {
  readonly child: ChildProcess.ChildProcess
  /** The first stdout line that starts with `prefix` (already written or still to come). */
  readonly line: (prefix: string) => Effect.Effect<string, Error>
  readonly kill: (signal: NodeJS.Signals) => Effect.Effect<void>
  readonly exited: Effect.Effect<Exit, Error>
}

/** Starts the worker fixture; the Scope SIGKILLs it if it is still running. */
const worker = (filename: string, mode: string, ...args: Array<string>): Effect.Effect<Worker, never, Scope.Scope> =>
  Effect.map(
    spawnLines(process.execPath, ["--import", "tsx", fixture, filename, mode, ...args], { cwd: root }),
    ({ child, exited, line, stderr }): Worker => ({
      child,
      line: (prefix) =>
        line(
          (text) => text.startsWith(prefix) ? text : undefined,
          () => new Error(`the worker exited before "${prefix}": ${stderr()}`)
        ).pipe(
          Effect.timeoutOrElse({
            duration: "20 seconds",
            orElse: () => Effect.fail(new Error(`no "${prefix}" from the worker within 20 s: ${stderr()}`))
          })
        ),
      kill: (signal) => Effect.sync(() => void child.kill(signal)),
      exited: exited.pipe(
        Effect.timeoutOrElse({
          duration: "10 seconds",
          orElse: () => Effect.fail(new Error("the worker did not exit"))
        })
      )
    })
  )

const crash = (running: Worker) =>
  Effect.gen(function*() {
    yield* running.kill("SIGKILL")
    const exit = yield* running.exited
    assert.strictEqual(exit.signal, "SIGKILL")
  })

/** A host that began `llm/turn-1` and `tool/call-1` and was killed with SIGKILL before it ended them: its journal. */
const crashedMidOperations = Effect.gen(function*() {
  const filename = freshFile()
  const host = yield* worker(filename, "begin", "llm/turn-1", "tool/call-1")
  yield* host.line("begun")
  yield* crash(host)
  return filename
})

/** A process that sleeps until killed, in its own group, killed with the Scope. */
const sleeper = Effect.acquireRelease(
  Effect.sync(() => {
    const child = ChildProcess.spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], {
      detached: true,
      stdio: "ignore"
    })
    return { pid: child.pid!, startedAt: Date.now(), child }
  }),
  ({ child }) => Effect.sync(() => void child.kill("SIGKILL"))
)

const entries = (journal: Journal.Journal.Service, keys: ReadonlyArray<string>) =>
  Effect.forEach(keys, (key) => Effect.map(journal.get(key), Option.getOrThrow))

describe("Recovery with real processes", { timeout: processTimeout }, () => {
  it.live(
    "an operation begun by a process killed with SIGKILL is InFlight when the journal is reopened",
    () =>
      Effect.gen(function*() {
        const filename = yield* crashedMidOperations
        const journal = yield* SqliteJournal.makeFile({ filename })
        const [turn, call] = yield* entries(journal, ["llm/turn-1", "tool/call-1"])
        assert.deepStrictEqual([turn.status, turn.kind, turn.attempts, turn.payload], [
          "InFlight",
          "llm",
          1,
          { key: "llm/turn-1" }
        ])
        assert.deepStrictEqual([call.status, call.kind], ["InFlight", "tool"])
        assert.deepStrictEqual((yield* journal.unfinished()).map((entry) => entry.key), ["llm/turn-1", "tool/call-1"])
      })
  )

  it.live(
    "seed cases 1 and 2 after SIGKILL: the LLM request auto-continues once; the tool shows InterruptedByCrash and is retried",
    () =>
      Effect.gen(function*() {
        const filename = yield* crashedMidOperations
        let llmRuns = 0
        const decisions = {
          llm: () => Recovery.resume(() => Effect.sync(() => ({ text: "continued", run: ++llmRuns }))),
          tool: () => Recovery.fail("the tool was executing; its side effects are unknown")
        }
        const restart = Effect.scoped(Effect.gen(function*() {
          const journal = yield* SqliteJournal.makeFile({ filename })
          return yield* Recovery.run({ decisions }).pipe(Effect.provideService(Journal.Journal, journal))
        }))

        const report = yield* restart
        assert.deepStrictEqual(report.resumed.map((entry) => [entry.key, entry.attempts, entry.result]), [
          ["llm/turn-1", 2, { text: "continued", run: 1 }]
        ])
        assert.deepStrictEqual(report.failed.map((entry) => entry.key), ["tool/call-1"])

        // another restart finds nothing: nothing runs twice
        const again = yield* restart
        assert.deepStrictEqual([again.resumed, again.failed, again.errors], [[], [], []])
        assert.strictEqual(llmRuns, 1)

        const journal = yield* SqliteJournal.makeFile({ filename })
        const call = Option.getOrThrow(yield* journal.get("tool/call-1"))
        const error = Option.getOrThrow(Recovery.interruptedByCrash(call))
        assert.strictEqual(error._tag, "InterruptedByCrash")
        assert.strictEqual(error.detail, "the tool was executing; its side effects are unknown")
        // the user retries the tool under the same key
        yield* Effect.succeed("tool output").pipe(
          JournaledOperation.run("tool", "tool/call-1", { retry: true }),
          Effect.provideService(Journal.Journal, journal)
        )
        const retried = Option.getOrThrow(yield* journal.get("tool/call-1"))
        assert.deepStrictEqual([retried.status, retried.attempts], ["Completed", 2])
      })
  )

  it.live(
    "SIGKILL in the middle of journal writes leaves a readable, consistent journal",
    () =>
      Effect.gen(function*() {
        const filename = freshFile()
        for (const delay of [5, 17, 31, 60, 95]) {
          const host = yield* worker(filename, "churn")
          yield* host.line("ready")
          yield* Effect.sleep(`${delay} millis`)
          yield* crash(host)
        }
        const sql = yield* SqliteJournal.makeClient(filename)
        assert.deepStrictEqual(yield* sql.unsafe("PRAGMA integrity_check"), [{ integrity_check: "ok" }])
        const journal = yield* SqliteJournal.make().pipe(Effect.provideService(SqlClient.SqlClient, sql))
        // each run restarts at churn-0, which is then already completed: only the first run wrote new keys, and at
        // most the one operation it was writing when killed is unfinished
        const unfinished = yield* journal.unfinished()
        assert.isAtMost(unfinished.length, 1)
        const rows = yield* sql.unsafe<{ status: string; count: number }>(
          `SELECT status, COUNT(*) AS count FROM ${SqliteJournal.tables.journal} GROUP BY status ORDER BY status`
        )
        assert.isTrue(rows.every((row) => row.status === "Completed" || row.status === "InFlight"))
        assert.isAbove(rows.find((row) => row.status === "Completed")?.count ?? 0, 0)
      })
  )

  describe("two processes on one journal", () => {
    interface Recovered {
      readonly resumed: ReadonlyArray<readonly [string, number]>
      readonly claim: JournalClaim.Claim
    }
    const jsonAfter = (line: string) => JSON.parse(line.slice(line.indexOf(" ") + 1))

    /** A worker that holds the journal's claim, renewed with a ttl of `ttlMs`, with `llm/turn-1` begun. */
    const holder = (filename: string, ttlMs: string) =>
      Effect.tap(worker(filename, "hold", ttlMs, "llm/turn-1"), (held) => held.line("held"))

    it.live(
      "the second is refused while the first lives; after a SIGKILL of the first, it takes over and recovers its work",
      () =>
        Effect.gen(function*() {
          const filename = freshFile()
          const first = yield* holder(filename, "1000")
          const second = yield* worker(filename, "recover", "1000")
          const refused = jsonAfter(yield* second.line("refused "))
          assert.deepStrictEqual([refused._tag, refused.owner, refused.pid, refused.host], [
            "OwnerInUse",
            "local",
            first.child.pid,
            Os.hostname()
          ])
          assert.deepStrictEqual(yield* second.exited, { code: 0, signal: null })
          // past its 1 s ttl the claim still holds: the first renews it
          yield* Effect.sleep("1500 millis")
          const journal = yield* SqliteJournal.makeFile({ filename })
          const claim = Option.getOrThrow(yield* journal.holder("local"))
          assert.strictEqual(claim.pid, first.child.pid)
          assert.isAbove(claim.expiresAt, Date.now() - 100)
          assert.strictEqual(Option.getOrThrow(yield* journal.get("llm/turn-1")).status, "InFlight")

          yield* crash(first)
          const third = yield* worker(filename, "recover", "1000")
          const recovered: Recovered = jsonAfter(yield* third.line("recovered "))
          assert.deepStrictEqual(recovered.resumed, [["llm/turn-1", 2]])
          assert.strictEqual(recovered.claim.pid, third.child.pid)
          assert.deepStrictEqual(yield* third.exited, { code: 0, signal: null })
          const entry = Option.getOrThrow(yield* journal.get("llm/turn-1"))
          assert.deepStrictEqual([entry.status, entry.result], ["Completed", {
            continued: "llm/turn-1",
            by: third.child.pid
          }])
          // released when the third stopped
          assert.isTrue(Option.isNone(yield* journal.holder("local")))
        })
    )

    it.live(
      "a holder killed with SIGKILL is taken over at once on its host, long before its claim expires",
      () =>
        Effect.gen(function*() {
          const filename = freshFile()
          const first = yield* holder(filename, "600000")
          const journal = yield* SqliteJournal.makeFile({ filename })
          const held = Option.getOrThrow(yield* journal.holder("local"))
          yield* crash(first)
          const second = yield* worker(filename, "recover", "600000")
          const recovered: Recovered = jsonAfter(yield* second.line("recovered "))
          assert.deepStrictEqual(recovered.resumed, [["llm/turn-1", 2]])
          assert.isBelow(recovered.claim.claimedAt, held.expiresAt)
        })
    )
  })

  describe("orphan child processes", () => {
    /**
     * Runs a worker in `mode` (which prints "<mode> <pid>" for the child it starts) and kills it with SIGKILL: its
     * child outlives it. Answers the child's pid and the worker's journal, reopened.
     */
    const orphanOf = (mode: "orphan" | "spawned") =>
      Effect.gen(function*() {
        const filename = freshFile()
        const host = yield* worker(filename, mode)
        const pid = Number((yield* host.line(`${mode} `)).split(" ")[1])
        yield* killOnExit(pid)
        yield* crash(host)
        assert.isTrue(isAlive(pid), "the orphan outlived its host")
        return { pid, journal: yield* SqliteJournal.makeFile({ filename }) }
      })

    const reap = (journal: Journal.Journal.Service) =>
      Recovery.run({ reap: NodeReaper.reapProcess({ grace: "2 seconds" }) }).pipe(
        Effect.provideService(Journal.Journal, journal)
      )

    it.live(
      "a host killed with SIGKILL leaves its child behind; the next host finds it and kills it",
      () =>
        Effect.gen(function*() {
          const { journal, pid } = yield* orphanOf("orphan")
          const report = yield* reap(journal)
          assert.deepStrictEqual(report.reaped.map(({ outcome }) => outcome), ["Killed"])
          assert.isFalse(isAlive(pid))
          const entry = report.reaped[0].entry
          assert.deepStrictEqual([entry.status, entry.result], ["Completed", { outcome: "Killed" }])
          assert.strictEqual((entry.payload as ProcessRecord.ProcessInfo).pid, pid)
        })
    )

    it.live(
      "a child spawned by NodeChildProcess with a journal is recorded by it: after a SIGKILL of its host, reaped",
      () =>
        Effect.gen(function*() {
          const { journal, pid } = yield* orphanOf("spawned")
          const [recorded] = yield* journal.unfinished()
          assert.deepStrictEqual([recorded.kind, recorded.status], [ProcessRecord.kind, "InFlight"])
          assert.strictEqual((recorded.payload as ProcessRecord.ProcessInfo).pid, pid)
          const report = yield* reap(journal)
          assert.deepStrictEqual(report.reaped.map(({ entry, outcome }) => [entry.key, outcome]), [
            [recorded.key, "Killed"]
          ])
          assert.isFalse(isAlive(pid))
          assert.deepStrictEqual(yield* journal.unfinished(), [])
        })
    )

    it.live(
      "a pid that now names another process is left alone, and one that exited is Gone",
      () =>
        Effect.gen(function*() {
          const journal = yield* SqliteJournal.makeFile({ filename: freshFile() })
          const stranger = yield* sleeper
          // recorded an hour before this process started: the pid was reused
          yield* journal.begin({
            kind: ProcessRecord.kind,
            key: "process/local/reused",
            payload: { pid: stranger.pid, startedAt: stranger.startedAt - 3_600_000, command: ["old"] },
            owner: "local"
          })
          const exited = ChildProcess.spawnSync(process.execPath, ["-e", "process.pid"])
          yield* journal.begin({
            kind: ProcessRecord.kind,
            key: "process/local/gone",
            payload: { pid: exited.pid, startedAt: Date.now(), command: ["gone"] },
            owner: "local"
          })
          yield* journal.release("process/local/reused")
          yield* journal.release("process/local/gone")
          const report = yield* ProcessRecord.reapOrphans(NodeReaper.reapProcess()).pipe(
            Effect.provideService(Journal.Journal, journal)
          )
          assert.deepStrictEqual(
            report.reaped.map(({ entry, outcome }) => [entry.key, outcome]).sort(),
            [["process/local/gone", "Gone"], ["process/local/reused", "Reused"]]
          )
          assert.isTrue(isAlive(stranger.pid))
        })
    )
  })

  describe("an agent over stdio, stopped with SIGTERM under drain (seed cases 3 and 4)", () => {
    const agentFixture = Path.join(here, "fixtures", "recovery-agent.ts")

    interface Agent {
      readonly request: (id: number, key: string, ms: number) => Effect.Effect<void>
      readonly response: (id: number) => Effect.Effect<{ readonly result?: unknown; readonly error?: unknown }, Error>
      readonly worker: Worker
    }

    /** The agent as a child process, spoken to with hand-made Content-Length frames. */
    const agent = (filename: string, drainMs: number): Effect.Effect<Agent, never, Scope.Scope> =>
      Effect.acquireRelease(
        Effect.sync(() => {
          const child = ChildProcess.spawn(process.execPath, [
            "--import",
            "tsx",
            agentFixture,
            filename,
            String(drainMs)
          ], {
            cwd: root,
            stdio: ["pipe", "pipe", "pipe"]
          })
          const responses = new Map<number, { result?: unknown; error?: unknown }>()
          const waiting = new Set<() => void>()
          let buffered = Buffer.alloc(0)
          let stderr = ""
          child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
          child.stdout.on("data", (chunk: Buffer) => {
            buffered = Buffer.concat([buffered, chunk])
            for (;;) {
              const header = buffered.indexOf("\r\n\r\n")
              if (header < 0) break
              const length = Number(/Content-Length: (\d+)/i.exec(buffered.subarray(0, header).toString())?.[1])
              if (buffered.length < header + 4 + length) break
              const message = JSON.parse(buffered.subarray(header + 4, header + 4 + length).toString())
              buffered = buffered.subarray(header + 4 + length)
              if (typeof message.id === "number") responses.set(message.id, message)
            }
            for (const wake of waiting) wake()
          })
          const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
            child.on("exit", (code, signal) => {
              resolve({ code, signal })
              for (const wake of waiting) wake()
            })
          )
          const worker: Worker = {
            child,
            line: () => Effect.fail(new Error("the agent speaks JSON-RPC")),
            kill: (signal) => Effect.sync(() => void child.kill(signal)),
            exited: Effect.promise(() => exit).pipe(
              Effect.timeoutOrElse({
                duration: "20 seconds",
                orElse: () => Effect.fail(new Error(`no exit: ${stderr}`))
              })
            )
          }
          return {
            worker,
            request: (id, key, ms) =>
              Effect.sync(() => {
                const body = JSON.stringify({ jsonrpc: "2.0", id, method: "turn", params: { key, ms } })
                child.stdin.write(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
              }),
            response: (id) =>
              Effect.callback<{ result?: unknown; error?: unknown }, Error>((resume) => {
                const check = () => {
                  const found = responses.get(id)
                  if (found !== undefined) {
                    waiting.delete(check)
                    resume(Effect.succeed(found))
                  } else if (child.exitCode !== null || child.signalCode !== null) {
                    waiting.delete(check)
                    resume(Effect.fail(new Error(`the agent exited without answering ${id}: ${stderr}`)))
                  }
                }
                waiting.add(check)
                check()
                return Effect.sync(() => waiting.delete(check))
              }).pipe(
                Effect.timeoutOrElse({
                  duration: "30 seconds",
                  orElse: () => Effect.fail(new Error(`no answer: ${stderr}`))
                })
              )
          }
        }),
        ({ worker }) =>
          Effect.sync(() => {
            if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill("SIGKILL")
          })
      )

    /** Waits (on the live clock) until the journal, read through its own connection, shows `key` in `status`. */
    const awaitStatus = (filename: string, key: string, status: JournalEntry.Status) =>
      Effect.scoped(Effect.gen(function*() {
        const journal = yield* SqliteJournal.makeFile({ filename })
        for (let i = 0; i < 1000; i++) {
          const entry = yield* journal.get(key)
          if (Option.isSome(entry) && entry.value.status === status) return entry.value
          yield* Effect.sleep("20 millis")
        }
        return yield* Effect.die(new Error(`${key} never became ${status}`))
      }))

    /**
     * Starts the agent with `drainMs` on a fresh journal, and sends it SIGTERM once request 1 (`key`, `ms`) is InFlight
     * there. Answers the journal's file and the agent.
     */
    const terminatedDuring = (drainMs: number, key: string, ms: number) =>
      Effect.gen(function*() {
        const filename = freshFile()
        const running = yield* agent(filename, drainMs)
        yield* running.request(1, key, ms)
        yield* awaitStatus(filename, key, "InFlight")
        yield* running.worker.kill("SIGTERM")
        return { filename, running }
      })

    it.live(
      "seed case 3: SIGTERM during a request waits for the response, then a clean stop leaves nothing unfinished",
      () =>
        Effect.gen(function*() {
          const { filename, running } = yield* terminatedDuring(20_000, "turn-1", 1500)
          assert.deepStrictEqual(
            yield* running.response(1),
            { jsonrpc: "2.0", id: 1, result: "answered turn-1" } as any
          )
          assert.deepStrictEqual(yield* running.worker.exited, { code: 143, signal: null })
          const journal = yield* SqliteJournal.makeFile({ filename })
          assert.strictEqual(Option.getOrThrow(yield* journal.get("turn-1")).status, "Completed")
          assert.deepStrictEqual(yield* journal.unfinished(), [])
        })
    )

    it.live(
      "seed case 4: SIGTERM past the drain deadline marks the request NeedsRecovery; a restart auto-continues it",
      () =>
        Effect.gen(function*() {
          const { filename, running: first } = yield* terminatedDuring(300, "turn-2", 60_000)
          // the cut-off request gets no answer: its id is tombstoned and the connection closed
          assert.deepStrictEqual(yield* first.worker.exited, { code: 143, signal: null })
          const cut = yield* awaitStatus(filename, "turn-2", "NeedsRecovery")
          assert.match(cut.reason ?? "", /drain timeout/)

          const second = yield* agent(filename, 300)
          const resumed = yield* awaitStatus(filename, "turn-2", "Completed")
          assert.deepStrictEqual([resumed.attempts, resumed.result], [2, "continued turn-2"])
          second.worker.child.stdin!.end() // the host goes away: the agent stops by itself
          assert.deepStrictEqual(yield* second.worker.exited, { code: 0, signal: null })
        })
    )
  })
})
