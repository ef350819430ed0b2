import { assert, layer } from "@effect/vitest"
import { Framing, Message } from "@lifeline/jsonrpc"
import { ShutdownPolicy } from "@lifeline/kernel"
import type { Transport } from "@lifeline/kernel"
import { NodeChildProcess, NodeSignals } from "@lifeline/node"
import { Deferred, Effect, Exit, Fiber, Result, Stream } from "effect"
import { ChildProcess as Command } from "effect/process"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Fixtures from "./support/fixtures.js"
import { isAlive } from "./support/processes.js"

const elapsedSince = (start: number) => performance.now() - start

/** Sends raw requests and collects the bodies of the frames that come back, counting bytes outside any frame. */
const rawClient = (transport: Transport.Transport.Service) =>
  Effect.gen(function*() {
    const decoder = Framing.contentLength.unsafeMakeDecoder()
    const bodies: Array<unknown> = []
    const answered = new Map<number, Deferred.Deferred<unknown>>()
    yield* transport.incoming.pipe(
      Stream.runForEach((chunk) =>
        Effect.forEach(decoder.push(chunk).frames, (frame) => {
          const body = JSON.parse(new TextDecoder().decode(frame)) as {
            readonly id?: number
            readonly result?: unknown
          }
          bodies.push(body)
          const waiter = body.id === undefined ? undefined : answered.get(body.id)
          return waiter === undefined ? Effect.void : Deferred.succeed(waiter, body.result)
        })
      ),
      Effect.forkScoped
    )
    let nextId = 1
    const call = (method: string, params: Message.Params) =>
      Effect.gen(function*() {
        const id = nextId++
        const waiter = yield* Deferred.make<unknown>()
        answered.set(id, waiter)
        const json = Message.stringify(Message.request(id, method, params))
        if (Result.isFailure(json)) return yield* Effect.die(json.failure)
        yield* transport.send([Framing.contentLength.encodeString(json.success)])
        return yield* Deferred.await(waiter)
      })
    return { call, bodies, skippedBytes: () => decoder.skippedBytes() }
  })

/** Waits until the child's stderr says it is ready: its signal handlers are in place from then on. */
const awaitReady = (child: NodeChildProcess.Child) =>
  Effect.gen(function*() {
    const start = performance.now()
    while (!(yield* child.stderrTail).some((line) => line.includes("ready"))) {
      if (elapsedSince(start) > 15_000) return yield* Effect.die(new Error(`${child.name} never said it was ready`))
      yield* Effect.sleep("5 millis")
    }
  })

const server = (env: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const command = yield* Fixtures.command("server")
    const child = yield* NodeChildProcess.make({ command: Command.setEnv(command, env), name: "server" })
    const client = yield* rawClient(child.transport)
    yield* awaitReady(child)
    return { child, client }
  })

layer(Fixtures.layer(["server"]), { excludeTestServices: true, timeout: "60 seconds" })(
  "NodeStdio and NodeSignals.runMain in a real child",
  (it) => {
    it.effect("stdout carries frames only: user code's console.log goes to stderr, no byte outside a frame", () =>
      Effect.gen(function*() {
        const { child, client } = yield* server()
        assert.strictEqual(yield* client.call("log", { text: "printed by user code" }), "printed by user code")
        assert.strictEqual(yield* client.call("echo", { text: "after" }), "after")
        assert.strictEqual(client.skippedBytes(), 0)
        assert.include(yield* child.stderrTail, "printed by user code")
      }))

    it.effect("the end of stdin stops the child under its policy: finalizers run, it exits 0 by itself", () =>
      Effect.gen(function*() {
        const { child, client } = yield* server()
        assert.strictEqual(yield* client.call("pid", {}), child.pid)
        const start = performance.now()
        yield* child.transport.end
        const exit = yield* child.exit
        const elapsed = elapsedSince(start)
        assert.deepStrictEqual(exit, { exitCode: NodeSignals.ExitCode.Success, signal: null })
        assert.isBelow(elapsed, 1000)
        yield* Effect.logInfo(`stdin EOF → exit: ${elapsed.toFixed(0)} ms`)
        const tail = yield* child.stderrTail
        assert.isTrue(tail.some((line) => line.includes("connection closed: PeerClosed")))
        assert.isTrue(tail.some((line) => line.includes("finalized")))
      }))

    it.effect("SIGTERM: a graceful stop with every finalizer, exit code 143", () =>
      Effect.gen(function*() {
        const { child } = yield* server()
        process.kill(child.pid, "SIGTERM")
        assert.deepStrictEqual(yield* child.exit, { exitCode: NodeSignals.ExitCode.Terminate, signal: null })
        assert.isTrue((yield* child.stderrTail).some((line) => line.includes("finalized")))
      }))

    it.effect("SIGINT: exit code 130", () =>
      Effect.gen(function*() {
        const { child } = yield* server()
        process.kill(child.pid, "SIGINT")
        assert.deepStrictEqual(yield* child.exit, { exitCode: NodeSignals.ExitCode.Interrupt, signal: null })
      }))

    it.effect("a second signal forces the stop that a slow finalizer holds up: exit code 2, finalizers done", () =>
      Effect.gen(function*() {
        const { child } = yield* server({ SLOW_STOP: "20000" })
        process.kill(child.pid, "SIGTERM")
        while (!(yield* child.stderrTail).some((line) => line.includes("slow stop: waiting"))) {
          yield* Effect.sleep("5 millis")
        }
        assert.isTrue(isAlive(child.pid), "the first signal waits for the slow finalizer")
        const start = performance.now()
        process.kill(child.pid, "SIGTERM")
        const exit = yield* child.exit
        assert.deepStrictEqual(exit, { exitCode: NodeSignals.ExitCode.Forced, signal: null })
        assert.isBelow(elapsedSince(start), 1000)
        const tail = yield* child.stderrTail
        assert.isTrue(tail.some((line) => line.includes("slow stop: forced")))
        assert.isTrue(tail.some((line) => line.includes("finalized")))
      }))

    it.effect("a finalizer that ignores the force: the process exits anyway after forceTimeout, code 3", () =>
      Effect.gen(function*() {
        const { child } = yield* server({ SLOW_STOP: "20000", SLOW_STOP_IGNORES_FORCE: "1", FORCE_TIMEOUT: "400" })
        process.kill(child.pid, "SIGINT")
        while (!(yield* child.stderrTail).some((line) => line.includes("slow stop: waiting"))) {
          yield* Effect.sleep("5 millis")
        }
        const start = performance.now()
        process.kill(child.pid, "SIGINT")
        const exit = yield* child.exit
        const elapsed = elapsedSince(start)
        assert.deepStrictEqual(exit, { exitCode: NodeSignals.ExitCode.Abandoned, signal: null })
        assert.isAtLeast(elapsed, 400 - 20)
        assert.isBelow(elapsed, 400 + 1000)
      }))
  }
)

const connectionServer = (env: Record<string, string>) =>
  Effect.gen(function*() {
    const command = yield* Fixtures.command("connection-server")
    const child = yield* NodeChildProcess.make({
      command: Command.setEnv(command, env),
      name: "connection-server"
    })
    const client = yield* rawClient(child.transport)
    yield* awaitReady(child)
    return { child, client }
  })

const awaitLine = (child: NodeChildProcess.Child, text: string) =>
  Effect.gen(function*() {
    const start = performance.now()
    while (!(yield* child.stderrTail).some((line) => line.includes(text))) {
      if (elapsedSince(start) > 10_000) return yield* Effect.die(new Error(`never logged: ${text}`))
      yield* Effect.sleep("5 millis")
    }
  })

const drain = (timeout: string) => ({
  [ShutdownPolicy.POLICY_VARIABLE]: "drain",
  [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: timeout
})

layer(Fixtures.layer(["connection-server"]), { excludeTestServices: true, timeout: "60 seconds" })(
  "NodeStdio.makeConnection: the shutdown policy in a real child",
  (it) => {
    it.effect("SIGTERM under drain: the request in flight finishes and is answered, then exit 143", () =>
      Effect.gen(function*() {
        const { child, client } = yield* connectionServer(drain("5 seconds"))
        const call = yield* Effect.forkChild(client.call("sleep", { ms: 600 }))
        yield* Effect.sleep("100 millis")
        process.kill(child.pid, "SIGTERM")
        assert.strictEqual(yield* Fiber.await(call).pipe(Effect.flatten), 600)
        assert.deepStrictEqual(yield* child.exit, { exitCode: NodeSignals.ExitCode.Terminate, signal: null })
        yield* awaitLine(child, "shutdown: drained=true cutOff=0 reason=Interrupted policy=Drain")
        yield* awaitLine(child, "finalized")
      }))

    it.effect("SIGTERM under fail-fast: the request in flight is cut off at once, then exit 143", () =>
      Effect.gen(function*() {
        const { child, client } = yield* connectionServer({ [ShutdownPolicy.POLICY_VARIABLE]: "fail-fast" })
        yield* Effect.forkChild(client.call("sleep", { ms: 20_000 }))
        yield* Effect.sleep("100 millis")
        const start = performance.now()
        process.kill(child.pid, "SIGTERM")
        assert.deepStrictEqual(yield* child.exit, { exitCode: NodeSignals.ExitCode.Terminate, signal: null })
        assert.isBelow(elapsedSince(start), 1000)
        yield* awaitLine(child, "shutdown: drained=false cutOff=1 reason=Interrupted policy=FailFast")
      }))

    it.effect("a second SIGTERM cuts a drain short: fail-fast, exit code 2", () =>
      Effect.gen(function*() {
        const { child, client } = yield* connectionServer(drain("20 seconds"))
        yield* Effect.forkChild(client.call("sleep", { ms: 20_000 }))
        yield* Effect.sleep("100 millis")
        process.kill(child.pid, "SIGTERM")
        yield* awaitLine(child, "SIGTERM: stopping")
        yield* Effect.sleep("200 millis")
        assert.isTrue(isAlive(child.pid), "the drain waits for the request")
        const start = performance.now()
        process.kill(child.pid, "SIGTERM")
        assert.deepStrictEqual(yield* child.exit, { exitCode: NodeSignals.ExitCode.Forced, signal: null })
        assert.isBelow(elapsedSince(start), 1000)
        yield* awaitLine(child, "cutOff=1")
      }))

    it.effect("the end of stdin under drain: the answer still goes out on stdout, then exit 0", () =>
      Effect.gen(function*() {
        const { child, client } = yield* connectionServer(drain("5 seconds"))
        const call = yield* Effect.forkChild(client.call("sleep", { ms: 300 }))
        yield* Effect.sleep("50 millis")
        yield* child.transport.end
        assert.strictEqual(yield* Fiber.await(call).pipe(Effect.flatten), 300)
        assert.deepStrictEqual(yield* child.exit, { exitCode: NodeSignals.ExitCode.Success, signal: null })
        yield* awaitLine(child, "shutdown: drained=true cutOff=0 reason=TransportClosed policy=Drain")
      }))
  }
)

/**
 * `broken-pipe-server` spawned with plain pipes, so that the test holds the other ends of them and can close them as a
 * host that dies does, one at a time. The server's finalizer writes the reason of its shutdown to `marker`.
 */
const brokenPipeServer = Effect.gen(function*() {
  const programs = yield* Fixtures.Programs
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-broken-pipe-"))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
  const marker = Path.join(dir, "finalized")
  const exited = yield* Deferred.make<NodeChildProcess.ExitStatus>()
  const child = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const child = ChildProcess.spawn(process.execPath, [...programs.argv("broken-pipe-server"), marker], {
        cwd: Fixtures.fixturesDir,
        stdio: "pipe"
      })
      child.once("exit", (exitCode, signal) => Deferred.doneUnsafe(exited, Exit.succeed({ exitCode, signal })))
      return child
    }),
    (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
  )
  let stderr = ""
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8")
  })
  const decoder = Framing.contentLength.unsafeMakeDecoder()
  const answers = new Map<number, Deferred.Deferred<unknown>>()
  child.stdout.on("data", (chunk: Buffer) => {
    for (const frame of decoder.push(chunk).frames) {
      const body = JSON.parse(new TextDecoder().decode(frame)) as { readonly id: number; readonly result?: unknown }
      const answer = answers.get(body.id)
      if (answer !== undefined) Deferred.doneUnsafe(answer, Exit.succeed(body.result))
    }
  })
  let nextId = 1
  /** Sends a request; the answer can be awaited only while the test still reads the child's stdout. */
  const send = (method: string, params: Message.Params) =>
    Effect.gen(function*() {
      const id = nextId++
      const answer = yield* Deferred.make<unknown>()
      answers.set(id, answer)
      const json = Message.stringify(Message.request(id, method, params))
      if (Result.isFailure(json)) return yield* Effect.die(json.failure)
      child.stdin.write(Framing.contentLength.encodeString(json.success))
      return Deferred.await(answer).pipe(
        Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.fail(new Error(`no answer to ${method}`)) })
      )
    })
  const call = (method: string, params: Message.Params) => Effect.flatten(send(method, params))
  const exit = Deferred.await(exited).pipe(
    Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.fail(new Error("the server did not exit")) })
  )
  const finalized = () => Fs.existsSync(marker) ? Fs.readFileSync(marker, "utf8") : undefined
  // Answered: the server is serving.
  assert.strictEqual(yield* call("pid", {}), child.pid)
  return { child, send, call, exit, finalized, stderr: () => stderr }
})

layer(Fixtures.layer(["broken-pipe-server"]), { excludeTestServices: true, timeout: "60 seconds" })(
  "NodeStdio and runMain when the host stops reading (EPIPE)",
  (it) => {
    it.effect("a broken stderr drops the logs: the child keeps serving, and exits 0 with its finalizer at stdin's end", () =>
      Effect.gen(function*() {
        const server = yield* brokenPipeServer
        server.child.stderr.destroy()
        // An Effect log, a console.log and a direct process.stderr.write: the first meets EPIPE, the rest are dropped.
        assert.strictEqual(yield* server.call("log", { text: "nobody reads this" }), "nobody reads this")
        assert.strictEqual(yield* server.call("log", { text: "nor this" }), "nor this")
        assert.strictEqual(yield* server.call("echo", { text: "still serving" }), "still serving")
        assert.isUndefined(server.finalized())
        server.child.stdin.end()
        assert.deepStrictEqual(yield* server.exit, { exitCode: NodeSignals.ExitCode.Success, signal: null })
        assert.strictEqual(server.finalized(), "TransportClosed")
      }))

    for (const closed of [["stdout"], ["stdout", "stderr"]] as const) {
      it.effect(
        `a broken ${closed.join(" and ")} fails the transport at the next answer: the finalizer runs, exit code 1`,
        () =>
          Effect.gen(function*() {
            const server = yield* brokenPipeServer
            for (const name of closed) server.child[name].destroy()
            const start = performance.now()
            // stdin stays open: only the failed write tells the child that its host is gone.
            yield* server.send("log", { text: "the answer meets EPIPE" })
            assert.deepStrictEqual(yield* server.exit, { exitCode: NodeSignals.ExitCode.Failure, signal: null })
            assert.isBelow(elapsedSince(start), 2000)
            assert.strictEqual(server.finalized(), "Failed")
            if (closed.length === 1) assert.include(server.stderr(), "writing stdout failed: write EPIPE")
          })
      )
    }
  }
)

layer(Fixtures.layer(["exit-code-program"]), { excludeTestServices: true, timeout: "60 seconds" })(
  "runMain and process.exitCode",
  (it) => {
    it.effect("a program that succeeds after setting process.exitCode exits with it, and logs no failure", () =>
      Effect.gen(function*() {
        const programs = yield* Fixtures.Programs
        const ran = yield* Effect.promise(() =>
          new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
            const child = ChildProcess.spawn(process.execPath, [...programs.argv("exit-code-program"), "4"], {
              cwd: Fixtures.fixturesDir,
              stdio: ["ignore", "pipe", "pipe"]
            })
            let stdout = ""
            let stderr = ""
            child.stdout.on("data", (chunk: Buffer) => stdout += chunk.toString("utf8"))
            child.stderr.on("data", (chunk: Buffer) => stderr += chunk.toString("utf8"))
            child.once("close", (code) => resolve({ code, stdout, stderr }))
          })
        )
        assert.strictEqual(ran.code, 4)
        assert.strictEqual(ran.stdout, "report: not ok\n")
        assert.strictEqual(ran.stderr, "")
      }))
  }
)
