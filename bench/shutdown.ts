/**
 * How long a shutdown takes with 10,000 calls in flight to a peer that never answers: from `stop` until every pending
 * call has failed and the transport is closed. Ours under fail-fast and under drain(0), with Effect callers (a fiber
 * per call) and with Promise callers (`PromiseClient`, no fiber per call), against vscode-jsonrpc's `dispose()` in the
 * same run. Run with `pnpm bench shutdown` (`--calls=100,1000 --repeats=1` for a smoke run); `run()` returns the rows
 * for `bench/index.ts`.
 *
 * Both sides talk to a silent peer over in-memory streams: ours over a `Queue` pair (no fault injection in the way),
 * vscode-jsonrpc over two `PassThrough`s. Each measurement is repeated and the median reported.
 *
 * The row "stop → child exited" puts a real child process behind the same silent peer (`fixtures/silent-main.ts`, one
 * for both sides: it reads its stdin, never answers and exits when stdin ends): ours spawns it with
 * `NodeChildProcess.makeConnection` under fail-fast and times `stop` (the connection's stop, the end of stdin) until
 * the child's exit; vscode-jsonrpc's client `spawn`s it and times `dispose()` and `stdin.end()` until the `exit`
 * event. Both start the clock once the child reads its stdin and every request is written.
 */
import { Connection, Method, PromiseClient, Protocol, ShutdownPolicy } from "@lifeline/kernel"
import type { Transport } from "@lifeline/kernel"
import type { Cause } from "effect"
import { Deferred, Effect, Exit, Fiber, Queue, Schema, Scope, Stream } from "effect"
import { ChildProcess } from "effect/process"
import { spawn } from "node:child_process"
import { existsSync, rmSync } from "node:fs"
import type { Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PassThrough } from "node:stream"
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node.js"
import { NodeChildProcess } from "../packages/node/src/index.js"
import { nodeArgs, root } from "./root.js"

export interface Row {
  readonly measure: string
  /** Effect callers: a fiber per call. */
  readonly ours: number
  /** Promise callers through `PromiseClient`: no fiber per call. */
  readonly promise: number
  readonly vscode: number
  readonly ratio: number
  readonly promiseRatio: number
  /** The goal of issue 17 for this row, if it has one, and whether each caller kind meets it. */
  readonly goal?: string | undefined
  readonly met?: boolean | undefined
  readonly promiseMet?: boolean | undefined
}

/** Who waits for the calls: fibers (an Effect app) or Promises (`PromiseClient`, as a VS Code extension would). */
type Callers = "effect" | "promise"

const Hang = Method.request("hang", { params: Schema.Struct({ n: Schema.Number }), result: Schema.Null })
const protocol = Protocol.make({ calls: [Hang] })

/** A transport whose sends go nowhere and whose input never ends until the scope closes: a peer that never answers. */
const silentTransport = Effect.gen(function*() {
  const incoming = yield* Queue.unbounded<Uint8Array, Cause.Done>()
  yield* Effect.addFinalizer(() => Queue.end(incoming))
  let ended = false
  const transport: Transport.Transport.Service = {
    incoming: Stream.fromQueue(incoming),
    send: () => Effect.void,
    end: Effect.sync(() => {
      ended = true
    })
  }
  return { transport, isEnded: () => ended }
})

const ours = (calls: number, policy: ShutdownPolicy.Policy, callers: Callers): Promise<number> =>
  callers === "promise" ? oursPromise(calls, policy) : Effect.runPromise(Effect.gen(function*() {
    const scope = yield* Scope.make()
    const { isEnded, transport } = yield* Scope.provide(silentTransport, scope)
    const connection = yield* Scope.provide(
      Connection.make({ protocol, transport, handlers: {}, policy, requestTimeout: "1 hour", outboundCapacity: calls }),
      scope
    )
    // Callers are fibers (that is what an Effect app has); the clock stops when the last of them has its failure.
    // Forked by this fiber, one after the other: in Effect 4 a fiber's children are interrupted when it ends, so
    // callers forked from the workers of a concurrent `forEach` would be gone before they call.
    let failed = 0
    const allFailed = yield* Deferred.make<void>()
    yield* Effect.forEach(
      Array.from({ length: calls }, (_, n) => n),
      (n) =>
        Effect.forkChild(Effect.flatMap(Effect.exit(connection.peer.call(Hang, { n })), (exit) => {
          if (Exit.isSuccess(exit)) return Effect.die(new Error("a call did not fail"))
          return ++failed === calls ? Deferred.succeed(allFailed, void 0) : Effect.void
        })),
      { discard: true }
    )
    while ((yield* connection.peer.stats).pendingOutbound < calls) yield* Effect.yieldNow
    // Every request written before the clock starts, as vscode-jsonrpc's are: the stop is measured, not the writer.
    yield* connection.peer.flush
    const start = performance.now()
    yield* connection.stop()
    const stopped = performance.now() - start
    yield* Deferred.await(allFailed)
    if (!isEnded()) throw new Error("transport not closed")
    const elapsed = performance.now() - start
    if (process.env.BENCH_DEBUG) {
      process.stderr.write(`stop returned after ${stopped.toFixed(1)} ms, all failed after ${elapsed.toFixed(1)} ms\n`)
    }
    yield* Scope.close(scope, Exit.void)
    return elapsed
  }))

/** The same, with the calls made through `PromiseClient` and the clock read as a Promise caller reads it. */
const oursPromise = async (calls: number, policy: ShutdownPolicy.Policy): Promise<number> => {
  const scope = Effect.runSync(Scope.make())
  const { connection, isEnded } = await Effect.runPromise(Scope.provide(
    Effect.gen(function*() {
      const { isEnded, transport } = yield* silentTransport
      const connection = yield* Connection.make({
        protocol,
        transport,
        handlers: {},
        policy,
        requestTimeout: "1 hour",
        outboundCapacity: calls
      })
      return { connection, isEnded }
    }),
    scope
  ))
  const client = PromiseClient.make(connection.peer)
  const outcomes = Array.from(
    { length: calls },
    (_, n) => client.call(Hang, { n }).then(() => "ok", () => "failed")
  )
  if (connection.peer.unsafeStats().pendingOutbound !== calls) throw new Error("calls not pending")
  await Effect.runPromise(connection.peer.flush)
  const start = performance.now()
  await Effect.runPromise(connection.stop())
  const stopped = performance.now() - start
  const all = await Promise.all(outcomes)
  if (!isEnded()) throw new Error("transport not closed")
  const elapsed = performance.now() - start
  if (all.some((o) => o !== "failed")) throw new Error("a call did not fail")
  if (process.env.BENCH_DEBUG) {
    process.stderr.write(
      `(promise) stop returned after ${stopped.toFixed(1)} ms, all failed after ${elapsed.toFixed(1)} ms\n`
    )
  }
  await Effect.runPromise(Scope.close(scope, Exit.void))
  return elapsed
}

const vscode = async (calls: number): Promise<number> => {
  const toPeer = new PassThrough()
  const fromPeer = new PassThrough()
  toPeer.resume() // the silent peer reads everything and answers nothing
  const connection = createMessageConnection(new StreamMessageReader(fromPeer), new StreamMessageWriter(toPeer))
  connection.listen()
  const pending = Array.from(
    { length: calls },
    (_, n) => connection.sendRequest("hang", { n }).then(() => "ok", () => "failed")
  )
  // Let every request reach the writer before the clock starts, as ours does.
  await new Promise((resolve) => setImmediate(resolve))
  await new Promise((resolve) => setTimeout(resolve, 50))
  const start = performance.now()
  connection.dispose()
  const outcomes = await Promise.all(pending)
  const elapsed = performance.now() - start
  if (outcomes.some((o) => o !== "failed")) throw new Error("a call did not fail")
  toPeer.destroy()
  fromPeer.destroy()
  return elapsed
}

// -- stop → child exited ------------------------------------------------------------------------------------------

let children = 0

/**
 * The silent child's command, and a wait until it is up: the calls are made once it reads its stdin, so that the
 * clock measures the stop and the exit, not a start that a busy machine can stretch to a quarter of a second (with 100
 * calls, the requests were written long before the child had started).
 */
const silentCommand = (): { readonly command: [string, Array<string>]; readonly started: () => Promise<void> } => {
  const ready = join(tmpdir(), `lifeline-bench-silent-${process.pid}-${children++}`)
  const started = async () => {
    for (const deadline = performance.now() + 10_000; !existsSync(ready);) {
      if (performance.now() > deadline) throw new Error("the silent child did not start within 10 s")
      await new Promise((resolve) => setTimeout(resolve, 2))
    }
    rmSync(ready, { force: true })
  }
  return {
    command: [process.execPath, [...nodeArgs(join(root, "bench", "fixtures", "silent-main.ts")), `--ready=${ready}`]],
    started
  }
}

/** Makes `calls` calls that fail when the connection stops, and resolves once every one has failed. */
const callAll = (
  peer: Connection.Connection<never, typeof Hang>["peer"],
  calls: number,
  callers: Callers
): Effect.Effect<Promise<void>> =>
  Effect.gen(function*() {
    if (callers === "promise") {
      const client = PromiseClient.make(peer)
      const outcomes = Array.from(
        { length: calls },
        (_, n) => client.call(Hang, { n }).then(() => "ok", () => "failed")
      )
      return Promise.all(outcomes).then((all) => {
        if (all.some((o) => o !== "failed")) throw new Error("a call did not fail")
      })
    }
    let failed = 0
    const allFailed = yield* Deferred.make<void>()
    yield* Effect.forEach(
      Array.from({ length: calls }, (_, n) => n),
      (n) =>
        Effect.forkChild(Effect.flatMap(Effect.exit(peer.call(Hang, { n })), (exit) => {
          if (Exit.isSuccess(exit)) return Effect.die(new Error("a call did not fail"))
          return ++failed === calls ? Deferred.succeed(allFailed, void 0) : Effect.void
        })),
      { discard: true }
    )
    return Effect.runPromise(Deferred.await(allFailed))
  })

/** Ours: `NodeChildProcess.makeConnection`, fail-fast; from `stop` until the child has exited. */
const oursChild = (calls: number, callers: Callers): Promise<number> =>
  Effect.runPromise(Effect.gen(function*() {
    const scope = yield* Scope.make()
    const silent = silentCommand()
    const [command, args] = silent.command
    const { child, connection, stop } = yield* Scope.provide(
      NodeChildProcess.makeConnection({
        command: ChildProcess.make(command, args, { cwd: root }),
        stderrLogLevel: "Warn",
        protocol,
        handlers: {},
        policy: ShutdownPolicy.FailFast(),
        requestTimeout: "1 hour",
        outboundCapacity: calls
      }),
      scope
    )
    yield* Effect.promise(silent.started)
    const allFailed = yield* callAll(connection.peer, calls, callers)
    while ((yield* connection.peer.stats).pendingOutbound < calls) yield* Effect.yieldNow
    yield* connection.peer.flush
    // As vscode-jsonrpc's side below waits at least one 20 ms turn for its writes to settle, so does ours.
    yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
    // The clock stops at the exit, as vscode-jsonrpc's stops at the `exit` event: `stop` returns a little later, once
    // it has also seen that no process is left in the child's group.
    const exited = yield* Effect.forkChild(Effect.map(child.exit, () => performance.now()))
    const start = performance.now()
    const report = yield* stop
    const returned = performance.now() - start
    const elapsed = (yield* Fiber.join(exited)) - start
    if (process.env.BENCH_DEBUG) {
      process.stderr.write(
        `(${callers}, child) exited after ${elapsed.toFixed(1)} ms, stop returned ${returned.toFixed(1)}\n`
      )
    }
    yield* Effect.promise(() => allFailed)
    if (report.endedBy !== "EndOfInput") throw new Error(`the child was not stopped by its input: ${report.endedBy}`)
    yield* Scope.close(scope, Exit.void)
    return elapsed
  }))

/** vscode-jsonrpc's client: `dispose()`, then the end of the child's stdin; until the child's `exit` event. */
const vscodeChild = async (calls: number): Promise<number> => {
  const silent = silentCommand()
  const [command, args] = silent.command
  const child = spawn(command, args, { cwd: root, stdio: ["pipe", "pipe", "inherit"] })
  const spawned = new Promise<void>((resolve, reject) => child.once("spawn", resolve).once("error", reject))
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  await spawned
  await silent.started()
  const connection = createMessageConnection(
    new StreamMessageReader(child.stdout),
    new StreamMessageWriter(child.stdin)
  )
  connection.listen()
  const pending = Array.from(
    { length: calls },
    (_, n) => connection.sendRequest("hang", { n }).then(() => "ok", () => "failed")
  )
  // Every request written to the pipe before the clock starts, as ours are (its writer writes one message at a time).
  const stdin = child.stdin as Socket // a pipe is a `net.Socket`: it counts the bytes it wrote
  for (let last = -1; last !== stdin.bytesWritten || stdin.writableLength > 0;) {
    last = stdin.bytesWritten
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const start = performance.now()
  connection.dispose()
  child.stdin.end()
  await exited
  const elapsed = performance.now() - start
  if ((await Promise.all(pending)).some((o) => o !== "failed")) throw new Error("a call did not fail")
  return elapsed
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

const measure = async (calls: number, repeats: number): Promise<Array<Row>> => {
  const runs = { failFast: [[], []], drain0: [[], []] } as Record<"failFast" | "drain0", [Array<number>, Array<number>]>
  const dispose: Array<number> = []
  const exits: [Array<number>, Array<number>] = [[], []]
  const vscodeExits: Array<number> = []
  for (let i = 0; i < repeats + 1; i++) {
    const a = await ours(calls, ShutdownPolicy.FailFast(), "effect")
    const b = await ours(calls, ShutdownPolicy.drain(0), "effect")
    const c = await vscode(calls)
    const d = await ours(calls, ShutdownPolicy.FailFast(), "promise")
    const e = await ours(calls, ShutdownPolicy.drain(0), "promise")
    const f = await oursChild(calls, "effect")
    const g = await vscodeChild(calls)
    const h = await oursChild(calls, "promise")
    if (i === 0) continue // warm-up
    exits[0].push(f)
    vscodeExits.push(g)
    exits[1].push(h)
    runs.failFast[0].push(a)
    runs.drain0[0].push(b)
    dispose.push(c)
    runs.failFast[1].push(d)
    runs.drain0[1].push(e)
  }
  const row = (
    measure: string,
    [effect, promise]: [Array<number>, Array<number>],
    v: number = median(dispose),
    goal?: { readonly text: string; readonly met: (ms: number, ratio: number) => boolean }
  ): Row => ({
    measure,
    ours: median(effect),
    promise: median(promise),
    vscode: v,
    ratio: median(effect) / v,
    promiseRatio: median(promise) / v,
    goal: goal?.text,
    met: goal?.met(median(effect), median(effect) / v),
    promiseMet: goal?.met(median(promise), median(promise) / v)
  })
  // The goals apply at 10,000 pending, the size issue 17 names.
  const large = calls >= 10_000
  return [
    row(
      `stop, fail-fast, ${calls} pending (ms)`,
      runs.failFast,
      undefined,
      large ? { text: "<= 10 ms", met: (ms) => ms <= 10 } : undefined
    ),
    row(`stop, drain(0), ${calls} pending (ms)`, runs.drain0),
    row(
      `stop → child exited, ${calls} pending (ms)`,
      exits,
      median(vscodeExits),
      large ? { text: "<= 1.5x", met: (_, ratio) => ratio <= 1.5 } : undefined
    )
  ]
}

export const run = async (
  options: { readonly calls?: ReadonlyArray<number> | undefined; readonly repeats?: number | undefined } = {}
): Promise<Array<Row>> => {
  const rows: Array<Row> = []
  for (const calls of options.calls ?? [100, 10_000]) rows.push(...await measure(calls, options.repeats ?? 5))
  return rows
}

const verdict = (r: Row): string =>
  r.goal === undefined
    ? ""
    : r.met && r.promiseMet
    ? "ok"
    : [r.met ? "" : "MISS", r.promiseMet ? "" : "MISS(P)"].filter((m) => m !== "").join(" ")

export const format = (rows: ReadonlyArray<Row>): string =>
  [
    "| shutdown | ours, Effect callers | ours, PromiseClient | vscode-jsonrpc dispose | Effect / vscode | " +
    "Promise / vscode | goal | |",
    "|---|---:|---:|---:|---:|---:|---|---|",
    ...rows.map((r) =>
      `| ${r.measure} | ${r.ours.toFixed(2)} | ${r.promise.toFixed(2)} | ${r.vscode.toFixed(2)} | ${
        r.ratio.toFixed(2)
      } | ${r.promiseRatio.toFixed(2)} | ${r.goal ?? ""} | ${verdict(r)} |`
    )
  ].join("\n")

if (import.meta.url === `file://${process.argv[1]}`) {
  const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
  const calls = arg("calls")
  const repeats = arg("repeats")
  run({
    calls: calls === undefined ? undefined : calls.split(",").map(Number),
    repeats: repeats === undefined ? undefined : Number(repeats)
  }).then((rows) => process.stdout.write(format(rows) + "\n"))
}
