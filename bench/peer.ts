/**
 * Round trips of our peer against vscode-jsonrpc, in one run: sequential latency, pipelined throughput with 1, 16 and
 * 256 calls in flight, notification throughput (small and 16 KiB params), over an in-memory pair and over a real
 * child-process pipe (also with both processes pinned to one CPU), and the heap it takes to hold 100,000 pending
 * calls. Ours is measured twice on the same peer, each with its own ratio to vscode-jsonrpc: as an Effect app calls it
 * (`peer.call` in a fiber) and as a Promise caller does (`PromiseClient`, no fiber per call). Run with
 * `pnpm bench peer`, or `node --expose-gc scripts/run-bundled.mjs bench/peer.ts` (`--scale=0.2` for a smoke run,
 * `--only=memory-pair,child,pinned,heap,test-transport` for a part); `run()` returns the rows for `bench/index.ts`.
 *
 * Both libraries run the same echo server (`bench/fixtures/echo-*.ts`) and the same client loops: one loop per call in
 * flight, each awaiting its call before issuing the next. Ours makes typed calls (Schema-encoded params, decoded
 * results, on both sides); vscode-jsonrpc validates nothing. In memory, our pair is a `Queue` per direction (see
 * `makeMemoryPair`): `TestTransport` copies and schedules every chunk to make faults injectable, which is its job, not
 * the peer's, so it is measured in one extra row only. vscode-jsonrpc gets a `PassThrough` per direction. Over a
 * pipe, ours is `NodeChildProcess` on the host side and `NodeStdio` in the child; vscode-jsonrpc gets `spawn` and
 * `process.stdin`/`stdout`. Each workload is sized from the rate measured while warming up, so that one measurement of
 * the slowest client takes about `TARGET_SECONDS`; it is repeated, rotating which client goes first, and the median
 * is reported.
 */
import type { Cause, Fiber } from "effect"
import { Effect, Exit, Queue, Scope, Stream } from "effect"
import { ChildProcess } from "effect/process"
import { execFileSync, spawn } from "node:child_process"
import type { ChildProcessByStdio } from "node:child_process"
import { join } from "node:path"
import { PassThrough } from "node:stream"
import type { Readable, Writable } from "node:stream"
import { fileURLToPath, pathToFileURL } from "node:url"
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node.js"
import type { MessageConnection } from "vscode-jsonrpc/node.js"
import { Peer, PromiseClient } from "../packages/kernel/src/index.js"
import type { Transport } from "../packages/kernel/src/index.js"
import { NodeChildProcess } from "../packages/node/src/index.js"
import { TestTransport } from "../packages/testing/src/index.js"
import { Drain, Echo, EchoClient, serve as serveOurs, Tick } from "./fixtures/echo-ours.js"
import { serve as serveVscode } from "./fixtures/echo-vscode.js"
import { nodeArgs, root } from "./root.js"

/** One measurement, both libraries. `ratio` is ours / vscode for Effect callers, `promiseRatio` for Promise callers. */
export interface Row {
  readonly transport: string
  readonly measure: string
  readonly unit: string
  /** Effect callers: `peer.call` in a fiber. */
  readonly ours: number
  /** Promise callers: `PromiseClient.make(peer).call`, on the same peer; `undefined` where not measured. */
  readonly promise: number | undefined
  readonly vscode: number | undefined
  readonly ratio: number | undefined
  readonly promiseRatio: number | undefined
  /** The goal for both ratios, e.g. `>= 2` or `<= 1`. */
  readonly goal: string | undefined
  readonly met: boolean | undefined
  readonly promiseMet: boolean | undefined
}

type Params = { readonly text: string }
export const small: Params = { text: "hello" }
const large: Params = { text: "lorem ipsum dolor sit amet, ".repeat(586).slice(0, 16 * 1024) }

// -- the two clients, behind one shape --------------------------------------------------------------------------

export interface Client {
  /** Resolves once the server answers (a child process takes a while to start). */
  readonly ready: () => Promise<unknown>
  /** Each per-call latency in milliseconds. */
  readonly latency: (params: Params, calls: number) => Promise<Float64Array>
  /** Calls per second with `inFlight` loops. */
  readonly pipelined: (params: Params, calls: number, inFlight: number) => Promise<number>
  /** Notifications per second, counted until the server has handled the last one. */
  readonly notifications: (params: Params, count: number) => Promise<number>
  readonly close: () => Promise<void>
}

type OursPeer = Peer.Peer<never, typeof Echo | typeof Tick | typeof Drain>

/** Ours, called from Effect and through `PromiseClient`, over one peer. */
export interface Ours {
  readonly effect: Client
  readonly promise: Client
}

/**
 * A client peer on the transport `acquire` makes in the client's Scope, and its two faces; closing the Effect face
 * closes that Scope.
 */
const oursClient = async <E>(
  acquire: Effect.Effect<Transport.Transport.Service, E, Scope.Scope>,
  onClose: () => Promise<void>
): Promise<Ours> => {
  const scope = Effect.runSync(Scope.make())
  const peer: OursPeer = await Effect.runPromise(
    Scope.provide(
      Effect.flatMap(acquire, (transport) => Peer.make({ protocol: EchoClient, transport, handlers: {} })),
      scope
    )
  )
  let ticks = 0
  const latency = (params: Params, calls: number) =>
    Effect.runPromise(Effect.gen(function*() {
      const samples = new Float64Array(calls)
      for (let i = 0; i < calls; i++) {
        const start = performance.now()
        yield* peer.call(Echo, params)
        samples[i] = performance.now() - start
      }
      return samples
    }))
  const pipelined = (params: Params, calls: number, inFlight: number) =>
    Effect.runPromise(Effect.suspend(() => {
      let issued = 0
      const loop = Effect.gen(function*() {
        while (issued < calls) {
          issued++
          yield* peer.call(Echo, params)
        }
      })
      const start = performance.now()
      return Effect.all(Array.from({ length: inFlight }, () => loop), { concurrency: "unbounded", discard: true }).pipe(
        Effect.map(() => calls / ((performance.now() - start) / 1000))
      )
    }))
  const notifications = (params: Params, count: number) =>
    Effect.runPromise(Effect.gen(function*() {
      const start = performance.now()
      for (let i = 0; i < count; i++) yield* peer.notify(Tick, params)
      ticks += count
      const handled = yield* peer.call(Drain, { count: ticks })
      if (handled !== ticks) throw new Error(`the server counted ${handled} ticks, not ${ticks}`)
      return count / ((performance.now() - start) / 1000)
    }))
  const effect: Client = {
    ready: () => Effect.runPromise(peer.call(Echo, small, { timeout: "60 seconds" })),
    latency,
    pipelined,
    notifications,
    close: async () => {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await onClose()
    }
  }
  return { effect, promise: promiseClient(peer, () => ticks, (n) => ticks += n) }
}

/** The same loops as vscode-jsonrpc's, through `PromiseClient` over the same peer (the tick count is shared). */
const promiseClient = (peer: OursPeer, ticks: () => number, addTicks: (n: number) => void): Client => {
  const client = PromiseClient.make(peer)
  return {
    ready: () => client.call(Echo, small, { timeout: "60 seconds" }),
    latency: async (params, calls) => {
      const samples = new Float64Array(calls)
      for (let i = 0; i < calls; i++) {
        const start = performance.now()
        await client.call(Echo, params)
        samples[i] = performance.now() - start
      }
      return samples
    },
    pipelined: async (params, calls, inFlight) => {
      let issued = 0
      const loop = async () => {
        while (issued < calls) {
          issued++
          await client.call(Echo, params)
        }
      }
      const start = performance.now()
      await Promise.all(Array.from({ length: inFlight }, loop))
      return calls / ((performance.now() - start) / 1000)
    },
    notifications: async (params, count) => {
      const start = performance.now()
      // As vscode-jsonrpc's loop: fire and forget, waiting now and then (a notification that found the outbound queue
      // full settles once it is queued).
      for (let i = 0; i < count; i++) {
        const queued = client.notify(Tick, params)
        if (i % 256 === 255) await queued
      }
      addTicks(count)
      const handled = await client.call(Drain, { count: ticks() })
      if (handled !== ticks()) throw new Error(`the server counted ${handled} ticks, not ${ticks()}`)
      return count / ((performance.now() - start) / 1000)
    },
    close: async () => {}
  }
}

const vscodeClient = (connection: MessageConnection, onClose: () => Promise<void>): Client => {
  connection.listen()
  let ticks = 0
  return {
    ready: () => connection.sendRequest("echo", small),
    latency: async (params, calls) => {
      const samples = new Float64Array(calls)
      for (let i = 0; i < calls; i++) {
        const start = performance.now()
        await connection.sendRequest("echo", params)
        samples[i] = performance.now() - start
      }
      return samples
    },
    pipelined: async (params, calls, inFlight) => {
      let issued = 0
      const loop = async () => {
        while (issued < calls) {
          issued++
          await connection.sendRequest("echo", params)
        }
      }
      const start = performance.now()
      await Promise.all(Array.from({ length: inFlight }, loop))
      return calls / ((performance.now() - start) / 1000)
    },
    notifications: async (params, count) => {
      const start = performance.now()
      // Fire and forget, as LSP clients do, but wait for the writer now and then so the queue stays bounded.
      for (let i = 0; i < count; i++) {
        const written = connection.sendNotification("tick", params)
        if (i % 256 === 255) await written
      }
      ticks += count
      const handled = await connection.sendRequest<number>("drain", { count: ticks })
      if (handled !== ticks) throw new Error(`the server counted ${handled} ticks, not ${ticks}`)
      return count / ((performance.now() - start) / 1000)
    },
    close: async () => {
      connection.dispose()
      await onClose()
    }
  }
}

// -- transports -------------------------------------------------------------------------------------------------

/** The lightest in-memory pair: a bounded `Queue` per direction, all that has arrived taken at once. */
export const makeMemoryPair = (capacity = 1024) =>
  Effect.gen(function*() {
    const leftToRight = yield* Queue.bounded<Uint8Array, Cause.Done>(capacity)
    const rightToLeft = yield* Queue.bounded<Uint8Array, Cause.Done>(capacity)
    const side = (
      out: Queue.Queue<Uint8Array, Cause.Done>,
      into: Queue.Queue<Uint8Array, Cause.Done>
    ): Transport.Transport.Service => ({
      incoming: Stream.fromQueue(into),
      send: (chunks) => Effect.asVoid(Queue.offerAll(out, chunks)),
      end: Effect.asVoid(Queue.end(out)),
      unsafeTrySend: (chunk) => Queue.offerUnsafe(out, chunk)
    })
    return { left: side(leftToRight, rightToLeft), right: side(rightToLeft, leftToRight) }
  })

/** Both peers in this process; `pair` gives the two transports. */
export const oursInMemory = async (
  pair: Effect.Effect<{ left: Transport.Transport.Service; right: Transport.Transport.Service }, never, Scope.Scope>
): Promise<Ours> => {
  const scope = Effect.runSync(Scope.make())
  const { left, right } = await Effect.runPromise(Scope.provide(pair, scope))
  await Effect.runPromise(Scope.provide(serveOurs(left), scope))
  return oursClient(Effect.succeed(right), () => Effect.runPromise(Scope.close(scope, Exit.void)))
}

export const vscodeInMemory = (): Client => {
  const toServer = new PassThrough()
  const toClient = new PassThrough()
  const server = serveVscode(toServer, toClient)
  const connection = createMessageConnection(new StreamMessageReader(toClient), new StreamMessageWriter(toServer))
  return vscodeClient(connection, async () => {
    server.dispose()
    toServer.destroy()
    toClient.destroy()
  })
}

type Child = ChildProcessByStdio<Writable, Readable, null>

const echoCommand = (fixture: "echo-ours-main.ts" | "echo-vscode-main.ts", pinned: boolean): ReadonlyArray<string> => {
  const node = [process.execPath, ...nodeArgs(join(root, "bench", "fixtures", fixture))]
  return pinned ? ["taskset", "-c", "0", ...node] : node
}

const exited = (child: Child) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    const timer = setTimeout(() => child.kill("SIGKILL"), 2000)
    child.once("exit", () => {
      clearTimeout(timer)
      resolve()
    })
  })

/** Ours end to end: the client spawns the child with `NodeChildProcess`, the child serves over `NodeStdio`. */
const oursChild = (pinned: boolean): Promise<Ours> => {
  const [command, ...args] = echoCommand("echo-ours-main.ts", pinned)
  const child = NodeChildProcess.make({
    command: ChildProcess.make(command, args, { cwd: root }),
    stderrLogLevel: "Warn"
  })
  return oursClient(Effect.map(Effect.orDie(child), (c) => c.transport), async () => {})
}

const vscodeChild = (pinned: boolean): Client => {
  const [command, ...args] = echoCommand("echo-vscode-main.ts", pinned)
  const child: Child = spawn(command, args, { cwd: root, stdio: ["pipe", "pipe", "inherit"] })
  const connection = createMessageConnection(
    new StreamMessageReader(child.stdout),
    new StreamMessageWriter(child.stdin)
  )
  return vscodeClient(connection, async () => {
    child.stdin.end()
    await exited(child)
  })
}

// -- measuring --------------------------------------------------------------------------------------------------

const median = (values: ArrayLike<number>): number => quantile(values, 0.5)
const quantile = (values: ArrayLike<number>, q: number): number => {
  const sorted = Float64Array.from(values).sort()
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
}

interface Goal {
  readonly text: string
  readonly met: (ratio: number) => boolean
}
const atLeast = (x: number): Goal => ({ text: `>= ${x}`, met: (ratio) => ratio >= x })
const atMost = (x: number): Goal => ({ text: `<= ${x}`, met: (ratio) => ratio <= x })

const row = (
  transport: string,
  measure: string,
  unit: string,
  ours: number,
  promise: number | undefined,
  vscode: number | undefined,
  goal?: Goal
): Row => {
  const ratio = vscode === undefined ? undefined : ours / vscode
  const promiseRatio = vscode === undefined || promise === undefined ? undefined : promise / vscode
  return {
    transport,
    measure,
    unit,
    ours,
    promise,
    vscode,
    ratio,
    promiseRatio,
    goal: goal?.text,
    met: goal === undefined || ratio === undefined ? undefined : goal.met(ratio),
    promiseMet: goal === undefined || promiseRatio === undefined ? undefined : goal.met(promiseRatio)
  }
}

/**
 * How long one measurement of the slower library should take, in seconds. Each workload's size is derived from the
 * rate measured while warming up, so a slow transport does not stretch the run; `scale` shrinks it for a smoke run.
 */
const TARGET_SECONDS = 0.2
const REPS = 3

/** A workload: what it runs on a client and how its size follows from a rate (operations per second). */
interface Workload {
  readonly name: string
  readonly run: (client: Client, size: number) => Promise<number>
  readonly warmup: number
  readonly min: number
}

const sizeFor = (rate: number, workload: Workload, scale: number): number =>
  Math.max(workload.min, Math.round(rate * TARGET_SECONDS * scale))

/** Runs `measure` on every client `reps` times, rotating which goes first; the runs come back in `clients`' order. */
const allRuns = async <A>(
  clients: ReadonlyArray<Client>,
  reps: number,
  measure: (client: Client) => Promise<A>
): Promise<Array<Array<A>>> => {
  const runs: Array<Array<A>> = clients.map(() => [])
  for (let rep = 0; rep < reps; rep++) {
    for (let k = 0; k < clients.length; k++) {
      const i = (rep + k) % clients.length
      runs[i].push(await measure(clients[i]))
    }
  }
  return runs
}

/** The median of each client's results. */
const all = async (
  clients: ReadonlyArray<Client>,
  reps: number,
  measure: (client: Client) => Promise<number>
): Promise<Array<number>> => (await allRuns(clients, reps, measure)).map(median)

/** A latency quantile in microseconds: the median over the runs of each run's quantile. */
const micros = (runs: ReadonlyArray<Float64Array>, q: number) => median(runs.map((r) => quantile(r, q))) * 1000

const roundTrips = async (
  transport: string,
  { effect: ours, promise }: Ours,
  vscode: Client,
  scale: number,
  log: (line: string) => void
): Promise<Array<Row>> => {
  const clients = [ours, promise, vscode]
  const reps = scale < 1 ? 1 : REPS
  const rows: Array<Row> = []
  const add = (r: Row) => {
    rows.push(r)
    log(format([r], false))
  }
  await ours.ready()
  await vscode.ready()

  /** Warms every client up on the workload (JIT, the child's too) and returns the slowest one's rate. */
  const calibrate = async (workload: Workload): Promise<number> => {
    const rates: Array<number> = []
    for (const client of clients) {
      await workload.run(client, workload.warmup)
      rates.push(await workload.run(client, workload.warmup))
    }
    return Math.min(...rates)
  }

  for (const [label, params] of [["small", small], ["16 KiB", large]] as const) {
    const workload: Workload = {
      name: `latency ${label}`,
      run: async (client, size) => size / ((await client.latency(params, size)).reduce((a, b) => a + b, 0) / 1000),
      // Enough for both sides' JIT to settle (the child's too): with 200, the first row measured mostly warm-up.
      warmup: 2000,
      min: 200
    }
    const size = sizeFor(await calibrate(workload), workload, scale)
    const [o, p, v] = await allRuns(clients, reps, (c) => c.latency(params, size))
    add(row(transport, `latency median, ${label}`, "µs", micros(o, 0.5), micros(p, 0.5), micros(v, 0.5), atMost(1)))
    add(row(transport, `latency p99, ${label}`, "µs", micros(o, 0.99), micros(p, 0.99), micros(v, 0.99), atMost(1)))
  }
  for (const [label, params] of [["small", small], ["16 KiB", large]] as const) {
    for (const inFlight of [1, 16, 256]) {
      const workload: Workload = {
        name: `pipelined ${inFlight} ${label}`,
        run: (client, size) => client.pipelined(params, size, inFlight),
        warmup: Math.max(500, 4 * inFlight),
        min: 4 * inFlight
      }
      const size = sizeFor(await calibrate(workload), workload, scale)
      const [o, p, v] = await all(clients, reps, (c) => workload.run(c, size))
      const goal = label === "16 KiB" ? atLeast(1.1) : inFlight === 1 ? atLeast(1) : atLeast(2)
      add(row(transport, `calls/s, ${inFlight} in flight, ${label}`, "calls/s", o, p, v, goal))
    }
  }
  for (const [label, params] of [["small", small], ["16 KiB", large]] as const) {
    const workload: Workload = {
      name: `notifications ${label}`,
      run: (client, size) => client.notifications(params, size),
      warmup: 2000,
      min: 500
    }
    const size = sizeFor(await calibrate(workload), workload, scale)
    const [o, p, v] = await all(clients, reps, (c) => workload.run(c, size))
    const goal = label === "small" ? atLeast(10) : atLeast(1.1)
    add(row(transport, `notifications/s, ${label}`, "msg/s", o, p, v, goal))
  }
  return rows
}

// -- memory: 100,000 pending calls, each library in a fresh process with --expose-gc -----------------------------

const PENDING = 100_000

interface MemoryResult {
  /** Heap growth per pending call right after issuing them all, before a collection. */
  readonly peak: number
  /** Heap growth per pending call after a full collection, with every call still pending. */
  readonly retained: number
}

const collect = () => {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error("run with --expose-gc")
  gc()
  gc()
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * Heap growth since `before` once it stops shrinking: 100,000 calls issued at once overflow the outbound queue, and
 * the fibers that waited for room take a few turns of the event loop to unwind.
 */
const retainedSince = async (before: number): Promise<number> => {
  let last = Number.POSITIVE_INFINITY
  for (let i = 0; i < 30; i++) {
    for (let j = 0; j < 10; j++) await settle()
    collect()
    const now = process.memoryUsage().heapUsed - before
    if (now > last * 0.995) return Math.min(now, last)
    last = now
  }
  return last
}

/** What ours holds per pending call: the caller's fiber, the peer's entry, the timeout's timer. */
const memoryOurs = async (): Promise<MemoryResult> => {
  // A transport that swallows what is sent and never answers.
  const silent: Transport.Transport.Service = { incoming: Stream.never, send: () => Effect.void, end: Effect.void }
  const scope = Effect.runSync(Scope.make())
  const peer: OursPeer = await Effect.runPromise(
    Scope.provide(Peer.make({ protocol: EchoClient, transport: silent, handlers: {}, requestTimeout: "1 hour" }), scope)
  )
  await settle()
  collect()
  const before = process.memoryUsage().heapUsed
  const fibers: Array<Fiber.Fiber<unknown, unknown>> = []
  for (let i = 0; i < PENDING; i++) fibers.push(Effect.runFork(peer.call(Echo, small)))
  while (peer.unsafeStats().requestsSent < PENDING) await settle()
  await Effect.runPromise(peer.flush)
  const peak = process.memoryUsage().heapUsed - before
  const retained = await retainedSince(before)
  if (peer.unsafeStats().pendingOutbound !== PENDING) throw new Error("calls settled early")
  await Effect.runPromise(Scope.close(scope, Exit.void))
  return { peak: peak / PENDING, retained: retained / PENDING }
}

/** What ours holds per pending call made through `PromiseClient`: the peer's entry and the caller's Promise. */
const memoryPromise = async (): Promise<MemoryResult> => {
  const silent: Transport.Transport.Service = { incoming: Stream.never, send: () => Effect.void, end: Effect.void }
  const scope = Effect.runSync(Scope.make())
  const peer: OursPeer = await Effect.runPromise(
    Scope.provide(Peer.make({ protocol: EchoClient, transport: silent, handlers: {}, requestTimeout: "1 hour" }), scope)
  )
  const client = PromiseClient.make(peer)
  await settle()
  collect()
  const before = process.memoryUsage().heapUsed
  // Held as vscode-jsonrpc's are below: the caller keeps each call's Promise, with a handler attached.
  const pending: Array<Promise<unknown>> = []
  for (let i = 0; i < PENDING; i++) pending.push(client.call(Echo, small).catch(() => undefined))
  await Effect.runPromise(peer.flush)
  const peak = process.memoryUsage().heapUsed - before
  const retained = await retainedSince(before)
  if (peer.unsafeStats().pendingOutbound !== PENDING) throw new Error("calls settled early")
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await Promise.all(pending)
  return { peak: peak / PENDING, retained: retained / PENDING }
}

/** The floor under `memoryOurs`: a fiber parked on a callback, which is what any pending Effect call is at least. */
const memoryFiber = async (): Promise<MemoryResult> => {
  await settle()
  collect()
  const before = process.memoryUsage().heapUsed
  const fibers: Array<Fiber.Fiber<unknown, unknown>> = []
  for (let i = 0; i < PENDING; i++) fibers.push(Effect.runFork(Effect.callback<never>(() => {})))
  await settle()
  const peak = process.memoryUsage().heapUsed - before
  const retained = await retainedSince(before)
  // Nothing but this array refers to a fiber parked on a callback that nobody can resume: without a use after the
  // measurement, the array and every fiber are garbage before it (Effect 4 keeps no registry of running fibers).
  if (fibers.some((fiber) => fiber.pollUnsafe() !== undefined)) throw new Error("a parked fiber ended")
  return { peak: peak / PENDING, retained: retained / PENDING }
}

const memoryVscode = async (): Promise<MemoryResult> => {
  const sink = new PassThrough()
  sink.resume()
  const connection = createMessageConnection(new StreamMessageReader(new PassThrough()), new StreamMessageWriter(sink))
  connection.listen()
  await settle()
  collect()
  const before = process.memoryUsage().heapUsed
  const pending: Array<Promise<unknown>> = []
  for (let i = 0; i < PENDING; i++) pending.push(connection.sendRequest("echo", small).catch(() => undefined))
  // The writer is FIFO: once this is written, every request before it is.
  await connection.sendNotification("tick", small)
  const peak = process.memoryUsage().heapUsed - before
  const retained = await retainedSince(before)
  connection.dispose()
  return { peak: peak / PENDING, retained: retained / PENDING }
}

/** This program again: its bundle as it is, its source through tsx. */
const runSelf = (): Array<string> => {
  const self = fileURLToPath(import.meta.url)
  return self.endsWith(".ts") ? ["--import", "tsx", self] : [self]
}

const memoryIn = (which: "ours" | "promise" | "vscode" | "fiber"): Promise<MemoryResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--expose-gc", ...runSelf(), `--memory=${which}`],
      { cwd: root, stdio: ["ignore", "pipe", "inherit"] }
    )
    let out = ""
    child.stdout.setEncoding("utf8").on("data", (text: string) => out += text)
    child.once("exit", (code) =>
      code === 0
        ? resolve(JSON.parse(out) as MemoryResult)
        : reject(new Error(`memory run for ${which}: exit ${code}`)))
  })

const memoryRows = async (): Promise<Array<Row>> => {
  const ours = await memoryIn("ours")
  const promise = await memoryIn("promise")
  const vscode = await memoryIn("vscode")
  const fiber = await memoryIn("fiber")
  const t = `${PENDING / 1000}k pending calls`
  return [
    row(t, "heap per pending call, peak", "bytes", ours.peak, promise.peak, vscode.peak),
    row(
      t,
      "heap per pending call, retained after GC",
      "bytes",
      ours.retained,
      promise.retained,
      vscode.retained,
      atMost(0.8)
    ),
    row(t, "  of which a parked fiber (Effect's floor)", "bytes", fiber.retained, undefined, undefined)
  ]
}

// -- CPU pinning --------------------------------------------------------------------------------------------------

const hasTaskset = (): boolean => {
  try {
    execFileSync("taskset", ["-p", String(process.pid)], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

/** Pins every thread of this process to CPU 0 until the returned function restores the former mask. */
const pinSelf = (): () => void => {
  const current = execFileSync("taskset", ["-p", String(process.pid)], { encoding: "utf8" })
  const mask = current.trim().split(/\s+/).pop()!
  execFileSync("taskset", ["-a", "-p", "-c", "0", String(process.pid)], { stdio: "ignore" })
  return () => execFileSync("taskset", ["-a", "-p", mask, String(process.pid)], { stdio: "ignore" })
}

// -- the run ------------------------------------------------------------------------------------------------------

export interface Options {
  /** Shrinks every workload, for a smoke run. Default 1. */
  readonly scale?: number | undefined
  readonly log?: ((line: string) => void) | undefined
  /** Runs only these parts (all by default): `memory-pair`, `test-transport`, `child`, `pinned`, `heap`. */
  readonly only?: ReadonlyArray<string> | undefined
}

export const run = async (options: Options = {}): Promise<Array<Row>> => {
  const scale = options.scale ?? 1
  const log = options.log ?? (() => {})
  const rows: Array<Row> = []
  const wanted = (part: string) => options.only === undefined || options.only.includes(part)

  if (wanted("memory-pair")) {
    const ours = await oursInMemory(makeMemoryPair())
    const vscode = vscodeInMemory()
    rows.push(...await roundTrips("in memory", ours, vscode, scale, log))
    await ours.effect.close()
    await vscode.close()
  }
  if (wanted("test-transport")) {
    // TestTransport for reference: the same peer, paying for a pair built for fault injection.
    const ours = await oursInMemory(TestTransport.makePair())
    const vscode = vscodeInMemory()
    const clients = [ours.effect, ours.promise, vscode]
    for (const client of clients) await client.pipelined(small, 2000, 256)
    const calls = Math.max(1024, Math.round(10_000 * scale))
    const [o, p, v] = await all(clients, scale < 1 ? 1 : REPS, (c) => c.pipelined(small, calls, 256))
    // No goal: the pair is built to inject faults in tests, not for speed.
    const r = row("in memory (ours: TestTransport)", "calls/s, 256 in flight, small", "calls/s", o, p, v)
    rows.push(r)
    log(format([r], false))
    await ours.effect.close()
    await vscode.close()
  }
  const pinnings = [...(wanted("child") ? [false] : []), ...(wanted("pinned") && hasTaskset() ? [true] : [])]
  if (wanted("pinned") && !hasTaskset()) log("taskset not found: no pinned rows")
  for (const pinned of pinnings) {
    const unpin = pinned ? pinSelf() : () => {}
    try {
      const ours = await oursChild(pinned)
      const vscode = vscodeChild(pinned)
      rows.push(...await roundTrips(pinned ? "child process, taskset -c 0" : "child process", ours, vscode, scale, log))
      await ours.effect.close()
      await vscode.close()
    } finally {
      unpin()
    }
  }
  if (wanted("heap")) {
    const memory = await memoryRows()
    for (const r of memory) log(format([r], false))
    rows.push(...memory)
  }
  return rows
}

// -- the table ------------------------------------------------------------------------------------------------------

const number = (x: number | undefined, unit: string): string => {
  if (x === undefined) return "-"
  if (unit === "µs") return x.toFixed(1)
  return Math.round(x).toLocaleString("en-US")
}

const columns = [
  "transport",
  "measure",
  "unit",
  "ours (Effect)",
  "ours (Promise)",
  "vscode",
  "Effect/vscode",
  "Promise/vscode",
  "goal",
  ""
] as const
const widths = [30, 42, 7, 13, 14, 12, 13, 14, 6, 9]

const met = (r: Row): string => {
  const marks = [r.met, r.promiseMet].filter((m) => m !== undefined)
  if (marks.length === 0) return ""
  return marks.every((m) => m) ? "ok" : [r.met === false ? "MISS" : "", r.promiseMet === false ? "MISS(P)" : ""]
    .filter((m) => m !== "").join(" ")
}

const ratio = (x: number | undefined): string => x === undefined ? "-" : `${x.toFixed(2)}x`

export const format = (rows: ReadonlyArray<Row>, header = true): string => {
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((cell, i) => i >= 3 && i <= 7 ? cell.padStart(widths[i]) : cell.padEnd(widths[i])).join(" ").trimEnd()
  const body = rows.map((r) =>
    line([
      r.transport,
      r.measure,
      r.unit,
      number(r.ours, r.unit),
      number(r.promise, r.unit),
      number(r.vscode, r.unit),
      ratio(r.ratio),
      ratio(r.promiseRatio),
      r.goal ?? "",
      met(r)
    ])
  )
  return (header ? [line(columns), ...body] : body).join("\n")
}

// Run as a program, not imported (bench/notify.ts imports its clients; bundled, both share one `import.meta.url`).
if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href && /peer\.(ts|mjs)$/.test(process.argv[1] ?? "")) {
  const memory = process.argv.find((arg) => arg.startsWith("--memory="))?.slice("--memory=".length)
  if (memory !== undefined) {
    const measure = memory === "ours"
      ? memoryOurs
      : memory === "promise"
      ? memoryPromise
      : memory === "fiber"
      ? memoryFiber
      : memoryVscode
    measure().then((result) => {
      process.stdout.write(JSON.stringify(result))
      process.exit(0)
    }, (error) => {
      process.stderr.write(`${String(error)}\n`)
      process.exit(1)
    })
  } else {
    const scaleArg = process.argv.find((arg) => arg.startsWith("--scale="))
    const onlyArg = process.argv.find((arg) => arg.startsWith("--only="))
    const started = performance.now()
    process.stdout.write(`${format([], true)}\n`)
    run({
      scale: scaleArg === undefined ? 1 : Number(scaleArg.slice("--scale=".length)),
      only: onlyArg === undefined ? undefined : onlyArg.slice("--only=".length).split(","),
      log: (l) => process.stdout.write(`${l}\n`)
    })
      .then((rows) => {
        const seconds = ((performance.now() - started) / 1000).toFixed(0)
        process.stdout.write(
          `\n${format(rows)}\n\n${rows.filter((r) => r.met === false).length} goals missed by Effect callers, ${
            rows.filter((r) => r.promiseMet === false).length
          } by Promise callers, ${seconds} s\n`
        )
        process.exit(0)
      }, (error) => {
        process.stderr.write(`${String(error?.stack ?? error)}\n`)
        process.exit(1)
      })
  }
}
