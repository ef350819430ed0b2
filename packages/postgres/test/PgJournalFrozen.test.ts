import { assert, describe, it } from "@effect/vitest"
import { Journal, JournaledOperation, JournalError } from "@lifeline/journal"
import { PgJournal } from "@lifeline/postgres"
import { Context, Effect, Exit, Fiber, Layer, Redacted, Schedule, Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import { afterAll, beforeAll } from "vitest"

// A server of this file's own, which it freezes (SIGSTOP on the postmaster and every backend, as a paused VM or a
// stuck host would be): the kernel's TCP stack still acknowledges what the driver writes, so only a timeout on this
// side can end a query. Needs Postgres server binaries; skipped, saying so, without them (a shared LIFELINE_PG_URL
// server cannot be frozen).
const script = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "../../../scripts/postgres.sh")
const hasServer = (() => {
  try {
    return Fs.readdirSync("/usr/lib/postgresql").length > 0 ||
      ChildProcess.spawnSync("sh", ["-c", "command -v pg_ctl"]).status === 0
  } catch {
    return ChildProcess.spawnSync("sh", ["-c", "command -v pg_ctl"]).status === 0
  }
})()
const skip = hasServer ? undefined : "no Postgres server binaries (initdb, pg_ctl) to start a server that can be frozen"
if (skip !== undefined) process.stderr.write(`[postgres] SKIPPED the frozen-server tests: ${skip}\n`)

let dir: string | undefined
let url = ""
beforeAll(() => {
  if (skip !== undefined) return
  dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-pg-frozen-"))
  url = ChildProcess.execFileSync("bash", [script, "start", dir], { encoding: "utf8" }).trim()
}, 60_000)
afterAll(() => {
  if (dir === undefined) return
  signalServer("SIGCONT")
  ChildProcess.execFileSync("bash", [script, "stop", dir], { stdio: "ignore" })
}, 60_000)

// The postmaster (first line of postmaster.pid) and its children, the backends.
const serverPids = (): ReadonlyArray<number> => {
  const postmaster = Number(Fs.readFileSync(Path.join(dir!, "data", "postmaster.pid"), "utf8").split("\n")[0])
  const children = ChildProcess.spawnSync("ps", ["-o", "pid=", "--ppid", String(postmaster)], { encoding: "utf8" })
    .stdout.split("\n").map((line) => Number(line.trim())).filter((pid) => pid > 0)
  return [postmaster, ...children]
}
const signalServer = (signal: "SIGSTOP" | "SIGCONT") => {
  for (const pid of serverPids()) {
    try {
      process.kill(pid, signal)
    } catch {
      // gone already
    }
  }
}
// Frozen for the Scope, thawed when it closes (or at the latest in afterAll).
const frozen = Effect.acquireRelease(
  Effect.sync(() => signalServer("SIGSTOP")),
  () => Effect.sync(() => signalServer("SIGCONT"))
)

const elapsed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const start = Date.now()
    const exit = yield* Effect.exit(effect)
    return { exit, millis: Date.now() - start }
  })

const op = (key: string) => ({ kind: "llm", key, payload: { key }, owner: "host" })

describe.skipIf(skip !== undefined)(
  skip === undefined ? "PgJournal on a frozen server" : `PgJournal on a frozen server (skipped: ${skip})`,
  () => {
    it.live(
      "every step fails within operationTimeout with a Storage error that says it timed out",
      () =>
        Effect.gen(function*() {
          const journal = yield* Layer.build(
            // a connect timeout of its own: on a busy machine, connecting may take longer than a step may
            PgJournal.layer({ url: Redacted.make(url), connectTimeout: "20 seconds" }, { operationTimeout: "1 second" })
          ).pipe(Effect.map(Context.get(Journal.Journal)))
          yield* journal.begin(op("before"))
          yield* Effect.scoped(Effect.gen(function*() {
            yield* frozen
            const steps: ReadonlyArray<Effect.Effect<unknown, JournalError.JournalError>> = [
              journal.begin(op("during")),
              journal.unfinished("host"),
              journal.complete("before")
            ]
            for (const step of steps) {
              const { exit, millis } = yield* elapsed(step)
              assert.isTrue(Exit.isFailure(exit), "a step on a frozen server fails")
              const error = Exit.isFailure(exit) ? Exit.findErrorOption(exit) : undefined
              const failure = error !== undefined && error._tag === "Some" ? error.value : undefined
              assert.instanceOf(failure, JournalError.JournalError)
              assert.strictEqual((failure as JournalError.JournalError).reason, "Storage")
              assert.include((failure as JournalError.JournalError).message, "timed out")
              assert.isBelow(millis, 4_000, `the step returned after ${millis} ms`)
            }
            // Starting a journal (settings, migrations) is bounded too.
            const started = yield* elapsed(Effect.scoped(Layer.build(
              PgJournal.layer({ url: Redacted.make(url), connectTimeout: "20 seconds" }, {
                operationTimeout: "1 second"
              })
            )))
            assert.isTrue(Exit.isFailure(started.exit))
            assert.isBelow(started.millis, 4_000, `starting a journal returned after ${started.millis} ms`)
            // Inside an uninterruptible region (track records its start uninterruptibly), as bounded.
            const tracked = yield* elapsed(
              Effect.succeed(1).pipe(
                JournaledOperation.run("llm", "tracked", {}),
                Effect.provideService(Journal.Journal, journal)
              )
            )
            assert.isTrue(Exit.isFailure(tracked.exit))
            assert.isBelow(tracked.millis, 4_000, `track returned after ${tracked.millis} ms`)
          }))
          // Thawed: the journal works again (once the pool has replaced the connections the timeouts gave up on).
          const after = yield* journal.begin(op("after")).pipe(
            Effect.retry({ schedule: Schedule.spaced("500 millis"), times: 20 })
          )
          assert.isTrue(after.started)
        }).pipe(Effect.scoped),
      60_000
    )

    it.live(
      "a step waiting on a frozen server is interrupted at once, and the journal's layer closes",
      () =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const context = yield* Layer.buildWithScope(
            PgJournal.layer({ url: Redacted.make(url) }, { operationTimeout: "30 seconds" }),
            scope
          )
          const journal = Context.get(context, Journal.Journal)
          yield* journal.begin(op("interrupted/before"))
          const thawed = yield* Effect.scoped(Effect.gen(function*() {
            yield* frozen
            const fiber = yield* Effect.forkChild(journal.unfinished("host"))
            yield* Effect.sleep("200 millis")
            const interrupted = yield* elapsed(Fiber.interrupt(fiber))
            assert.isBelow(interrupted.millis, 1_000, `the interruption took ${interrupted.millis} ms`)
            // What a SIGTERM does to a host: its layers close, the journal's pool with them.
            const closed = yield* elapsed(Scope.close(scope, Exit.void))
            return closed.millis
          }))
          assert.isBelow(thawed, 15_000, `closing the layer took ${thawed} ms`)
        }),
      60_000
    )
  }
)
