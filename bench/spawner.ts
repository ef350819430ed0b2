/**
 * What supervision costs an Effect app: `NodeSupervisedSpawner.layer` against Effect's `NodeChildProcessSpawner.layer`
 * in the same run, iterations interleaved so both see the same machine. Two rows, each a median with its spread
 * (p25–p75, min–max) over `--repeats` (default 200: a close lasts under a millisecond, and the median of fewer moves by a tenth from run to run on a shared machine):
 *
 * - "spawn → first byte": from `ChildProcess.make` until the first chunk of a child that prints at once (`echo`),
 *   which includes our journal record (one small file written);
 * - "close of a well-behaved child": from the close of the Scope of a running child that exits on SIGTERM (`sleep`,
 *   after `sh` printed that it runs) until the close returns: the group signalled, the exit seen, the record closed.
 *
 * Run with `pnpm bench spawner` or `pnpm tsx bench/spawner.ts --repeats=20` (`--no-journal`: without the journal,
 * to see what it costs).
 */
import { NodeChildProcessSpawner, NodeFileSystem, NodePath } from "@effect/platform-node"
import { Effect, Exit, Layer, Scope, Stream } from "effect"
import type { ChildProcessSpawner } from "effect/process"
import { ChildProcess } from "effect/process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { NodeSupervisedSpawner } from "../packages/node/src/index.js"
import { cell, type Spread, spreadOf } from "./spread.js"

/** One measure, both layers. */
export interface Row {
  readonly measure: string
  readonly effect: Spread
  readonly ours: Spread
  readonly ratio: number
}

const firstByte = Effect.gen(function*() {
  const start = performance.now()
  const handle = yield* ChildProcess.make("echo", ["x"])
  yield* Stream.runHead(handle.stdout)
  const elapsed = performance.now() - start
  yield* handle.exitCode
  return elapsed
}).pipe(Effect.scoped)

const close = Effect.gen(function*() {
  const scope = yield* Scope.make()
  const handle = yield* ChildProcess.make("sh", ["-c", "echo up; exec sleep 30"]).pipe(Scope.provide(scope))
  yield* Stream.runHead(handle.stdout)
  const start = performance.now()
  yield* Scope.close(scope, Exit.void)
  return performance.now() - start
})

/** Measures both layers, one iteration of each in turn. */
export const run = (repeats = 200, withJournal = true): Effect.Effect<ReadonlyArray<Row>> => {
  const directory = mkdtempSync(join(tmpdir(), "lifeline-bench-spawner-"))
  return Effect.gen(function*() {
    const platform = Layer.mergeAll(NodeFileSystem.layer, NodePath.layer)
    const effects = yield* Layer.build(NodeChildProcessSpawner.layer.pipe(Layer.provide(platform)))
    const ours = yield* Layer.build(
      NodeSupervisedSpawner.layerOptions({ directory, journal: withJournal ? undefined : false }).pipe(
        Layer.provide(platform)
      )
    )
    const measure = (name: string, sample: Effect.Effect<number, unknown, ChildProcessSpawner.ChildProcessSpawner>) =>
      Effect.gen(function*() {
        const times = { effect: [] as Array<number>, ours: [] as Array<number> }
        // A warm-up of each, not counted.
        yield* Effect.provide(sample, effects)
        yield* Effect.provide(sample, ours)
        for (let i = 0; i < repeats; i++) {
          times.effect.push(yield* Effect.provide(sample, effects))
          times.ours.push(yield* Effect.provide(sample, ours))
        }
        const [effect, supervised] = [spreadOf(times.effect), spreadOf(times.ours)]
        return { measure: name, effect, ours: supervised, ratio: supervised.median / effect.median }
      })
    const rows = [
      yield* measure("spawn → first byte", firstByte),
      yield* measure("close of a well-behaved child", close)
    ]
    return rows
  }).pipe(
    Effect.scoped,
    Effect.ensuring(Effect.sync(() => rmSync(directory, { recursive: true, force: true }))),
    Effect.orDie
  )
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const repeats = Number(
    /^--repeats=(\d+)$/.exec(process.argv.find((arg) => arg.startsWith("--repeats=")) ?? "")?.[1] ?? 200
  )
  Effect.runPromise(run(repeats, !process.argv.includes("--no-journal"))).then((rows) => {
    process.stdout.write(
      `| measure (n=${repeats}) | Effect's layer | NodeSupervisedSpawner | ratio |\n| --- | --- | --- | --- |\n`
    )
    for (const row of rows) {
      process.stdout.write(`| ${row.measure} | ${cell(row.effect)} | ${cell(row.ours)} | ${row.ratio.toFixed(2)}× |\n`)
    }
  })
}
