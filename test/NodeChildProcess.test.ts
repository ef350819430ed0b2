import { assert, layer } from "@effect/vitest"
import { Journal, JournalError, ProcessRecord } from "@lifeline/journal"
import { Connection, Lifecycle, Method, Protocol, ShutdownPolicy } from "@lifeline/kernel"
import { NodeChildProcess } from "@lifeline/node"
import { SqliteJournal } from "@lifeline/sqlite"
import { TestTransport } from "@lifeline/testing"
import { Context, Effect, Exit, Fiber, Layer, Option, Schedule, Schema, Scope } from "effect"
import { ChildProcess } from "effect/process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Client, Echo, Log, Pid, Shutdown, Sleep } from "./fixtures/protocol.js"
import * as Fixtures from "./support/fixtures.js"
import { awaitGone, eventually, isAlive } from "./support/processes.js"

// A generic client for the fixtures written without Lifeline: they answer whatever they are asked, or nothing.
const Anything = Method.request("anything", {
  params: Schema.Struct({ text: Schema.String }),
  result: Schema.Unknown
})
const Generic = Protocol.make({ calls: [Anything] })

/** Tight bounds, so that the escalation tests are quick; each test checks the bound it depends on. */
const quick = { exitTimeout: "300 millis", terminateTimeout: "300 millis", killTimeout: "1 second" } as const

const elapsedSince = (start: number) => performance.now() - start

/** Waits until the child has said (on stderr) that its signal handlers are in place. */
const awaitReady = (child: NodeChildProcess.Child) =>
  Effect.gen(function*() {
    const start = performance.now()
    while (!(yield* child.stderrTail).some((line) => line.startsWith("ready"))) {
      if (elapsedSince(start) > 10_000) return yield* Effect.die(new Error(`${child.name} never said it was ready`))
      yield* Effect.sleep("5 millis")
    }
  })

layer(Fixtures.layer(["server"]), { excludeTestServices: true, timeout: "60 seconds" })(
  "NodeChildProcess with real processes",
  (it) => {
    it.effect("a child that answers: calls succeed, the stop asks it to shut down, it exits by itself", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const { child, peer } = yield* NodeChildProcess.makePeer({
          command: yield* Fixtures.command("server"),
          name: "server",
          protocol: Client,
          handlers: {},
          shutdown: (peer) => peer.call(Shutdown, {})
        }).pipe(Scope.provide(scope))
        assert.strictEqual(yield* peer.call(Echo, { text: "hello" }), "hello")
        assert.strictEqual(yield* peer.call(Pid, {}), child.pid)
        // User code in the child prints to stdout: the frame still arrives whole, the text goes to stderr.
        assert.strictEqual(yield* peer.call(Log, { text: "stray console.log" }), "stray console.log")
        const start = performance.now()
        const report = yield* child.stop
        yield* Scope.close(scope, Exit.void)
        assert.strictEqual(report.shutdown, "Completed")
        assert.strictEqual(report.endedBy, "EndOfInput")
        assert.deepStrictEqual(report.exit, { exitCode: 0, signal: null })
        assert.isBelow(elapsedSince(start), 1000 + 500, "it exits within exitTimeout of the end of its stdin")
        const tail = yield* child.stderrTail
        assert.isTrue(tail.includes("stray console.log"), "the stray output went to stderr")
        assert.isTrue(tail.some((line) => line.includes("finalized")), "the child's finalizers ran")
        assert.isFalse(isAlive(child.pid))
      }))

    it.effect("a child that exits mid-request: the pending call fails at once with PeerExited", () =>
      Effect.gen(function*() {
        const { child, peer } = yield* NodeChildProcess.makePeer({
          command: yield* Fixtures.command("exit-mid-request.mjs"),
          protocol: Generic,
          handlers: {},
          requestTimeout: "30 seconds"
        })
        yield* awaitReady(child)
        const start = performance.now()
        const error = yield* Effect.flip(peer.call(Anything, { text: "work" }))
        assert.isBelow(elapsedSince(start), 2000)
        assert.strictEqual(error._tag, "PeerExited")
        if (error._tag !== "PeerExited") return
        assert.strictEqual(error.exitCode, 3)
        assert.isNull(error.signal)
        assert.include(error.stderrTail, "cannot serve anything: giving up")
        assert.strictEqual((yield* Effect.flip(peer.call(Anything, { text: "again" })))._tag, "PeerExited")
        const report = yield* child.stop
        assert.strictEqual(report.endedBy, "Exited")
        assert.isFalse(isAlive(child.pid))
      }))

    it.effect("a child that never answers: the call times out; the stop ends it with SIGTERM within the bound", () =>
      Effect.gen(function*() {
        const { child, peer } = yield* NodeChildProcess.makePeer({
          command: yield* Fixtures.command("silent.mjs"),
          protocol: Generic,
          handlers: {},
          stop: quick
        })
        yield* awaitReady(child)
        const error = yield* Effect.flip(peer.call(Anything, { text: "hello?" }, { timeout: "200 millis" }))
        assert.strictEqual(error._tag, "RequestTimeout")
        const pending = yield* Effect.forkChild(Effect.flip(peer.call(Anything, { text: "still there?" })))
        const start = performance.now()
        const report = yield* child.stop
        const elapsed = elapsedSince(start)
        assert.strictEqual(report.endedBy, "Terminate")
        assert.deepStrictEqual(report.exit, { exitCode: null, signal: "SIGTERM" })
        assert.isAtLeast(elapsed, 300 - 20)
        assert.isBelow(elapsed, 300 + 300 + 500)
        assert.strictEqual((yield* Fiber.await(pending).pipe(Effect.flatten))._tag, "ShutdownError")
        assert.isFalse(isAlive(child.pid))
      }))

    it.effect("a child that ignores SIGTERM is killed by SIGKILL within the bound", () =>
      Effect.gen(function*() {
        const child = yield* NodeChildProcess.make({
          command: yield* Fixtures.command("ignore-sigterm.mjs"),
          stop: quick
        })
        yield* awaitReady(child)
        const start = performance.now()
        const report = yield* child.stop
        const elapsed = elapsedSince(start)
        assert.strictEqual(report.endedBy, "Kill")
        assert.deepStrictEqual(report.exit, { exitCode: null, signal: "SIGKILL" })
        assert.isAtLeast(elapsed, 600 - 20)
        assert.isBelow(elapsed, 600 + 1000 + 500)
        assert.include(yield* child.stderrTail, "SIGTERM ignored")
        assert.isFalse(isAlive(child.pid))
      }))

    it.effect("no answer to the protocol shutdown: SIGKILL right after shutdownTimeout (Hermes)", () =>
      Effect.gen(function*() {
        const { child } = yield* NodeChildProcess.makePeer({
          command: yield* Fixtures.command("ignore-sigterm.mjs"),
          protocol: Generic,
          handlers: {},
          stop: { ...quick, shutdownTimeout: "500 millis" },
          shutdown: (peer) => peer.call(Anything, { text: "shutdown" })
        })
        yield* awaitReady(child)
        const start = performance.now()
        const report = yield* child.stop
        const elapsed = elapsedSince(start)
        assert.strictEqual(report.shutdown, "TimedOut")
        assert.strictEqual(report.endedBy, "Kill")
        assert.notInclude(yield* child.stderrTail, "SIGTERM ignored", "no SIGTERM was sent")
        assert.isAtLeast(elapsed, 500 - 20)
        assert.isBelow(elapsed, 500 + 1000 + 500)
        assert.isFalse(isAlive(child.pid))
      }))

    it.effect("a child that writes garbage: skippable noise is skipped, a broken header fails the call", () =>
      Effect.gen(function*() {
        const { child, peer } = yield* NodeChildProcess.makePeer({
          command: yield* Fixtures.command("garbage.mjs"),
          protocol: Generic,
          handlers: {},
          requestTimeout: "30 seconds",
          stop: quick
        })
        yield* awaitReady(child)
        assert.strictEqual(yield* peer.call(Anything, { text: "first" }), "first")
        const error = yield* Effect.flip(peer.call(Anything, { text: "second" }))
        assert.strictEqual(error._tag, "PeerClosed")
        if (error._tag === "PeerClosed") assert.strictEqual(error.reason, "TransportFailed")
        const report = yield* child.stop
        assert.strictEqual(report.endedBy, "EndOfInput")
        assert.isFalse(isAlive(child.pid))
      }))

    it.effect("a child that spawned a grandchild (which ignores SIGTERM) leaves nothing behind", () =>
      Effect.gen(function*() {
        const { child, peer } = yield* NodeChildProcess.makePeer({
          command: yield* Fixtures.command("grandchild.mjs"),
          protocol: Generic,
          handlers: {},
          stop: quick
        })
        yield* awaitReady(child)
        const { grandchild } = (yield* peer.call(Anything, { text: "spawn" })) as { readonly grandchild: number }
        yield* eventually(() => isAlive(grandchild), "the grandchild runs")
        // It says so once its SIGTERM handler is in place.
        while (!(yield* child.stderrTail).includes("grandchild up")) yield* Effect.sleep("5 millis")
        const start = performance.now()
        const report = yield* child.stop
        const elapsed = elapsedSince(start)
        // The child exits at the end of its stdin; the grandchild is still in its process group and ignores SIGTERM.
        assert.strictEqual(report.endedBy, "EndOfInput")
        assert.strictEqual(report.descendants, "Killed")
        assert.isBelow(elapsed, 300 + 300 + 1000 + 500)
        assert.isFalse(isAlive(child.pid))
        assert.isFalse(isAlive(grandchild))
      }))

    it.effect("closing the Scope stops the child; finalizers on both sides ran", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        let hostFinalizerRan = false
        yield* Effect.addFinalizer(() => Effect.sync(() => (hostFinalizerRan = true))).pipe(Scope.provide(scope))
        const { child, peer } = yield* NodeChildProcess.makePeer({
          command: yield* Fixtures.command("server"),
          protocol: Client,
          handlers: {},
          requestTimeout: "30 seconds"
        }).pipe(Scope.provide(scope))
        const sleeping = yield* Effect.forkChild(Effect.flip(peer.call(Sleep, { ms: 60_000 })))
        yield* Effect.sleep("50 millis")
        const start = performance.now()
        yield* Scope.close(scope, Exit.void)
        assert.isBelow(elapsedSince(start), 1000 + 500)
        assert.isTrue(hostFinalizerRan)
        assert.strictEqual((yield* Fiber.await(sleeping).pipe(Effect.flatten))._tag, "ShutdownError")
        assert.deepStrictEqual(yield* child.exit, { exitCode: 0, signal: null })
        assert.isTrue((yield* child.stderrTail).some((line) => line.includes("finalized")))
        yield* awaitGone(child.pid, 1000)
      }))

    it.effect("makeConnection: the handshake makes it Ready; a clean stop ends in Closed", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const { child, connection } = yield* NodeChildProcess.makeConnection({
          command: yield* Fixtures.command("server"),
          protocol: Client,
          handlers: {},
          handshake: Connection.initiate((peer) => peer.call(Pid, {})),
          policy: ShutdownPolicy.drain("2 seconds"),
          shutdown: (connection) => connection.peer.call(Shutdown, {})
        }).pipe(Scope.provide(scope))
        assert.strictEqual((yield* connection.lifecycle.state)._tag, "Ready")
        const report = yield* child.stop
        assert.strictEqual(report.shutdown, "Completed")
        assert.strictEqual(report.endedBy, "EndOfInput")
        assert.strictEqual((yield* connection.awaitShutdown).policy._tag, "Drain")
        assert.strictEqual((yield* connection.lifecycle.state)._tag, "Closed")
        yield* Scope.close(scope, Exit.void)
      }))

    it.effect("layerConnection: the connection as a service; childOf gives its pid and stop; the release stops it", () =>
      Effect.gen(function*() {
        class ServerConnection extends Connection.Service<ServerConnection>()("test/ServerConnection", {
          protocol: Client
        }) {}
        const live = NodeChildProcess.layerConnection(ServerConnection, {
          command: yield* Fixtures.command("server"),
          protocol: Client,
          handlers: {},
          policy: ShutdownPolicy.drain("2 seconds"),
          shutdown: (connection) => connection.peer.call(Shutdown, {})
        })
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(live, scope)
        const connection = Context.get(context, ServerConnection)
        const child = NodeChildProcess.childOf(connection)!
        assert.strictEqual(yield* connection.peer.call(Pid, {}), child.child.pid)
        assert.isTrue(isAlive(child.child.pid))
        assert.isUndefined(NodeChildProcess.childOf(
          yield* Connection.make({
            protocol: Client,
            transport: (yield* TestTransport.makePair()).left,
            handlers: {}
          })
        ))
        yield* Scope.close(scope, Exit.void) // the layer's release: the child's one stop
        const report = yield* child.stop // the same report, not a second stop
        assert.strictEqual(report.shutdown, "Completed")
        assert.strictEqual((yield* connection.lifecycle.state)._tag, "Closed")
        yield* awaitGone(child.child.pid, 5000)
      }))

    it.effect("makeConnection: a child that dies on its own moves the lifecycle to Failed with PeerExited", () =>
      Effect.gen(function*() {
        const { child, connection } = yield* NodeChildProcess.makeConnection({
          command: yield* Fixtures.command("exit-mid-request.mjs"),
          protocol: Generic,
          handlers: {},
          requestTimeout: "30 seconds"
        })
        yield* awaitReady(child)
        const error = yield* Effect.flip(connection.peer.call(Anything, { text: "work" }))
        assert.strictEqual(error._tag, "PeerExited")
        const state = yield* connection.lifecycle.awaitState(Lifecycle.isTerminal)
        assert.strictEqual(state._tag, "Failed")
        if (state._tag === "Failed") assert.strictEqual(state.error._tag, "PeerExited")
      }))

    it.effect("a program that does not exist fails with SpawnError NotFound; a bad directory with BadDirectory", () =>
      Effect.gen(function*() {
        const missing = yield* Effect.flip(
          NodeChildProcess.make({ command: ChildProcess.make("/nonexistent/lifeline-no-such-program") })
        )
        assert.strictEqual(missing._tag, "SpawnError")
        assert.strictEqual(missing.reason, "NotFound")
        const badDir = yield* Effect.flip(
          NodeChildProcess.make({
            command: ChildProcess.make(process.execPath, ["-e", "0"], { cwd: "/nonexistent-dir" })
          })
        )
        assert.strictEqual(badDir.reason, "BadDirectory")
      }))

    it.effect("with a journal: the child is InFlight in it while it runs, Completed with its exit after", () =>
      Effect.gen(function*() {
        const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-recorded-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(directory, { recursive: true, force: true })))
        const journal = yield* SqliteJournal.makeFile({ filename: Path.join(directory, "journal.db") })
        const processEntries = Effect.map(
          journal.unfinished(),
          (entries) => entries.filter((entry) => entry.kind === ProcessRecord.kind)
        )

        // stopped by the Scope: the stop sequence's shutdown step, then the end of its input
        const scope = yield* Scope.make()
        const { child, peer } = yield* NodeChildProcess.makePeer({
          command: yield* Fixtures.command("server"),
          protocol: Client,
          handlers: {},
          shutdown: (peer) => peer.call(Shutdown, {}),
          journal
        }).pipe(Scope.provide(scope))
        assert.strictEqual(yield* peer.call(Pid, {}), child.pid)
        const [running] = yield* processEntries
        assert.strictEqual(running.status, "InFlight")
        const info = running.payload as ProcessRecord.ProcessInfo
        assert.strictEqual(info.pid, child.pid)
        assert.strictEqual(info.command[0], process.execPath)
        assert.isBelow(Math.abs(info.startedAt - Date.now()), 10_000)
        yield* Scope.close(scope, Exit.void)
        const stopped = Option.getOrThrow(yield* journal.get(running.key))
        assert.deepStrictEqual([stopped.status, stopped.result], ["Completed", { exitCode: 0, signal: null }])

        // killed from outside while the Scope is still open: recorded when it exits
        const killed = yield* NodeChildProcess.make({
          command: ChildProcess.make(process.execPath, ["-e", "setInterval(() => {}, 1000)"]),
          journal
        })
        const [alive] = yield* processEntries
        assert.strictEqual((alive.payload as ProcessRecord.ProcessInfo).pid, killed.pid)
        yield* killed.kill("SIGKILL")
        yield* killed.exit
        // recorded by a watcher, a moment after the exit
        const ended = yield* journal.get(alive.key).pipe(
          Effect.map(Option.getOrThrow),
          Effect.filterOrFail((entry) => entry.status !== "InFlight"),
          Effect.retry({ schedule: Schedule.spaced("10 millis"), times: 200 })
        )
        assert.deepStrictEqual([ended.status, ended.result], ["Completed", { exitCode: null, signal: "SIGKILL" }])
        assert.deepStrictEqual(yield* processEntries, [])
        assert.deepStrictEqual(yield* journal.running, [])
      }))

    it.effect("with a journal that cannot record, the spawn fails with SpawnError Unrecorded", () =>
      Effect.gen(function*() {
        const memory = yield* Journal.makeMemory
        const journal: Journal.Journal.Service = {
          ...memory,
          begin: () => Effect.fail(new JournalError.JournalError({ reason: "Storage", detail: "disk full" }))
        }
        // A marker in its argv finds the child in /proc: the failed spawn has no pid to give.
        const marker = `unrecorded-${process.pid}-${Date.now()}`
        const error = yield* Effect.flip(
          NodeChildProcess.make({
            command: ChildProcess.make(process.execPath, ["-e", "setInterval(() => {}, 1000)", marker]),
            journal
          })
        )
        assert.strictEqual(error.reason, "Unrecorded")
        assert.match(error.detail, /disk full/)
        assert.instanceOf(error.cause, JournalError.JournalError)
        const running = () =>
          Fs.readdirSync("/proc").filter((entry) => {
            if (!/^\d+$/.test(entry)) return false
            try {
              return Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").includes(marker) &&
                isAlive(Number(entry))
            } catch {
              return false
            }
          })
        // Killed at once, not left to run: no process with the marker remains.
        if (process.platform === "linux") yield* eventually(() => running().length === 0, "the child is gone", 5000)
      }))

    it.effect("arguments, environment and working directory reach the child", () =>
      Effect.gen(function*() {
        const child = yield* NodeChildProcess.make({
          command: ChildProcess.make(
            process.execPath,
            [
              "-e",
              "process.stderr.write([process.argv[1], process.env.LIFELINE_TEST, process.cwd()].join('|') + '\\n')",
              "an argument"
            ],
            { env: { LIFELINE_TEST: "from the host" }, extendEnv: true, cwd: "/tmp" }
          )
        })
        yield* child.exit
        const tail = yield* child.exited.pipe(Effect.map((error) => error.stderrTail))
        assert.deepStrictEqual(tail, ["an argument|from the host|/tmp"])
      }))

    it.effect("a child keeps its own policy: the host's policy variables reach it only when the command names them", () =>
      Effect.gen(function*() {
        const saved = { ...process.env }
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            for (
              const name of [
                ShutdownPolicy.POLICY_VARIABLE,
                ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE,
                "LIFELINE_INHERITED"
              ]
            ) {
              if (saved[name] === undefined) delete process.env[name]
              else process.env[name] = saved[name]
            }
          })
        )
        process.env[ShutdownPolicy.POLICY_VARIABLE] = "drain"
        process.env[ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE] = "1 second"
        process.env.LIFELINE_INHERITED = "yes"
        const seen = (options: ChildProcess.CommandOptions) =>
          Effect.gen(function*() {
            const child = yield* NodeChildProcess.make({
              command: ChildProcess.make(process.execPath, [
                "-e",
                `const e = process.env; process.stderr.write([e.${ShutdownPolicy.POLICY_VARIABLE}, ` +
                `e.${ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE}, e.LIFELINE_INHERITED].map(String).join('|') + '\\n')`
              ], options)
            })
            yield* child.exit
            return (yield* child.exited).stderrTail
          }).pipe(Effect.scoped)
        // The host's environment, less its own policy.
        assert.deepStrictEqual(yield* seen({}), ["undefined|undefined|yes"])
        assert.deepStrictEqual(yield* seen({ env: { OTHER: "x" }, extendEnv: true }), ["undefined|undefined|yes"])
        // Named by the caller (as hermes-host does from --drain-timeout): passed on.
        assert.deepStrictEqual(
          yield* seen({ env: { [ShutdownPolicy.POLICY_VARIABLE]: "fail-fast" }, extendEnv: true }),
          ["fail-fast|undefined|yes"]
        )
        assert.deepStrictEqual(
          yield* seen({ env: { [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: "2 seconds" } }),
          ["undefined|2 seconds|undefined"]
        )
      }))
  }
)
