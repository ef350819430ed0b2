/**
 * What `NodeSupervisedSpawner.layer` adds to Effect's `NodeChildProcessSpawner.layer`, each shown with real processes,
 * and, side by side, what Effect's layer does in the same case (docs/supervising-effect-children.md has the table).
 */
import { NodeChildProcessSpawner, NodeFileSystem, NodePath } from "@effect/platform-node"
import { afterAll, assert, describe, it, layer } from "@effect/vitest"
import { Journal, JournalError } from "@lifeline/journal"
import { NodeSupervisedSpawner } from "@lifeline/node"
import { Effect, Exit, Fiber, Layer, Option, Scope, Stream } from "effect"
import type { ChildProcessSpawner } from "effect/process"
import { ChildProcess } from "effect/process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Fixtures from "./support/fixtures.js"
import { eventually, isAlive, spawnLines } from "./support/processes.js"

const node = process.execPath
const platform = Layer.mergeAll(NodeFileSystem.layer, NodePath.layer)
const killGrace = 500

const stubborn = "process.on('SIGTERM', () => {}); console.log(process.pid); setInterval(() => {}, 1000)"
/** A program that ignores SIGTERM, starts `child` (a program text) the same way, and prints its pid. */
const parentOf = (child: string) =>
  `require('node:child_process').spawn(process.execPath, ['-e', ${
    JSON.stringify(child)
  }], { stdio: 'inherit' }); ${stubborn}`

/** The pids the child's tree prints on stdout, one per line. */
const pids = (handle: ChildProcessSpawner.ChildProcessHandle, count: number) =>
  handle.stdout.pipe(
    Stream.decodeText(),
    Stream.splitLines,
    Stream.take(count),
    Stream.runCollect,
    Effect.map((lines) => lines.map(Number))
  )

const supervised = (directory: string) =>
  NodeSupervisedSpawner.layerOptions({ directory, killGrace: `${killGrace} millis` }).pipe(Layer.provideMerge(platform))
const effects = NodeChildProcessSpawner.layer.pipe(Layer.provideMerge(platform))

/** How many zombies are in process group `pgid`. */
const zombiesIn = (pgid: number): number =>
  Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).filter((pid) => {
    try {
      const stat = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      return Number(fields[2]) === pgid && fields[0] === "Z"
    } catch {
      return false
    }
  }).length

/** Whether a live process has `word` as an argument. */
const runningWith = (word: string): boolean =>
  Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).some((pid) => {
    try {
      return Fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").includes(word) && isAlive(Number(pid))
    } catch {
      return false
    }
  })

const stateDirectory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-guarantees-"))
afterAll(() => Fs.rmSync(stateDirectory, { recursive: true, force: true }))

describe("NodeSupervisedSpawner guarantees", () => {
  it.live("a child that ignores SIGTERM is gone within the kill grace after its Scope closes: SIGKILL killGrace later", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const handle = yield* ChildProcess.make(node, ["-e", stubborn]).pipe(Scope.provide(scope))
      yield* pids(handle, 1)
      const start = performance.now()
      yield* Scope.close(scope, Exit.void)
      const elapsed = performance.now() - start
      assert.isAtLeast(elapsed, killGrace - 20)
      assert.isBelow(elapsed, killGrace + 700)
      assert.isFalse(isAlive(handle.pid))
      const report = Option.getOrThrow(yield* NodeSupervisedSpawner.lastStop(handle))
      assert.strictEqual(report.endedBy, "Kill")
      assert.deepStrictEqual(report.signals, ["SIGTERM", "SIGKILL"])
      assert.deepStrictEqual(
        yield* NodeSupervisedSpawner.exitStatus(handle),
        Option.some({ exitCode: null, signal: "SIGKILL" })
      )
    }).pipe(Effect.provide(supervised(stateDirectory))))

  it.live("the command's killSignal is what asks; the signal that ended the child is data", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const handle = yield* ChildProcess.make("sh", ["-c", "echo up; exec sleep 30"], { killSignal: "SIGINT" }).pipe(
        Scope.provide(scope)
      )
      yield* pids(handle, 1)
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(
        yield* NodeSupervisedSpawner.exitStatus(handle),
        Option.some({ exitCode: null, signal: "SIGINT" })
      )
      const report = Option.getOrThrow(yield* NodeSupervisedSpawner.lastStop(handle))
      assert.strictEqual(report.endedBy, "Terminate")
      // Sent once (before the sequence is set up), named SIGTERM in the report: the signal that asks.
      assert.deepStrictEqual(report.signals, ["SIGTERM"])
    }).pipe(Effect.provide(supervised(stateDirectory))))

  it.live("awaitExit waits for the exit the watcher saw, the code or the signal as data", () =>
    Effect.gen(function*() {
      const coded = yield* ChildProcess.make("sh", ["-c", "exit 3"])
      assert.deepStrictEqual(yield* NodeSupervisedSpawner.awaitExit(coded), { exitCode: 3, signal: null })
      const signalled = yield* ChildProcess.make("sh", ["-c", "kill -USR1 $$"])
      assert.deepStrictEqual(yield* NodeSupervisedSpawner.awaitExit(signalled), { exitCode: null, signal: "SIGUSR1" })
      // Waiting again returns the same exit, without waiting.
      assert.deepStrictEqual(yield* NodeSupervisedSpawner.awaitExit(coded), { exitCode: 3, signal: null })
    }).pipe(Effect.scoped, Effect.provide(supervised(stateDirectory))))

  it.live("Effect's layer, same child, no forceKillAfter: the close has not finished 1.5 s later", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const handle = yield* ChildProcess.make(node, ["-e", stubborn]).pipe(Scope.provide(scope))
      yield* pids(handle, 1)
      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* Effect.sleep("1500 millis")
      const [pending, alive] = [closing.pollUnsafe() === undefined, isAlive(handle.pid)]
      // Ends the close, which would otherwise wait for the child forever.
      process.kill(handle.pid, "SIGKILL")
      yield* Fiber.join(closing)
      assert.isTrue(pending)
      assert.isTrue(alive)
    }).pipe(Effect.provide(effects)))

  it.live("a 3-deep tree that ignores SIGTERM is gone when the Scope closes", () =>
    Effect.gen(function*() {
      const tree = yield* Effect.scoped(Effect.gen(function*() {
        const handle = yield* ChildProcess.make(node, ["-e", parentOf(parentOf(stubborn))])
        return yield* pids(handle, 3)
      }))
      assert.strictEqual(tree.length, 3)
      // Zombies count as gone: the grandchildren's parents were killed, and this machine's init reaps them late.
      assert.deepStrictEqual(tree.filter(isAlive), [])
    }).pipe(Effect.provide(supervised(stateDirectory))))

  it.live("a zombie left in the group counts as exited: the close does not wait for it (Effect's layer waits 1 s)", () =>
    Effect.gen(function*() {
      /** Closes the Scope of a child that exits at once, leaving in its group a grandchild that is a zombie by then. */
      const closeWithZombie = Effect.gen(function*() {
        const scope = yield* Scope.make()
        const handle = yield* ChildProcess.make("sh", ["-c", "sleep 0.05 & exit 0"]).pipe(Scope.provide(scope))
        yield* handle.exitCode
        // The grandchild exits and, its parent gone, waits as a zombie for an init that reaps late.
        yield* Effect.sleep("300 millis")
        const zombie = zombiesIn(handle.pid) > 0
        const start = performance.now()
        yield* Scope.close(scope, Exit.void)
        return { zombie, elapsed: performance.now() - start }
      })
      const ours = yield* Effect.provide(closeWithZombie, supervised(stateDirectory))
      assert.isBelow(ours.elapsed, 200)
      const theirs = yield* Effect.provide(closeWithZombie, effects)
      // Only where the zombie was still there: an init that reaps at once leaves nothing to wait for.
      if (theirs.zombie) assert.isAbove(theirs.elapsed, 500)
    }))

  it.live("kill() of a child that has exited succeeds (Effect's layer fails it)", () =>
    Effect.gen(function*() {
      const ours = yield* Effect.scoped(Effect.gen(function*() {
        const handle = yield* ChildProcess.make("sh", ["-c", "exit 3"])
        yield* handle.exitCode
        return yield* Effect.exit(handle.kill())
      })).pipe(Effect.provide(supervised(stateDirectory)))
      assert.isTrue(Exit.isSuccess(ours))
      const theirs = yield* Effect.scoped(Effect.gen(function*() {
        const handle = yield* ChildProcess.make("sh", ["-c", "exit 3"])
        yield* handle.exitCode
        return yield* Effect.exit(handle.kill())
      })).pipe(Effect.provide(effects))
      assert.isTrue(Exit.isFailure(theirs))
    }))

  it.live("a child that cannot be recorded is killed at once, and its spawn fails", () =>
    Effect.gen(function*() {
      const memory = yield* Journal.makeMemory
      const failing: Journal.Journal.Service = {
        ...memory,
        begin: () => Effect.fail(new JournalError.JournalError({ reason: "Storage", detail: "disk full" }))
      }
      const word = `lifeline-unrecorded-${process.pid}`
      const error = yield* Effect.flip(
        ChildProcess.make(node, ["-e", "setInterval(() => {}, 1000)", word]).pipe(
          Effect.scoped,
          Effect.provide(NodeSupervisedSpawner.layerOptions({ journal: failing }).pipe(Layer.provideMerge(platform)))
        )
      )
      assert.include(error.message, "could not be recorded")
      yield* eventually(() => !runningWith(word), "the unrecorded child killed", 2000)
    }))

  it.live("every started child is in this process's journal file until its group is gone; unref'ed ones are not", () =>
    Effect.gen(function*() {
      const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-journal-"))
      const recorded = () =>
        Fs.readdirSync(directory).filter((name) => name.endsWith(".json")).flatMap((name) =>
          (JSON.parse(Fs.readFileSync(Path.join(directory, name), "utf8")) as {
            rows: Array<{ payload: string }>
          }).rows.map((row) => (JSON.parse(row.payload) as { pid: number }).pid)
        )
      yield* Effect.gen(function*() {
        // The file is written right after the spawn returns, not before (docs/supervising-effect-children.md).
        const recordedAs = (pids: Array<number>, what: string) =>
          eventually(() => JSON.stringify(recorded()) === JSON.stringify(pids), what, 1000)
        const handle = yield* ChildProcess.make("sleep", ["30"])
        yield* recordedAs([handle.pid], "the child recorded")
        yield* handle.unref
        yield* recordedAs([], "the unref'ed child no longer recorded")
        yield* handle.kill()
        const other = yield* ChildProcess.make("sleep", ["30"])
        yield* recordedAs([other.pid], "the other child recorded")
        yield* other.kill()
        yield* eventually(() => recorded().length === 0, "the record of a killed child closed", 2000)
      }).pipe(Effect.scoped, Effect.provide(supervised(directory)))
      // The layer's release removes a file with nothing left in it.
      assert.deepStrictEqual(Fs.readdirSync(directory), [])
      Fs.rmdirSync(directory)
    }))

  it.live("nodeStdout: what Effect's stream received before the take is in `buffered`, the rest on the Node stream", () =>
    Effect.gen(function*() {
      const handle = yield* ChildProcess.make(node, [
        "-e",
        "process.stdout.write('before\\n'); process.stdin.once('data', () => process.stdout.write('after\\n'))"
      ])
      // Effect's spawner pipes stdout into its own stream from the spawn on: the first line lands there unread.
      yield* Effect.sleep("300 millis")
      const taken = Option.getOrThrow(NodeSupervisedSpawner.nodeStdout(handle))
      assert.strictEqual(Buffer.concat(taken.buffered).toString(), "before\n")
      assert.isTrue(Option.isNone(NodeSupervisedSpawner.nodeStdout(handle)), "taken once")
      const rest: Array<Buffer> = []
      taken.stream.on("data", (chunk: Buffer) => rest.push(chunk))
      const ended = new Promise<void>((resolve) => taken.stream.once("end", resolve))
      const stdin = Option.getOrThrow(NodeSupervisedSpawner.nodeStdin(handle))
      stdin.end("go\n")
      yield* Effect.promise(() => ended)
      assert.strictEqual(Buffer.concat(rest).toString(), "after\n")
      // Effect's stream got nothing of it (read twice, a line would be delivered twice).
      const effects = yield* handle.stdout.pipe(Stream.runCollect, Effect.timeoutOption("200 millis"))
      assert.isTrue(Option.isNone(effects) || effects.value.length === 0)
    }).pipe(Effect.scoped, Effect.provide(supervised(stateDirectory))))

  it.live("a program that ends right after its child's Scope closes leaves no journal file (the end is written first)", () =>
    Effect.gen(function*() {
      const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-journal-"))
      for (let run = 0; run < 5; run++) {
        // The layer is released at once after the child's Scope: its end, written in the background after the stop,
        // must be in the file before the file is closed, or the record stays `InFlight` and the file lingers.
        yield* Effect.scoped(Effect.asVoid(ChildProcess.make("cat"))).pipe(Effect.provide(supervised(directory)))
        assert.deepStrictEqual(Fs.readdirSync(directory), [], `run ${run}`)
      }
      Fs.rmdirSync(directory)
    }))
})

layer(Fixtures.layer(["spawner-app"]), { excludeTestServices: true, timeout: "60 seconds" })("apps", (it) => {
  /**
   * A journal directory of the test's own (the apps inherit it through LIFELINE_SPAWNER_DIR), every process the apps
   * started killed at the end, and `start`: an app, with the pids of its children and grandchildren once its layer is
   * built (the sweep of dead owners is done by then).
   */
  const apps = Effect.gen(function*() {
    const programs = yield* Fixtures.Programs
    const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-apps-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(directory, { recursive: true, force: true })))
    const before = process.env.LIFELINE_SPAWNER_DIR
    // The apps inherit the test's environment.
    process.env.LIFELINE_SPAWNER_DIR = directory
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        if (before === undefined) delete process.env.LIFELINE_SPAWNER_DIR
        else process.env.LIFELINE_SPAWNER_DIR = before
      })
    )
    const everyone: Array<number> = []
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const pid of everyone) if (isAlive(pid)) process.kill(pid, "SIGKILL")
      })
    )
    const start = Effect.gen(function*() {
      const app = yield* spawnLines(node, programs.argv("spawner-app"), { cwd: process.cwd() })
      const children = yield* app.line(
        (line) => line.startsWith("{") ? (JSON.parse(line) as { pids: Array<number> }).pids : undefined,
        () => new Error(`the app exited: ${app.stderr()}`)
      ).pipe(Effect.timeout("20 seconds"))
      everyone.push(...children)
      return { app, children }
    })
    return { directory, start, everyone }
  })

  it.effect("two apps SIGKILLed, one restarted: only dead owners' children are swept, none left within 1 s", () =>
    Effect.gen(function*() {
      const { start, everyone } = yield* apps
      const first = yield* start
      const second = yield* start
      const bystander = yield* start
      assert.strictEqual(everyone.filter(isAlive).length, 12)
      for (const { app } of [first, second]) {
        app.child.kill("SIGKILL")
        yield* app.exited
      }
      // Their children run on, in process groups of their own: nothing stopped them.
      assert.strictEqual([...first.children, ...second.children].filter(isAlive).length, 8)

      const restarted = yield* start
      const orphans = [...first.children, ...second.children]
      const swept = performance.now()
      yield* eventually(() => orphans.every((pid) => !isAlive(pid)), "the dead owners' children swept", 1000)
      assert.isBelow(performance.now() - swept, 1000)
      // A live owner's children, and the restarted app's own, are left alone.
      assert.strictEqual(bystander.children.filter(isAlive).length, 4)
      assert.strictEqual(restarted.children.filter(isAlive).length, 4)
    }).pipe(Effect.scoped))

  it.effect("a dead owner's file without its claim (released, its ends not written) is swept too; an empty one goes", () =>
    Effect.gen(function*() {
      const { directory, start } = yield* apps
      const first = yield* start
      first.app.child.kill("SIGKILL")
      yield* first.app.exited
      // What a clean close leaves when its end records come after the file was closed: rows, no claim.
      const [file] = Fs.readdirSync(directory).filter((name) => name.endsWith(".json"))
      const content = JSON.parse(Fs.readFileSync(Path.join(directory, file), "utf8"))
      assert.isAbove(content.rows.length, 0)
      Fs.writeFileSync(Path.join(directory, file), JSON.stringify({ ...content, claims: [] }))
      Fs.writeFileSync(Path.join(directory, "1-1.json"), JSON.stringify({ rows: [], claims: [] }))

      yield* start
      yield* eventually(() => first.children.every((pid) => !isAlive(pid)), "the released owner's children swept", 5000)
      assert.isFalse(Fs.existsSync(Path.join(directory, file)))
      assert.isFalse(Fs.existsSync(Path.join(directory, "1-1.json")))
    }).pipe(Effect.scoped))
})
