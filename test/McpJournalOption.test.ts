/**
 * `@lifeline/mcp`'s `journal` option: the servers are recorded in the journal the host gives (a memory journal shared
 * through one layer object, the way `SqliteJournal.layer` is given; the SQLite sweep after a host's SIGKILL is in
 * McpHostCrash.test.ts), under an owner of this process, and their records closed once they are gone; a journal that
 * cannot be opened fails `start()` with its error, reported to `onerror`, and no server is spawned. With Postgres
 * (`PgJournal.layer`): the first start sweeps a dead host's server recorded there.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Journal from "@lifeline/journal/Journal"
import * as JournalClaim from "@lifeline/journal/JournalClaim"
import * as ProcessRecord from "@lifeline/journal/ProcessRecord"
import { StdioClientTransport } from "@lifeline/mcp/StdioClientTransport"
import * as PgJournal from "@lifeline/postgres/PgJournal"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as NodeProcess from "node:child_process"
import * as Os from "node:os"
import { describePostgres, usePostgres } from "./support/postgres.js"
import { isAlive } from "./support/processes.js"

const pg = usePostgres()

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("the journal option", () => {
  it("records each server in the given journal, and closes its record once it is gone", async () => {
    const journal = await Effect.runPromise(Journal.makeMemory)
    const layer = Layer.succeed(Journal.Journal, journal)
    const recorded = async () =>
      (await Effect.runPromise(journal.unfinished())).filter((entry) => entry.kind === ProcessRecord.kind)
    const transports = [0, 1].map(() =>
      new StdioClientTransport({ command: "cat", stderr: "ignore", journal: layer, guardian: false })
    )
    for (const transport of transports) await transport.start()
    const pids = transports.map((transport) => transport.pid!)
    const entries = await recorded()
    assert.deepStrictEqual(entries.map((entry) => (entry.payload as { pid: number }).pid).sort(), [...pids].sort())
    // One owner for both: one layer object is one journal, opened once by this process.
    assert.strictEqual(new Set(entries.map((entry) => entry.owner)).size, 1)
    assert.match(entries[0].owner, new RegExp(`^spawner/.+/${process.pid}/`))
    for (const transport of transports) await transport.close()
    assert.deepStrictEqual(pids.filter(isAlive), [])
    // The ends are written after the stop returns.
    for (let i = 0; i < 100 && (await recorded()).length > 0; i++) await sleep(10)
    assert.deepStrictEqual(await recorded(), [])
  })

  it("a journal that cannot be opened: start() rejects with its error, onerror gets it, nothing is spawned", async () => {
    const layer = Layer.effect(Journal.Journal, Effect.die(new Error("the journal's disk is gone")))
    const transport = new StdioClientTransport({ command: "cat", stderr: "ignore", journal: layer })
    const errors: Array<string> = []
    transport.onerror = (error) => errors.push(error.message)
    const failure = await transport.start().then(() => undefined, (error: Error) => error)
    assert.include(failure?.message ?? "", "the journal's disk is gone")
    assert.deepStrictEqual(errors.length, 1)
    assert.isNull(transport.pid)
    await transport.close()
  })
})

describePostgres(pg, "the journal option with Postgres", () => {
  it("the first start sweeps the server of a dead host recorded in Postgres", async () => {
    const layer = PgJournal.layer({ url: Redacted.make(pg.url()) })
    // What a host SIGKILLed without its guardian leaves: a server in a group of its own, recorded under the owner of
    // a process that is gone (pid 2^22 + 1 is above Linux's highest pid).
    const orphan = NodeProcess.spawn("sleep", ["60"], { detached: true, stdio: "ignore" })
    try {
      await Effect.runPromise(
        ProcessRecord.record({ pid: orphan.pid!, command: ["sleep", "60"] }).pipe(
          Effect.provideService(JournalClaim.Owner, `spawner/${Os.hostname()}/4194305/0`),
          Effect.provide(layer)
        )
      )
      assert.isTrue(isAlive(orphan.pid!))
      const transport = new StdioClientTransport({ command: "cat", stderr: "ignore", journal: layer, guardian: false })
      await transport.start()
      assert.isFalse(isAlive(orphan.pid!), "swept when the journal was opened, before the server was spawned")
      await transport.close()
    } finally {
      orphan.kill("SIGKILL")
    }
  }, 30_000)
})
