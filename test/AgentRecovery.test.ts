/**
 * The agent-recovery example (`examples/agent-recovery`), run through its bin as a user would: killed with SIGKILL in
 * the middle of a tool step, then in the middle of an llm step, and started again each time. Every turn must finish
 * exactly once, the interrupted tool is retried (not silently re-run by recovery), the interrupted llm step is
 * resumed, and the worker the first kill orphaned is killed by the next start. Runs on the live clock.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as SqliteJournal from "@lifeline/sqlite/SqliteJournal"
import { Effect } from "effect"
import type { Scope } from "effect"
import type * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import type { Exit } from "./support/processes.js"
import { awaitGone, isAlive, killOnExit, spawnLines } from "./support/processes.js"

const root = Path.join(Path.dirname(Url.fileURLToPath(import.meta.url)), "..")
const bin = Path.join(root, "examples", "agent-recovery", "bin", "agent-recovery")

const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-agent-recovery-test-"))
afterAll(() => Fs.rmSync(directory, { recursive: true, force: true }))

interface Run {
  readonly child: ChildProcess.ChildProcess
  readonly lines: ReadonlyArray<string>
  /** The first stdout line matching `pattern` (already printed or still to come). */
  readonly line: (pattern: RegExp) => Effect.Effect<RegExpExecArray, Error>
  readonly exited: Effect.Effect<Exit, Error>
}

/** Runs the example's bin; the Scope SIGKILLs it if it is still running. */
const agent = (...args: Array<string>): Effect.Effect<Run, never, Scope.Scope> =>
  Effect.map(spawnLines(bin, ["--data-dir", directory, "--turns", "3", ...args], { cwd: root }), (run): Run => {
    const transcript = () => `\n--- stdout\n${run.lines.join("\n")}\n--- stderr\n${run.stderr()}`
    return {
      child: run.child,
      lines: run.lines,
      line: (pattern) =>
        run.line(
          (line) => pattern.exec(line) ?? undefined,
          () => new Error(`the agent exited before printing ${pattern}${transcript()}`)
        ).pipe(
          Effect.timeoutOrElse({
            duration: "15 seconds",
            orElse: () => Effect.fail(new Error(`no line ${pattern} within 15 s${transcript()}`))
          })
        ),
      exited: run.exited.pipe(
        Effect.timeoutOrElse({ duration: "15 seconds", orElse: () => Effect.fail(new Error(`no exit${transcript()}`)) })
      )
    }
  })

const crash = (run: Run) =>
  Effect.gen(function*() {
    run.child.kill("SIGKILL")
    assert.strictEqual((yield* run.exited).signal, "SIGKILL")
  })

describe("examples/agent-recovery", () => {
  it.live(
    "killed mid-tool and mid-llm, restarted each time: every turn finishes once and the orphaned worker is reaped",
    () =>
      Effect.gen(function*() {
        // 1. Killed while turn 2's tool (run_tests: 5 × 2 s) runs in the worker: long enough for the next start to
        // find the orphan still at it (Killed, not Gone) even on a loaded machine.
        const first = yield* agent("--reset", "--llm-ms", "50", "--tool-ms", "2000")
        const firstWorker = Number((yield* first.line(/^\s*\d+ ms {2}worker started \(pid (\d+)\)/))[1])
        yield* killOnExit(firstWorker)
        yield* first.line(/turn 2 tool: started in the worker/)
        yield* crash(first)
        assert.isTrue(isAlive(firstWorker), "the worker outlived its agent: an orphan, still running the tool")

        // 2. Restarted: the orphan is killed, the tool retried; killed again while turn 3's llm step thinks.
        const second = yield* agent("--llm-ms", "10000", "--tool-ms", "50")
        const reaped = yield* second.line(/recovery: orphan worker pid (\d+) from a crashed run: (\w+)/)
        assert.deepStrictEqual([Number(reaped[1]), reaped[2]], [firstWorker, "Killed"])
        yield* awaitGone(firstWorker, 1000)
        yield* second.line(/recovery: turn-2\/tool was interrupted: recorded as InterruptedByCrash/)
        const secondWorker = Number((yield* second.line(/worker started \(pid (\d+)\)/))[1])
        yield* killOnExit(secondWorker)
        yield* second.line(/turn 2 tool: run_tests was interrupted by a crash \(attempt 1\): retrying, attempt 2/)
        yield* second.line(/turn 2: finished/)
        yield* second.line(/turn 3 llm: thinking/)
        // A second agent on the same data dir would take the running steps for a crash's leftovers: it refuses.
        const intruder = yield* agent("--llm-ms", "50", "--tool-ms", "50")
        assert.deepStrictEqual(yield* intruder.exited, { code: 2, signal: null })
        assert.isFalse(intruder.lines.some((line) => /recovery:/.test(line)), intruder.lines.join("\n"))
        assert.isTrue(isAlive(secondWorker), "the running agent's worker was left alone")
        yield* crash(second)
        assert.isFalse(second.lines.some((line) => / turn 1: finished/.test(line)), "turn 1 did not run again")

        // 3. Restarted: the llm step is resumed, the last tool runs, and the run ends.
        const third = yield* agent("--llm-ms", "50", "--tool-ms", "50", "--json")
        assert.deepStrictEqual(yield* third.exited, { code: 0, signal: null })
        const summary = JSON.parse(third.lines[third.lines.length - 1]) as {
          readonly finished: number
          readonly turns: ReadonlyArray<{
            readonly turn: number
            readonly llm: { readonly status: string; readonly attempts: number }
            readonly tool: { readonly status: string; readonly attempts: number }
          }>
          readonly recovery: {
            readonly resumed: ReadonlyArray<string>
            readonly failed: ReadonlyArray<string>
            readonly reaped: ReadonlyArray<{ readonly pid: number; readonly outcome: string }>
          }
        }
        assert.strictEqual(summary.finished, 3)
        assert.deepStrictEqual(
          summary.turns.map(({ llm, tool, turn }) => [turn, llm.status, llm.attempts, tool.status, tool.attempts]),
          [
            [1, "Completed", 1, "Completed", 1],
            [2, "Completed", 1, "Completed", 2],
            [3, "Completed", 2, "Completed", 1]
          ]
        )
        assert.deepStrictEqual([summary.recovery.resumed, summary.recovery.failed], [["turn-3/llm"], []])
        // The second worker was idle when its agent died: it ended with its input, or was killed now.
        assert.deepStrictEqual(summary.recovery.reaped.map(({ pid }) => pid), [secondWorker])
        assert.include(["Gone", "Killed"], summary.recovery.reaped[0].outcome)
        assert.isFalse(isAlive(secondWorker))
        // Each turn finished in exactly one run.
        const finishedIn = [first, second, third].map((run) =>
          run.lines.flatMap((line) => /turn (\d+): finished/.exec(line)?.[1] ?? [])
        )
        assert.deepStrictEqual(finishedIn, [["1"], ["2"], ["3"]])

        // The journal: nothing unfinished, the three workers included (two reaped, one that exited).
        const journal = yield* SqliteJournal.makeFile({ filename: Path.join(directory, "lifeline", "journal.db") })
        assert.deepStrictEqual(yield* journal.unfinished(), [])
        // The side effects: one per completed tool attempt (the orphan may or may not have finished attempt 1).
        const effects = Fs.readFileSync(Path.join(directory, "tool-effects.log"), "utf8").trim().split("\n")
        const count = (prefix: string) => effects.filter((line) => line.startsWith(prefix)).length
        assert.deepStrictEqual(
          [count("turn-1/tool attempt 1 "), count("turn-2/tool attempt 2 "), count("turn-3/tool attempt 1 ")],
          [1, 1, 1]
        )
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "--llm-ms and --tool-ms take a duration as well as a number of milliseconds; anything else is refused with exit 2",
    () =>
      Effect.gen(function*() {
        // A data dir of its own: the agent above may have left a journal whose owner it claimed.
        const dataDir = Path.join(directory, "durations")
        const run = yield* agent(
          "--data-dir",
          dataDir,
          "--turns",
          "1",
          "--llm-ms",
          "0.05s",
          "--tool-ms",
          "50ms",
          "--json"
        )
        assert.deepStrictEqual(yield* run.exited, { code: 0, signal: null })
        const summary = JSON.parse(run.lines[run.lines.length - 1]) as { readonly finished: number }
        assert.strictEqual(summary.finished, 1)
        // Refused while the arguments are read: before the first line of the transcript.
        const refused = yield* agent("--data-dir", dataDir, "--llm-ms", "1.5x")
        assert.deepStrictEqual(yield* refused.exited, { code: 2, signal: null })
        assert.deepStrictEqual(refused.lines, [])
      }).pipe(Effect.scoped),
    30_000
  )
})
