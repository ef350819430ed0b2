/**
 * What journaling an operation costs: begin+complete pairs per second, in memory and in SQLite (WAL mode) with every
 * commit synced (`FULL`, the default) or synced at checkpoints only (`NORMAL`), one transaction per step or batched
 * (a transaction over N pairs, which is durable only when it commits). A floor row runs the same two writes as bare
 * autocommit statements through the SqlClient, to show what the journal's own bookkeeping adds. Run with
 * `pnpm exec node scripts/run-bundled.mjs bench/journal.ts`; `run()` returns the rows for `bench/index.ts`.
 *
 * Each row is the median of `repeats` runs, each on a fresh file in the OS's temporary directory, after an untimed
 * warm-up; one fiber drives it, as a host does when it records operations one by one. Wall time includes the disk's
 * sync latency; CPU time (user + system of this process) is what the journal itself costs, and moves less when the
 * machine is busy.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import { Journal } from "../packages/journal/src/index.js"
import * as SqliteJournal from "../packages/sqlite/src/SqliteJournal.js"

/** One measured configuration. */
export interface Row {
  readonly journal: string
  readonly synchronous: string
  readonly batch: number
  readonly pairs: number
  readonly pairsPerSecond: number
  readonly microsPerPair: number
  /** CPU time (user + system) per pair: what the journal costs this process, whatever else the machine runs. */
  readonly cpuMicrosPerPair: number
}

interface Case {
  readonly journal: string
  readonly synchronous: SqliteJournal.Synchronous | "-"
  readonly batch: number
  readonly pairs: number
  readonly floor?: boolean
}

const payload = { conversation: "c-1", turn: 7, tool: "search", args: { query: "lorem ipsum dolor sit amet" } }
const result = { ok: true, text: "consectetur adipiscing elit, sed do eiusmod tempor" }

/** `pairs` begin+complete pairs, `batch` pairs per transaction (1: each step commits on its own). */
const pairs = (journal: Journal.Journal.Service, prefix: string, count: number, batch: number) =>
  Effect.gen(function*() {
    const one = (i: number) =>
      Effect.andThen(
        journal.begin({ kind: "tool", key: `${prefix}-${i}`, payload, owner: "bench" }),
        journal.complete(`${prefix}-${i}`, result)
      )
    if (batch <= 1) {
      for (let i = 0; i < count; i++) yield* one(i)
      return
    }
    for (let start = 0; start < count; start += batch) {
      yield* journal.batch(Effect.gen(function*() {
        for (let i = start; i < Math.min(start + batch, count); i++) yield* one(i)
      }))
    }
  })

// The same two writes a pair makes, as autocommit statements with no read-back and no rules.
const floorPairs = (sql: SqlClient.SqlClient, prefix: string, count: number) =>
  Effect.gen(function*() {
    const text = JSON.stringify(payload)
    const done = JSON.stringify(result)
    for (let i = 0; i < count; i++) {
      yield* sql.unsafe(
        `INSERT INTO ${SqliteJournal.tables.journal} (op_key, kind, owner, status, attempts, payload, started_at, ` +
          `updated_at) VALUES (?, 'tool', 'bench', 'InFlight', 1, ?, ?, ?)`,
        [`${prefix}-${i}`, text, i, i]
      )
      yield* sql.unsafe(
        `UPDATE ${SqliteJournal.tables.journal} SET status = 'Completed', result = ?, finished_at = ? WHERE op_key = ?`,
        [done, i, `${prefix}-${i}`]
      )
    }
  })

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

const timeOnce = (directory: string, spec: Case, run: number): Promise<{ readonly ms: number; readonly cpu: number }> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const filename = Path.join(directory, `${spec.journal}-${spec.synchronous}-${spec.batch}-${run}.db`)
    let go: (prefix: string, count: number) => Effect.Effect<void, unknown>
    if (spec.journal === "memory") {
      const journal = yield* Journal.makeMemory
      go = (prefix, count) => pairs(journal, prefix, count, spec.batch)
    } else {
      const sql = yield* SqliteJournal.makeClient(filename)
      const journal = yield* SqliteJournal.make({ synchronous: spec.synchronous === "NORMAL" ? "NORMAL" : "FULL" })
        .pipe(Effect.provideService(SqlClient.SqlClient, sql))
      go = spec.floor === true
        ? (prefix, count) => floorPairs(sql, prefix, count)
        : (prefix, count) => pairs(journal, prefix, count, spec.batch)
    }
    yield* go("warm", Math.max(10, Math.floor(spec.pairs / 10)))
    const start = performance.now()
    const cpu = process.cpuUsage()
    yield* go("timed", spec.pairs)
    const used = process.cpuUsage(cpu)
    return { ms: performance.now() - start, cpu: used.user + used.system }
  })))

const cases = (scale: number): ReadonlyArray<Case> => [
  { journal: "memory", synchronous: "-", batch: 1, pairs: 20_000 * scale },
  { journal: "sqlite floor (2 bare statements)", synchronous: "FULL", batch: 1, pairs: 500 * scale, floor: true },
  { journal: "sqlite", synchronous: "FULL", batch: 1, pairs: 500 * scale },
  { journal: "sqlite", synchronous: "NORMAL", batch: 1, pairs: 2_000 * scale },
  { journal: "sqlite", synchronous: "FULL", batch: 10, pairs: 2_000 * scale },
  { journal: "sqlite", synchronous: "FULL", batch: 100, pairs: 10_000 * scale },
  { journal: "sqlite", synchronous: "NORMAL", batch: 100, pairs: 10_000 * scale }
]

/** Measures every case; `scale` multiplies the number of pairs, `repeats` is how many runs each median takes. */
export const run = async (
  options: { readonly scale?: number | undefined; readonly repeats?: number | undefined } = {}
): Promise<Array<Row>> => {
  const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-bench-journal-"))
  const rows: Array<Row> = []
  try {
    for (const spec of cases(options.scale ?? 1)) {
      const times: Array<number> = []
      const cpus: Array<number> = []
      for (let i = 0; i < (options.repeats ?? 3); i++) {
        const { cpu, ms } = await timeOnce(directory, spec, i)
        times.push(ms)
        cpus.push(cpu)
      }
      const ms = median(times)
      rows.push({
        journal: spec.journal,
        synchronous: spec.synchronous,
        batch: spec.batch,
        pairs: spec.pairs,
        pairsPerSecond: spec.pairs / (ms / 1000),
        microsPerPair: (ms * 1000) / spec.pairs,
        cpuMicrosPerPair: median(cpus) / spec.pairs
      })
    }
  } finally {
    Fs.rmSync(directory, { recursive: true, force: true })
  }
  return rows
}

export const format = (rows: ReadonlyArray<Row>): string =>
  [
    "| journal | synchronous | pairs per transaction | pairs | begin+complete pairs/s | µs per pair | CPU µs per pair |",
    "|---|---|---:|---:|---:|---:|---:|",
    ...rows.map((row) =>
      `| ${row.journal} | ${row.synchronous} | ${row.batch === 1 ? "1 (each step)" : row.batch} | ${row.pairs} | ` +
      `${Math.round(row.pairsPerSecond).toLocaleString("en-US")} | ${row.microsPerPair.toFixed(1)} | ` +
      `${row.cpuMicrosPerPair.toFixed(1)} |`
    )
  ].join("\n")

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  run().then((rows) =>
    process.stdout.write(
      `Node ${process.version}, ${Os.cpus().length} CPUs, files in ${Os.tmpdir()}, median of 3 runs\n\n${
        format(rows)
      }\n`
    )
  )
}
