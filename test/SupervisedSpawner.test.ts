/**
 * The behaviours that Effect's own tests check of its Node `ChildProcessSpawner` (Effect-TS/effect,
 * packages/platform-node-shared/test/NodeChildProcessSpawner.test.ts: spawning, stdio, pipelines, fds, kill, unref,
 * process groups), written anew and run against both layers: Effect's `NodeChildProcessSpawner.layer` and
 * `NodeSupervisedSpawner.layer`. Like Effect's tests they run under `it.effect` (a TestClock): a layer whose waits on a
 * real process ran on the fiber's Clock would hang here. SupervisedSpawnerGuarantees.test.ts has what differs.
 */
import { NodeChildProcessSpawner, NodeFileSystem, NodePath } from "@effect/platform-node"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { NodeSupervisedSpawner } from "@lifeline/node"
import { Effect, Exit, Layer, PlatformError, Schedule, Scope, Stream } from "effect"
import { ChildProcess, ChildProcessSpawner } from "effect/process"
import { TestClock } from "effect/testing"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { isAlive } from "./support/processes.js"

const node = process.execPath
const platform = Layer.mergeAll(NodeFileSystem.layer, NodePath.layer)
const stateDirectory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-spawner-"))
afterAll(() => Fs.rmSync(stateDirectory, { recursive: true, force: true }))

const layers = [
  ["Effect's NodeChildProcessSpawner.layer", NodeChildProcessSpawner.layer.pipe(Layer.provideMerge(platform))],
  [
    "NodeSupervisedSpawner.layer",
    NodeSupervisedSpawner.layerOptions({ directory: stateDirectory }).pipe(Layer.provideMerge(platform))
  ]
] as const

const text = (stream: Stream.Stream<Uint8Array, PlatformError.PlatformError>) =>
  Effect.map(Stream.mkString(Stream.decodeText(stream)), (s) => s.trim())

/** The live members of process group `pgid`, from /proc (zombies left out). */
const groupMembers = (pgid: number): Array<number> =>
  Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number).filter((pid) => {
    try {
      const stat = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      return Number(fields[2]) === pgid && fields[0] !== "Z" && fields[0] !== "X"
    } catch {
      return false
    }
  })

let markers = 0
/** An argument that names one process of this run, to find it in /proc. */
const marker = (name: string) => `lifeline-${name}-${process.pid}-${++markers}`

/** The live processes whose command line has `marker` as an argument. */
const pidsOf = (marker: string): Array<number> =>
  Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number).filter((pid) => {
    try {
      return Fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").includes(marker) && isAlive(pid)
    } catch {
      return false
    }
  })

const live = <A, E, R>(effect: Effect.Effect<A, E, R>) => TestClock.withLive(effect)
const sleep = (ms: number) => live(Effect.sleep(`${ms} millis`))
const until = (condition: () => boolean, timeoutMs = 3000) =>
  live(
    Effect.repeat(Effect.sync(condition), { while: (ok) => !ok, schedule: Schedule.spaced("10 millis") }).pipe(
      Effect.timeout(`${timeoutMs} millis`)
    )
  )

/** A node program that ignores SIGTERM and prints `up` once its handler is installed. */
const stubborn = (...extra: Array<string>) =>
  ChildProcess.make(node, [
    "-e",
    "process.on('SIGTERM', () => {}); console.log('up'); setInterval(() => {}, 1000)",
    ...extra
  ], { stderr: "ignore" })

const up = (handle: ChildProcessSpawner.ChildProcessHandle) => live(Stream.runHead(handle.stdout))

for (const [name, layer] of layers) {
  describe(name, () => {
    it.layer(layer, { timeout: 30_000 })((it) => {
      describe("spawning and output", () => {
        it.effect("collects stdout and the exit code", () =>
          Effect.gen(function*() {
            const handle = yield* ChildProcess.make("echo", ["hello", "world"])
            assert.strictEqual(yield* text(handle.stdout), "hello world")
            assert.strictEqual(yield* handle.exitCode, ChildProcessSpawner.ExitCode(0))
          }).pipe(Effect.scoped))

        it.effect("template literal, cwd, env with extendEnv", () =>
          Effect.gen(function*() {
            const word = "spawned"
            assert.strictEqual(yield* text((yield* ChildProcess.make`echo ${word}`).stdout), "spawned")
            assert.include(yield* text((yield* ChildProcess.make("pwd", [], { cwd: "/tmp" })).stdout), "tmp")
            const env = yield* ChildProcess.make("sh", ["-c", "echo $A-$B"], {
              env: { A: "1", B: "2" },
              extendEnv: true
            })
            assert.strictEqual(yield* text(env.stdout), "1-2")
          }).pipe(Effect.scoped))

        it.effect("no shell: $HOME is not expanded", () =>
          Effect.gen(function*() {
            const handle = yield* ChildProcess.make("echo", ["$HOME"], { shell: false })
            assert.strictEqual(yield* text(handle.stdout), "$HOME")
          }).pipe(Effect.scoped))

        it.effect("stderr, stdout and stderr read together, and `all` interleaved", () =>
          Effect.gen(function*() {
            const both = yield* ChildProcess.make("sh", ["-c", "echo out; echo err >&2"])
            const [out, err] = yield* Effect.all([text(both.stdout), text(both.stderr)], { concurrency: 2 })
            assert.deepStrictEqual([out, err], ["out", "err"])
            const all = yield* ChildProcess.make("sh", ["-c", "echo o1; sleep 0.1; echo e1 >&2; sleep 0.1; echo o2"])
            assert.strictEqual(yield* text(all.all), "o1\ne1\no2")
          }).pipe(Effect.scoped))

        it.effect("does not deadlock on large stdout", () =>
          Effect.gen(function*() {
            const handle = yield* ChildProcess.make("seq", ["1", "100000"])
            const output = yield* text(handle.stdout)
            assert.strictEqual(output.split("\n").length, 100000)
            assert.strictEqual(yield* handle.exitCode, ChildProcessSpawner.ExitCode(0))
          }).pipe(Effect.scoped))

        it.effect("stdin from a Stream", () =>
          Effect.gen(function*() {
            const handle = yield* ChildProcess.make("cat", { stdin: Stream.make(new TextEncoder().encode("a b c")) })
            assert.strictEqual(yield* text(handle.stdout), "a b c")
          }).pipe(Effect.scoped))
      })

      describe("errors", () => {
        it.effect("a non-zero exit code; an unknown program, a missing cwd and a non-executable file fail", () =>
          Effect.gen(function*() {
            assert.strictEqual(
              yield* (yield* ChildProcess.make("sh", ["-c", "exit 3"])).exitCode,
              ChildProcessSpawner.ExitCode(3)
            )
            const missing = yield* Effect.flip(ChildProcess.make("nonexistent-command-lifeline"))
            assert.strictEqual(missing._tag, "PlatformError")
            const cwd = yield* Effect.flip(ChildProcess.make("echo", [], { cwd: "/nonexistent/lifeline" }))
            assert.strictEqual(cwd._tag, "PlatformError")
            const script = Path.join(stateDirectory, "not-executable.sh")
            Fs.writeFileSync(script, "#!/bin/sh\necho no\n", { mode: 0o644 })
            const denied = yield* Effect.flip(ChildProcess.make(script))
            assert.strictEqual(denied.reason._tag, "PermissionDenied")
          }).pipe(Effect.scoped))
      })

      describe("pipelines", () => {
        it.effect("two and three stages, from stderr, from all, into fd3", () =>
          Effect.gen(function*() {
            const two = yield* ChildProcess.make`echo hello world`.pipe(
              ChildProcess.pipeTo(ChildProcess.make`tr a-z A-Z`)
            )
            assert.strictEqual(yield* text(two.stdout), "HELLO WORLD")
            assert.strictEqual(yield* two.exitCode, ChildProcessSpawner.ExitCode(0))
            const three = yield* ChildProcess.make`echo hello world`.pipe(
              ChildProcess.pipeTo(ChildProcess.make`tr a-z A-Z`),
              ChildProcess.pipeTo(ChildProcess.make("tr", [" ", "-"]))
            )
            assert.strictEqual(yield* text(three.stdout), "HELLO-WORLD")
            const stderr = yield* ChildProcess.make("sh", ["-c", "echo out; echo error >&2"]).pipe(
              ChildProcess.pipeTo(ChildProcess.make`cat`, { from: "stderr" })
            )
            assert.strictEqual(yield* text(stderr.stdout), "error")
            const all = yield* ChildProcess.make("sh", ["-c", "echo o1; sleep 0.1; echo e1 >&2"]).pipe(
              ChildProcess.pipeTo(ChildProcess.make`cat`, { from: "all" })
            )
            assert.strictEqual(yield* text(all.stdout), "o1\ne1")
            const fd3 = yield* ChildProcess.make`echo via-fd3`.pipe(
              ChildProcess.pipeTo(ChildProcess.make("sh", ["-c", "cat <&3"]), { to: "fd3" })
            )
            assert.strictEqual(yield* text(fd3.stdout), "via-fd3")
          }).pipe(Effect.scoped))

        it.effect("kills every process in a pipeline when its Scope closes", () =>
          Effect.gen(function*() {
            const [first, second] = [marker("pipe-first"), marker("pipe-second")]
            yield* Effect.gen(function*() {
              yield* ChildProcess.make(node, ["-e", "setInterval(() => {}, 1000)", first]).pipe(
                ChildProcess.pipeTo(ChildProcess.make(node, ["-e", "setInterval(() => {}, 1000)", second]))
              )
              yield* until(() => pidsOf(first).length === 1 && pidsOf(second).length === 1)
            }).pipe(Effect.scoped)
            yield* until(() => pidsOf(first).length === 0 && pidsOf(second).length === 0)
          }))
      })

      describe("additional fds", () => {
        it.effect("output fds (with a gap), an input fd, an unconfigured fd is empty", () =>
          Effect.gen(function*() {
            const out = yield* ChildProcess.make("sh", ["-c", "echo three >&3; echo five >&5; echo out"], {
              additionalFds: { fd3: { type: "output" }, fd5: { type: "output" } }
            })
            const [three, five, stdout] = yield* Effect.all(
              [text(out.getOutputFd(3)), text(out.getOutputFd(5)), text(out.stdout)],
              { concurrency: 3 }
            )
            assert.deepStrictEqual([three, five, stdout], ["three", "five", "out"])
            assert.strictEqual(yield* text(out.getOutputFd(4)), "")
            const input = yield* ChildProcess.make("sh", ["-c", "cat <&3 | tr a-z A-Z >&4"], {
              additionalFds: {
                fd3: { type: "input", stream: Stream.make(new TextEncoder().encode("hello")) },
                fd4: { type: "output" }
              }
            })
            assert.strictEqual(yield* text(input.getOutputFd(4)), "HELLO")
            assert.strictEqual(yield* input.exitCode, ChildProcessSpawner.ExitCode(0))
          }).pipe(Effect.scoped))
      })

      describe("process control", () => {
        it.effect("kill: exitCode fails with a PlatformError; isRunning is false after it", () =>
          Effect.gen(function*() {
            const handle = yield* ChildProcess.make("sleep", ["10"])
            assert.isTrue(yield* handle.isRunning)
            yield* handle.kill()
            assert.isFalse(yield* handle.isRunning)
            const error = yield* Effect.flip(handle.exitCode)
            assert.isTrue(PlatformError.isPlatformError(error))
            // The signal is named, inside the error under it.
            assert.include(String(error.reason.cause), "SIGTERM")
            const killed = yield* ChildProcess.make("sleep", ["10"])
            yield* killed.kill({ killSignal: "SIGKILL" })
            assert.isTrue(Exit.isFailure(yield* Effect.exit(killed.exitCode)))
          }).pipe(Effect.scoped))

        it.effect("kill with forceKillAfter ends a child that ignores SIGTERM, within real time", () =>
          Effect.gen(function*() {
            const handle = yield* stubborn()
            yield* up(handle)
            const done = yield* handle.kill({ forceKillAfter: "50 millis" }).pipe(
              Effect.as(true),
              Effect.timeoutOrElse({ duration: "2 seconds", orElse: () => Effect.succeed(false) }),
              live
            )
            assert.isTrue(done)
            assert.isFalse(isAlive(handle.pid))
          }).pipe(Effect.scoped))

        it.effect("a Scope with forceKillAfter closes on a child that ignores SIGTERM", () =>
          Effect.gen(function*() {
            let pid = 0
            const closed = yield* Effect.gen(function*() {
              const handle = yield* ChildProcess.make(node, [
                "-e",
                "process.on('SIGTERM', () => {}); console.log('up'); setInterval(() => {}, 1000)"
              ], { forceKillAfter: "50 millis" })
              pid = handle.pid
              yield* Stream.runHead(handle.stdout)
            }).pipe(
              Effect.scoped,
              Effect.as(true),
              Effect.timeoutOrElse({ duration: "2 seconds", orElse: () => Effect.succeed(false) }),
              live
            )
            assert.isTrue(closed)
            assert.isFalse(isAlive(pid))
          }))

        it.effect("kill reaches every process of the group: children and grandchildren", () =>
          Effect.gen(function*() {
            const handle = yield* ChildProcess.make("sh", [
              "-c",
              "for i in 1 2 3; do sh -c 'sleep 30 & sleep 30; wait' & done; echo up; wait"
            ])
            yield* up(handle)
            yield* until(() => groupMembers(handle.pid).length >= 7)
            const members = groupMembers(handle.pid)
            yield* handle.kill()
            assert.isFalse(yield* handle.isRunning)
            yield* until(() => members.every((pid) => !isAlive(pid)))
          }).pipe(Effect.scoped))

        it.effect("descendants of a child that exits non-zero are stopped with its Scope", () =>
          Effect.gen(function*() {
            let members: Array<number> = []
            const code = yield* Effect.gen(function*() {
              const handle = yield* ChildProcess.make("sh", ["-c", "sleep 30 & sleep 30 & echo up; sleep 0.2; exit 1"])
              yield* up(handle)
              members = groupMembers(handle.pid)
              return yield* handle.exitCode
            }).pipe(Effect.scoped)
            assert.strictEqual(code, ChildProcessSpawner.ExitCode(1))
            assert.isAbove(members.length, 1)
            yield* until(() => members.every((pid) => !isAlive(pid)))
          }))
      })

      describe("unref", () => {
        it.effect("an unref'ed child outlives its Scope; re-ref'ed, it does not", () =>
          Effect.gen(function*() {
            const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
            const long = ChildProcess.make(node, ["-e", "setTimeout(() => {}, 30000)"], {
              stdin: "ignore",
              stdout: "ignore",
              stderr: "ignore"
            })
            const scope = yield* Scope.make()
            const kept = yield* spawner.spawn(long).pipe(Scope.provide(scope))
            yield* kept.unref.pipe(Scope.provide(scope))
            yield* Scope.close(scope, Exit.void)
            yield* sleep(100)
            assert.isTrue(yield* kept.isRunning)
            yield* kept.kill({ killSignal: "SIGKILL" })

            const again = yield* Scope.make()
            const restored = yield* spawner.spawn(long).pipe(Scope.provide(again))
            const reref = yield* restored.unref.pipe(Scope.provide(again))
            yield* reref
            yield* Scope.close(again, Exit.void)
            yield* until(() => !isAlive(restored.pid))
          }))

        it.effect("the exit code of an unref'ed child resolves after its Scope closed", () =>
          Effect.gen(function*() {
            const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
            const scope = yield* Scope.make()
            const handle = yield* spawner.spawn(
              ChildProcess.make(node, ["-e", "setTimeout(() => process.exit(0), 50)"], { stdout: "ignore" })
            ).pipe(Scope.provide(scope))
            yield* handle.unref.pipe(Scope.provide(scope))
            yield* Scope.close(scope, Exit.void)
            assert.strictEqual(yield* live(handle.exitCode), ChildProcessSpawner.ExitCode(0))
          }))

        it.effect("unref reaches every process in a pipeline", () =>
          Effect.gen(function*() {
            const spawner = yield* ChildProcessSpawner.ChildProcessSpawner
            const [first, second] = [marker("unref-first"), marker("unref-second")]
            const scope = yield* Scope.make()
            const handle = yield* spawner.spawn(
              ChildProcess.make(node, ["-e", "setTimeout(() => {}, 30000)", first], { stderr: "ignore" }).pipe(
                ChildProcess.pipeTo(ChildProcess.make(node, ["-e", "setTimeout(() => {}, 30000)", second]))
              )
            ).pipe(Scope.provide(scope))
            yield* until(() => pidsOf(first).length === 1 && pidsOf(second).length === 1)
            yield* handle.unref.pipe(Scope.provide(scope))
            yield* Scope.close(scope, Exit.void)
            yield* sleep(100)
            const left = [...pidsOf(first), ...pidsOf(second)]
            for (const pid of left) process.kill(pid, "SIGKILL")
            assert.strictEqual(left.length, 2)
          }))
      })
    })
  })
}
