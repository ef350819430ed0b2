/**
 * One shutdown path, end to end, with real processes: a matrix of policy × trigger × where the work is × side, each
 * row asserting the exit codes, the elapsed time from the trigger to the exit (generous bounds: a shared machine), what
 * the other side saw (answered, cancelled on the wire, cut off and reported), and that no process is left. The rows
 * and why they were chosen are in docs/shutdown.md ("The matrix").
 *
 * Both sides are `fixtures/shutdown-peer.ts`: a host (`NodeChildProcess.makeConnection`) and its child
 * (`NodeStdio.makeConnection`), both under `NodeSignals.runMain`, both taking their policy from the environment, both
 * writing what happens to an events file.
 */
import { assert, layer } from "@effect/vitest"
import { ShutdownPolicy } from "@lifeline/kernel"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Fixtures from "./support/fixtures.js"
import { isAlive } from "./support/processes.js"

type Side = "host" | "child"
type Policy = "fail-fast" | "drain 1s" | "drain 6s"
type Trigger = "SIGTERM" | "SIGTERM twice" | "stop()" | "peer closes" | "peer crashes"
/** `bare`: the main fiber's own call, whose failure is the main fiber's (`return yield* peer.call(...)`). */
type Work = "main" | "bare" | "forked" | "inbound"

interface Event {
  readonly role: Side
  readonly t: number
  readonly e: string
  readonly [field: string]: any
}

interface Row {
  readonly side: Side
  readonly policy: Policy
  readonly trigger: Trigger
  readonly work: Work
  readonly workMs: number
  /** The child's policy, when it differs from the side's (the host's and the child's are the same otherwise). */
  readonly childPolicy?: Policy
  /** The host's policy, when it differs. */
  readonly hostPolicy?: Policy
  readonly cancellation?: "none"
  readonly exitGrace?: string
  /** From the trigger to the exit of the process on `side`, in ms. */
  readonly elapsed: readonly [number, number]
  /** Exit codes; `null` for a process killed by a signal (it logs no exit). */
  readonly exitCodes: { readonly host: number | null; readonly child: number | null }
  /**
   * Another exit code the child may record. A forced stop ends the child's stdin and sends SIGKILL at once: a child
   * that is already in its own exit handler when the signal lands records its code; the host still reports the
   * SIGKILL, which the row's check asserts.
   */
  readonly childMayRecord?: number
  readonly check: (events: Events) => void
  /** What the row shows, in a few words (the test's name). */
  readonly saw: string
}

const other = (side: Side): Side => side === "host" ? "child" : "host"

const policyEnv = (policy: Policy): Record<string, string> =>
  policy === "fail-fast"
    ? { [ShutdownPolicy.POLICY_VARIABLE]: "fail-fast" }
    : {
      [ShutdownPolicy.POLICY_VARIABLE]: "drain",
      [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: policy === "drain 1s" ? "1 second" : "6 seconds"
    }

/** The events of one run, with the questions the rows ask of them. */
class Events {
  constructor(readonly all: ReadonlyArray<Event>, readonly t0: number, readonly stderr = "") {}
  of(role: Side, e: string): ReadonlyArray<Event> {
    return this.all.filter((event) => event.role === role && event.e === e)
  }
  one(role: Side, e: string): Event {
    const found = this.of(role, e)
    assert.strictEqual(found.length, 1, `${role} ${e}: ${JSON.stringify(this.all)}`)
    return found[0]
  }
  none(role: Side, e: string): void {
    assert.deepStrictEqual(this.of(role, e), [], `${role} ${e}`)
  }
  call(role: Side): string {
    return this.one(role, "call").outcome
  }
  served(role: Side): string {
    return this.one(role, "served").outcome
  }
  shutdown(role: Side): Event {
    return this.one(role, "shutdown")
  }
  /** The host's stderr has no ERROR line: a stop a signal asked for is no failure of the program. */
  noErrorLogged(): void {
    assert.notMatch(this.stderr, /level=ERROR/, this.stderr)
  }
}

const matrix: ReadonlyArray<Row> = [
  {
    side: "host",
    policy: "fail-fast",
    trigger: "SIGTERM",
    work: "main",
    workMs: 3000,
    elapsed: [0, 2500],
    exitCodes: { host: 143, child: 0 },
    saw: "the call is cut at once and cancelled on the wire: the child's handler stops too",
    check: (ev) => {
      assert.strictEqual(ev.call("host"), "ShutdownError:Interrupted")
      assert.strictEqual(ev.shutdown("host").reason, "Interrupted")
      assert.strictEqual(ev.served("child"), "interrupted")
      assert.strictEqual(ev.shutdown("child").cancelledByPeer, 1)
    }
  },
  {
    side: "host",
    policy: "drain 1s",
    trigger: "SIGTERM",
    work: "main",
    workMs: 500,
    elapsed: [300, 3000],
    exitCodes: { host: 143, child: 0 },
    saw: "a call the main fiber awaits finishes within the drain",
    check: (ev) => {
      assert.strictEqual(ev.call("host"), "answered")
      assert.strictEqual(ev.served("child"), "answered")
      assert.isTrue(ev.shutdown("host").drained)
      assert.strictEqual(ev.one("host", "stopped").endedBy, "EndOfInput")
    }
  },
  {
    side: "host",
    policy: "drain 1s",
    trigger: "SIGTERM",
    work: "forked",
    workMs: 3000,
    elapsed: [900, 3500],
    exitCodes: { host: 143, child: 0 },
    saw: "a forked call is cut at the deadline, reported, and cancelled on the wire",
    check: (ev) => {
      assert.strictEqual(ev.call("host"), "ShutdownError:DrainTimeout")
      assert.deepStrictEqual(ev.shutdown("host").cutOff, ["outbound work"])
      assert.strictEqual(ev.served("child"), "interrupted")
      assert.strictEqual(ev.shutdown("child").cancelledByPeer, 1)
    }
  },
  {
    side: "host",
    policy: "drain 6s",
    trigger: "SIGTERM",
    work: "main",
    workMs: 5500,
    elapsed: [5000, 8500],
    exitCodes: { host: 143, child: 0 },
    saw: "a drain longer than the old 5 s cap drains in full: the call is answered after 5.5 s",
    check: (ev) => {
      assert.strictEqual(ev.call("host"), "answered")
      assert.strictEqual(ev.one("host", "stopped").close, "Completed")
    }
  },
  {
    side: "host",
    policy: "drain 1s",
    trigger: "SIGTERM",
    work: "inbound",
    workMs: 500,
    elapsed: [300, 3000],
    exitCodes: { host: 143, child: 0 },
    saw: "the host's handler finishes within the drain and the child gets its answer",
    check: (ev) => {
      assert.strictEqual(ev.served("host"), "answered")
      assert.strictEqual(ev.call("child"), "answered")
      assert.isTrue(ev.shutdown("host").drained)
    }
  },
  {
    side: "host",
    policy: "drain 6s",
    trigger: "SIGTERM twice",
    work: "forked",
    workMs: 30_000,
    elapsed: [400, 3000],
    exitCodes: { host: 2, child: null },
    childMayRecord: 0,
    saw: "a second signal cuts the drain short: fail-fast, SIGKILL to the child, exit 2",
    check: (ev) => {
      assert.match(ev.call("host"), /^ShutdownError/)
      const stopped = ev.one("host", "stopped")
      assert.isTrue(stopped.forced)
      assert.deepStrictEqual(stopped.exit, { exitCode: null, signal: "SIGKILL" })
    }
  },
  {
    side: "host",
    policy: "drain 1s",
    trigger: "stop()",
    work: "main",
    workMs: 500,
    elapsed: [300, 3000],
    exitCodes: { host: 0, child: 0 },
    saw: "stop() drains the call, then the child exits at the end of its input",
    check: (ev) => {
      assert.strictEqual(ev.call("host"), "answered")
      assert.strictEqual(ev.one("host", "stopped").endedBy, "EndOfInput")
      ev.one("host", "stop()")
    }
  },
  {
    side: "host",
    policy: "fail-fast",
    trigger: "stop()",
    work: "forked",
    workMs: 3000,
    elapsed: [0, 2500],
    exitCodes: { host: 0, child: 0 },
    saw: "stop() under fail-fast cuts and cancels at once",
    check: (ev) => {
      assert.strictEqual(ev.call("host"), "ShutdownError:Stop")
      assert.strictEqual(ev.served("child"), "interrupted")
      assert.strictEqual(ev.shutdown("child").cancelledByPeer, 1)
    }
  },
  {
    side: "host",
    policy: "drain 1s",
    childPolicy: "fail-fast",
    trigger: "peer closes",
    work: "main",
    workMs: 3000,
    elapsed: [0, 2500],
    exitCodes: { host: 0, child: 0 },
    saw: "the child closes: the call fails with PeerClosed/PeerExited at once, no drain for a dead peer",
    check: (ev) => {
      assert.match(ev.call("host"), /^Peer(Closed|Exited)/)
      assert.strictEqual(ev.served("child"), "interrupted")
      assert.deepStrictEqual(ev.shutdown("child").cutOff, ["inbound work"])
      assert.strictEqual(ev.one("host", "stopped").endedBy, "Exited")
    }
  },
  {
    side: "host",
    policy: "drain 1s",
    trigger: "peer crashes",
    work: "forked",
    workMs: 3000,
    elapsed: [0, 2500],
    exitCodes: { host: 0, child: null },
    saw: "the child is SIGKILLed: the call fails with PeerExited (SIGKILL), the connection Failed",
    check: (ev) => {
      assert.strictEqual(ev.call("host"), "PeerExited:SIGKILL")
      assert.strictEqual(ev.shutdown("host").reason, "Failed")
      assert.deepStrictEqual(ev.one("host", "stopped").exit, { exitCode: null, signal: "SIGKILL" })
    }
  },
  {
    side: "host",
    policy: "fail-fast",
    trigger: "peer crashes",
    work: "inbound",
    workMs: 3000,
    elapsed: [0, 2500],
    exitCodes: { host: 0, child: null },
    saw: "the caller crashed: the host's handler is interrupted and reported",
    check: (ev) => {
      assert.strictEqual(ev.served("host"), "interrupted")
      assert.deepStrictEqual(ev.shutdown("host").cutOff, ["inbound work"])
    }
  },
  {
    side: "child",
    policy: "drain 1s",
    trigger: "SIGTERM",
    work: "inbound",
    workMs: 500,
    elapsed: [300, 3000],
    exitCodes: { host: 0, child: 143 },
    saw: "the child's handler finishes within its drain: the host gets its answer",
    check: (ev) => {
      assert.strictEqual(ev.served("child"), "answered")
      assert.strictEqual(ev.call("host"), "answered")
      assert.isTrue(ev.shutdown("child").drained)
      assert.strictEqual(ev.shutdown("child").reason, "Interrupted")
    }
  },
  {
    side: "child",
    policy: "fail-fast",
    trigger: "SIGTERM",
    work: "main",
    workMs: 3000,
    elapsed: [0, 2500],
    exitCodes: { host: 0, child: 143 },
    saw: "the child's call is cut at once and cancelled: the host's handler stops",
    check: (ev) => {
      assert.match(ev.call("child"), /^ShutdownError/)
      assert.strictEqual(ev.served("host"), "interrupted")
      assert.strictEqual(ev.shutdown("host").cancelledByPeer, 1)
    }
  },
  {
    side: "child",
    policy: "drain 6s",
    trigger: "SIGTERM",
    work: "inbound",
    workMs: 5500,
    elapsed: [5000, 8500],
    exitCodes: { host: 0, child: 143 },
    saw: "the child drains longer than 5 s: the host's call is answered after 5.5 s",
    check: (ev) => {
      assert.strictEqual(ev.served("child"), "answered")
      assert.strictEqual(ev.call("host"), "answered")
    }
  },
  {
    side: "child",
    policy: "drain 6s",
    trigger: "SIGTERM twice",
    work: "inbound",
    workMs: 30_000,
    elapsed: [400, 3000],
    exitCodes: { host: 0, child: 2 },
    saw: "a second signal cuts the child's drain: its handler is cut off and reported, exit 2",
    check: (ev) => {
      assert.strictEqual(ev.served("child"), "interrupted")
      assert.deepStrictEqual(ev.shutdown("child").cutOff, ["inbound work"])
      assert.match(ev.call("host"), /^Peer(Closed|Exited)/)
    }
  },
  {
    side: "child",
    policy: "drain 1s",
    trigger: "stop()",
    work: "forked",
    workMs: 3000,
    elapsed: [900, 3500],
    exitCodes: { host: 0, child: 0 },
    saw: "the child's stop() cuts its call at the deadline and cancels it: the host's handler stops",
    check: (ev) => {
      assert.strictEqual(ev.call("child"), "ShutdownError:DrainTimeout")
      assert.deepStrictEqual(ev.shutdown("child").cutOff, ["outbound work"])
      assert.strictEqual(ev.served("host"), "interrupted")
      assert.strictEqual(ev.shutdown("host").cancelledByPeer, 1)
    }
  },
  {
    side: "child",
    policy: "drain 1s",
    hostPolicy: "fail-fast",
    trigger: "peer closes",
    work: "inbound",
    workMs: 3000,
    elapsed: [0, 2500],
    exitCodes: { host: 0, child: 0 },
    saw: "the host stops fail-fast: the child is told ($/cancelRequest), stops its handler, then ends with its input",
    check: (ev) => {
      assert.strictEqual(ev.call("host"), "ShutdownError:Stop")
      assert.strictEqual(ev.served("child"), "interrupted")
      assert.strictEqual(ev.shutdown("child").cancelledByPeer, 1)
      assert.strictEqual(ev.shutdown("child").reason, "TransportClosed")
    }
  },
  {
    side: "child",
    policy: "drain 1s",
    trigger: "peer crashes",
    work: "inbound",
    workMs: 500,
    elapsed: [300, 3000],
    exitCodes: { host: null, child: 0 },
    saw: "the host is SIGKILLed: the child sees the end of its input, drains, exits by itself",
    check: (ev) => {
      assert.strictEqual(ev.served("child"), "answered")
      assert.strictEqual(ev.shutdown("child").reason, "TransportClosed")
      assert.isTrue(ev.shutdown("child").drained)
    }
  },
  {
    side: "child",
    policy: "fail-fast",
    trigger: "peer crashes",
    work: "main",
    workMs: 3000,
    elapsed: [0, 2500],
    exitCodes: { host: null, child: 0 },
    saw: "the host is SIGKILLed while the child waits for it: the call fails with PeerClosed, exit 0",
    check: (ev) => {
      assert.strictEqual(ev.call("child"), "PeerClosed:TransportClosed")
    }
  },
  {
    side: "host",
    policy: "drain 1s",
    cancellation: "none",
    exitGrace: "2500 millis",
    trigger: "SIGTERM",
    work: "forked",
    workMs: 3000,
    elapsed: [1800, 5000],
    exitCodes: { host: 143, child: 0 },
    saw: "plain JSON-RPC (no cancellation): the child is not told; its own drain cuts and reports at its deadline",
    check: (ev) => {
      assert.strictEqual(ev.call("host"), "ShutdownError:DrainTimeout")
      const child = ev.shutdown("child")
      assert.strictEqual(child.cancelledByPeer, 0)
      assert.strictEqual(child.reason, "TransportClosed")
      assert.isFalse(child.drained)
      assert.deepStrictEqual(child.cutOff, ["inbound work"])
      assert.strictEqual(ev.one("host", "stopped").endedBy, "EndOfInput")
    }
  },
  {
    side: "host",
    policy: "fail-fast",
    trigger: "SIGTERM",
    work: "bare",
    workMs: 30_000,
    elapsed: [0, 2500],
    exitCodes: { host: 143, child: 0 },
    saw: "the main fiber's own call is cut off: it fails with ShutdownError, the host exits 143, no ERROR logged",
    check: (ev) => {
      assert.strictEqual(ev.call("host"), "ShutdownError:Interrupted")
      ev.noErrorLogged()
      assert.match(ev.stderr, /level=INFO .*SIGTERM: the stop cut off what the program was waiting for/)
    }
  },
  {
    side: "host",
    policy: "drain 1s",
    trigger: "SIGTERM",
    work: "bare",
    workMs: 30_000,
    elapsed: [900, 3500],
    exitCodes: { host: 143, child: 0 },
    saw: "the main fiber's own call is cut at the drain deadline: DrainTimeout, the host exits 143, no ERROR logged",
    check: (ev) => {
      assert.strictEqual(ev.call("host"), "ShutdownError:DrainTimeout")
      assert.strictEqual(ev.served("child"), "interrupted")
      ev.noErrorLogged()
    }
  },
  {
    side: "host",
    policy: "drain 6s",
    trigger: "SIGTERM twice",
    work: "bare",
    workMs: 30_000,
    elapsed: [400, 3000],
    exitCodes: { host: 2, child: null },
    childMayRecord: 0,
    saw: "a second signal cuts the drain the main fiber's call waits in: Forced (no deadline passed), exit 2",
    check: (ev) => {
      assert.strictEqual(ev.call("host"), "ShutdownError:Forced")
      assert.isTrue(ev.one("host", "stopped").forced)
      ev.noErrorLogged()
    }
  },
  {
    side: "child",
    policy: "fail-fast",
    trigger: "SIGTERM",
    work: "bare",
    workMs: 30_000,
    elapsed: [0, 2500],
    exitCodes: { host: 0, child: 143 },
    saw: "the child's main fiber's own call is cut off: the child exits 143",
    check: (ev) => {
      assert.strictEqual(ev.call("child"), "ShutdownError:Interrupted")
      assert.strictEqual(ev.served("host"), "interrupted")
      // The host logs the child's stderr lines: none of them is an ERROR either.
      ev.noErrorLogged()
    }
  }
]

const readEvents = (path: string): Array<Event> =>
  Fs.readFileSync(path, "utf8").split("\n").filter((line) => line !== "").map((line) => JSON.parse(line))

/** The live members of process group `pgid` (zombies left out). */
const groupMembers = (pgid: number): Array<number> =>
  Fs.readdirSync("/proc").flatMap((entry) => {
    if (!/^\d+$/.test(entry)) return []
    try {
      const stat = Fs.readFileSync(`/proc/${entry}/stat`, "latin1")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      return fields[2] === String(pgid) && fields[0] !== "Z" && fields[0] !== "X" ? [Number(entry)] : []
    } catch {
      return []
    }
  })

const until = (condition: () => boolean, what: string, timeoutMs: number, diagnose: () => string) =>
  Effect.gen(function*() {
    const start = performance.now()
    while (!condition()) {
      if (performance.now() - start > timeoutMs) {
        return yield* Effect.die(new Error(`never happened within ${timeoutMs} ms: ${what}\n${diagnose()}`))
      }
      yield* Effect.sleep("10 millis")
    }
  })

const run = (row: Row) =>
  Effect.gen(function*() {
    const programs = yield* Fixtures.Programs
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-shutdown-"))),
      (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
    )
    const eventsPath = Path.join(dir, "events.jsonl")
    Fs.writeFileSync(eventsPath, "")
    const hostPolicy = row.hostPolicy ?? row.policy
    const childPolicy = policyEnv(row.childPolicy ?? row.policy)
    const caller = row.work === "inbound" ? other(row.side) : row.side
    const env: Record<string, string | undefined> = {
      ...process.env,
      [ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]: undefined,
      ...policyEnv(hostPolicy),
      ROLE: "host",
      EVENTS: eventsPath,
      CHILD_POLICY: childPolicy[ShutdownPolicy.POLICY_VARIABLE],
      ...(childPolicy[ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE] === undefined
        ? {}
        : { CHILD_DRAIN_TIMEOUT: childPolicy[ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE] }),
      CALLER: caller,
      CALL_IN: row.work === "inbound" ? "main" : row.work,
      WORK_MS: String(row.workMs),
      ...(row.cancellation === undefined ? {} : { CANCELLATION: row.cancellation }),
      ...(row.exitGrace === undefined ? {} : { EXIT_GRACE: row.exitGrace })
    }
    let stderr = ""
    const host = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const child = ChildProcess.spawn(process.execPath, [...programs.argv("shutdown-peer")], {
          env: Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined)),
          stdio: ["ignore", "ignore", "pipe"]
        })
        child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
        return child
      }),
      (host) =>
        Effect.sync(() => {
          // A failed row must not leave processes behind for the next one.
          for (const event of readEvents(eventsPath)) {
            if (event.e === "ready" && isAlive(event.pid)) process.kill(event.pid, "SIGKILL")
          }
          if (host.exitCode === null && host.signalCode === null) host.kill("SIGKILL")
        })
    )
    const diagnose = () => `events: ${Fs.readFileSync(eventsPath, "utf8")}\nhost stderr:\n${stderr.slice(-4000)}`
    const events = () => readEvents(eventsPath)
    const has = (role: Side, e: string) => events().some((event) => event.role === role && event.e === e)

    // The work is in flight once the handler on the called side has started.
    yield* until(
      () => has("host", "ready") && has("child", "ready") && has(other(caller), "serving"),
      "both sides ready and the work in flight",
      20_000,
      diagnose
    )
    const pidOf = (role: Side) => events().find((event) => event.role === role && event.e === "ready")!.pid as number
    const pids = { host: pidOf("host"), child: pidOf("child") }
    assert.strictEqual(host.pid, pids.host)

    const t0 = Date.now()
    switch (row.trigger) {
      case "SIGTERM":
        process.kill(pids[row.side], "SIGTERM")
        break
      case "SIGTERM twice":
        process.kill(pids[row.side], "SIGTERM")
        yield* Effect.sleep("500 millis")
        process.kill(pids[row.side], "SIGTERM")
        break
      case "stop()":
        process.kill(pids[row.side], "SIGUSR2")
        break
      case "peer closes":
        process.kill(pids[other(row.side)], "SIGUSR2")
        break
      case "peer crashes":
        process.kill(pids[other(row.side)], "SIGKILL")
        break
    }

    // Both processes and everything in the child's process group are gone.
    yield* until(
      () => !isAlive(pids.host) && !isAlive(pids.child) && groupMembers(pids.child).length === 0,
      "every process gone",
      15_000,
      diagnose
    )
    const ev = new Events(events(), t0, stderr)
    const exitCode = (role: Side) => ev.of(role, "exit")[0]?.code ?? null
    const child = exitCode("child")
    const expected = row.childMayRecord !== undefined && child === row.childMayRecord
      ? { ...row.exitCodes, child }
      : row.exitCodes
    assert.deepStrictEqual({ host: exitCode("host"), child }, expected, diagnose())
    const end = ev.one(row.side, "exit").t - t0
    yield* Effect.logInfo(`${title(row)}: ${row.side} exited ${end} ms after the trigger`)
    assert.isAtLeast(end, row.elapsed[0], diagnose())
    assert.isAtMost(end, row.elapsed[1], diagnose())
    row.check(ev)
  })

const title = (row: Row) =>
  `${row.side} | ${row.trigger} | ${row.work} | ${row.policy}` +
  (row.childPolicy !== undefined ? ` (child ${row.childPolicy})` : "") +
  (row.hostPolicy !== undefined ? ` (host ${row.hostPolicy})` : "") +
  (row.cancellation === "none" ? " | no cancellation" : "")

layer(Fixtures.layer(["shutdown-peer"]), { excludeTestServices: true, timeout: "60 seconds" })(
  "Shutdown: one path from a signal (or stop()) to the last SIGKILL",
  (it) => {
    for (const row of matrix) {
      it.effect(`${title(row)}: ${row.saw}`, () => Effect.scoped(run(row)), 30_000)
    }
  }
)
