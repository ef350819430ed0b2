/**
 * A child process as a transport, for the host side: spawned from an Effect `ChildProcess` command (arguments,
 * environment, working directory) inside a Scope, stdin/stdout as the `Transport`, stderr read line by line into the
 * host's log with its last lines kept, the exit observed, and one bounded stop sequence when the Scope closes:
 *
 * (protocol shutdown, ≤ 5 s) → end of stdin → wait ≤ 1 s → SIGTERM to the process group → wait ≤ 1 s → SIGKILL to
 * the process group → wait ≤ 1 s, then the same for descendants left in the group.
 *
 * Why not Effect's `ChildProcessSpawner` (`NodeChildProcessSpawner`, 4.1): its release and `kill` escalate to SIGKILL
 * only with `forceKillAfter`, time their waits with `setTimeout` rather than the Clock, and then still wait for the
 * exit without a limit; its handle's stdin is a `Sink` (no send-by-send writes, no `trySend`), its exit code reports
 * a signal only inside an error message, and it counts a zombie as a live group member. We keep its `Command` as the
 * description of what to run and its conventions (`detached` by default on POSIX, so the child leads its own process
 * group and `kill(-pid)` reaches grandchildren; `env` with `extendEnv`), and own the process handle.
 *
 * @since 0.1.0
 */
import * as Connection from "@lifeline/kernel/Connection"
import type * as Journal from "@lifeline/kernel/Journal"
import type * as Lifecycle from "@lifeline/kernel/Lifecycle"
import type * as Method from "@lifeline/kernel/Method"
import type * as Peer from "@lifeline/kernel/Peer"
import type * as PeerError from "@lifeline/kernel/PeerError"
import * as Transport from "@lifeline/kernel/Transport"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import type * as ChildProcess from "effect/process/ChildProcess"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/childProcess.js"
import * as NodeSignals from "./NodeSignals.js"

/**
 * The child could not be started: the program was not found or may not be run, the working directory does not exist,
 * or the `Command` is `Unsupported`: a pipeline (spawn one program; use a shell command line for a pipeline), or a
 * `shell` command with arguments (pass the whole script as the command, as Effect's spawner requires). `Unrecorded`:
 * the child was to be recorded in a journal (`Options.journal`) and the journal failed, so it was killed at once,
 * before anything talked to it; `cause` is the `JournalError`.
 *
 * @since 0.1.0
 * @category errors
 */
export class SpawnError extends Schema.TaggedError<SpawnError>("@lifeline/node/SpawnError")("SpawnError", {
  reason: Schema.Literals(["NotFound", "PermissionDenied", "BadDirectory", "Unsupported", "Unrecorded", "Unknown"]),
  command: Schema.String,
  detail: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {
  override get message(): string {
    return `cannot spawn ${this.command}: ${this.detail}`
  }
}

/**
 * How the child ended: an exit code, or the signal that killed it (then `exitCode` is null).
 *
 * @since 0.1.0
 * @category models
 */
export interface ExitStatus {
  readonly exitCode: number | null
  readonly signal: NodeJS.Signals | null
}

/**
 * The step of the stop sequence after which the child was seen to exit: it had `Exited` before the stop began, or
 * exited during the protocol `Shutdown`, after the `EndOfInput`, after SIGTERM (`Terminate`) or SIGKILL (`Kill`);
 * `Unkillable` when even SIGKILL was not followed by an exit within `killTimeout` (a process stuck in the kernel).
 *
 * @since 0.1.0
 * @category models
 */
export type StopStep = "Exited" | "Shutdown" | "EndOfInput" | "Terminate" | "Kill" | "Unkillable"

/**
 * What became of the protocol shutdown step: not run (`Skipped`: none was given, or the child had already exited),
 * answered, failed (an error answer, or the child exited first), or no answer within `shutdownTimeout`.
 *
 * @since 0.1.0
 * @category models
 */
export type ShutdownOutcome = "Skipped" | "Completed" | "Failed" | "TimedOut"

/**
 * What a stop did.
 *
 * @since 0.1.0
 * @category models
 */
export interface StopReport {
  readonly endedBy: StopStep
  readonly shutdown: ShutdownOutcome
  /**
   * Processes left in the child's process group once the child had exited (grandchildren): `None`, or stopped by
   * SIGTERM (`Terminated`), by SIGKILL (`Killed`), or still there after SIGKILL (`Survived`).
   */
  readonly descendants: "None" | "Terminated" | "Killed" | "Survived"
  /** Undefined only when the child was `Unkillable`. */
  readonly exit: ExitStatus | undefined
  readonly elapsedMillis: number
}

/**
 * The bounds of the stop sequence. The defaults are Hermes': 5 seconds for the answer to `shutdown`, then SIGKILL.
 *
 * @since 0.1.0
 * @category models
 */
export interface StopOptions {
  /** How long the protocol shutdown step may take; also bounds closing the connection. Default 5 seconds. */
  readonly shutdownTimeout?: Duration.Input | undefined
  /** How long the child has to exit after its stdin ended. Default 1 second. */
  readonly exitTimeout?: Duration.Input | undefined
  /** How long the process group has after SIGTERM. Default 1 second. */
  readonly terminateTimeout?: Duration.Input | undefined
  /** How long to wait for the exit after SIGKILL before reporting `Unkillable`. Default 1 second. */
  readonly killTimeout?: Duration.Input | undefined
  /**
   * A child that does not answer the protocol shutdown in time is unresponsive: SIGKILL it at once instead of ending
   * its input and trying SIGTERM first (Hermes: "Timeout exceeded: process forcibly terminated"). Default true.
   */
  readonly killOnShutdownTimeout?: boolean | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * What to run: one program (`ChildProcess.make`), its arguments (a `Redacted` one is passed as is and recorded as
   * `<redacted>`), `cwd`, `env` (which replaces the host's environment unless `extendEnv: true`), `shell`, `detached`
   * (default true on POSIX; false leaves the child in the host's process group, and signals reach the child alone) and
   * `windowsHide`. Ignored: its stdio settings and `additionalFds` (stdin, stdout and stderr are always pipes), and
   * `killSignal`/`forceKillAfter` (the stop sequence decides).
   */
  readonly command: ChildProcess.Command
  /** The child's name in the host's log. Default: the command. */
  readonly name?: string | undefined
  /** How many of the last stderr lines are kept (for `PeerExited.stderrTail`). Default 50. */
  readonly stderrTailLines?: number | undefined
  /** Longer stderr lines are cut into pieces of this many characters. Default 8192. */
  readonly maxStderrLineLength?: number | undefined
  /** The level stderr lines are logged at; `None` keeps them out of the log (they are still kept). Default `Debug`. */
  readonly stderrLogLevel?: LogLevel.LogLevel | undefined
  readonly stop?: StopOptions | undefined
  /** The protocol's shutdown step (e.g. a `shutdown` request), run first when the child is stopped. */
  readonly shutdown?: Effect.Effect<unknown, unknown> | undefined
  /**
   * Records the child in this journal, so that a host that crashes leaves no orphan: right after the spawn, its pid,
   * start time and command become an `InFlight` entry of kind `process` (`Recovery.recordProcess`, under the fiber's
   * `Journal.Owner`), and its exit is recorded when it exits, on its own or killed by the stop sequence
   * (`Recovery.processExited`). After a crash, the next start's `Recovery.run({ reap: SqliteJournal.reapProcess() })`
   * finds the entries still `InFlight` and kills those children.
   *
   * If the spawn cannot be recorded, the child is killed at once and the spawn fails with `SpawnError` `Unrecorded`.
   * If its exit cannot be recorded, a warning is logged and the entry stays `InFlight`: the next start finds the pid
   * gone (or reused) and leaves it alone. A child that even SIGKILL did not end (`Unkillable`) stays `InFlight` too,
   * for the next start to try again. Default: nothing is recorded.
   *
   * @example
   * ```ts
   * import { Effect, Layer } from "effect"
   * import { ChildProcess } from "effect/process"
   * import { Journal } from "@lifeline/kernel"
   * import { NodeChildProcess, SqliteJournal } from "@lifeline/node"
   *
   * const TransportLive = Layer.unwrap(
   *   Effect.map(Journal.Journal, (journal) =>
   *     NodeChildProcess.layer({ command: ChildProcess.make("my-language-server", ["--stdio"]), journal }))
   * ).pipe(Layer.provide(SqliteJournal.layerConfig))
   * ```
   */
  readonly journal?: Journal.Journal.Service | undefined
}

/**
 * A running child.
 *
 * @since 0.1.0
 * @category models
 */
export interface Child {
  readonly pid: number
  readonly name: string
  /**
   * stdin and stdout. `incoming` ends when the child closes its stdout (and, if it exits, once the exit has been
   * observed, so a peer on top sees `PeerExited`); `send` waits while the pipe is full; `end` closes stdin.
   */
  readonly transport: Transport.Transport.Service
  /** Waits for the exit. */
  readonly exit: Effect.Effect<ExitStatus>
  readonly exitStatus: Effect.Effect<Option.Option<ExitStatus>>
  /** Waits for the exit, then the typed error that pending calls fail with: code, signal and the stderr tail. */
  readonly exited: Effect.Effect<PeerError.PeerExited>
  /** The last lines of stderr, oldest first. */
  readonly stderrTail: Effect.Effect<ReadonlyArray<string>>
  /** Sends a signal to the child's process group now (to the child alone on Windows). Does not wait. */
  readonly kill: (signal: NodeJS.Signals) => Effect.Effect<void>
  /** Runs the stop sequence now; closing the Scope runs it too. It runs once: every caller gets the same report. */
  readonly stop: Effect.Effect<StopReport>
}

const nameOf = (command: ChildProcess.Command): string =>
  command._tag === "StandardCommand" ? command.command.split(/[\\/]/).pop() ?? command.command : "pipeline"

const argv = (command: ChildProcess.Command): ReadonlyArray<string> =>
  command._tag === "StandardCommand" ? internal.argvOf(command) : ["pipeline"]

const commandLine = (command: ChildProcess.Command): string => argv(command).join(" ")

const makeInternal = (options: Options): Effect.Effect<internal.Internal, SpawnError, Scope.Scope> =>
  Effect.gen(function*() {
    const stop = internal.decodeStopSettings(options.stop)
    const signals = yield* Effect.serviceOption(NodeSignals.NodeSignals)
    const handle = yield* Effect.mapError(
      internal.spawnHandle(options.command),
      (failure) => new SpawnError({ ...failure, command: commandLine(options.command) })
    )
    if (options.journal !== undefined) {
      // Before the stop finalizer that `internal.make` registers, so the exit is recorded after the stop has run.
      yield* internal.record(handle, options.journal, argv(options.command)).pipe(
        Effect.mapError((error) =>
          new SpawnError({
            reason: "Unrecorded",
            command: commandLine(options.command),
            detail: `the child could not be recorded in the journal, so it was killed: ${error.message}`,
            cause: error
          })
        )
      )
    }
    return yield* internal.make(handle, {
      name: options.name ?? nameOf(options.command),
      stderrTailLines: options.stderrTailLines ?? 50,
      maxStderrLineLength: options.maxStderrLineLength ?? 8192,
      stderrLogLevel: internal.logLevelOf(options.stderrLogLevel),
      stop,
      shutdown: options.shutdown,
      forced: Option.getOrUndefined(Option.map(signals, (service) => service.forced))
    })
  })

/**
 * Spawns a child in the current Scope. Closing the Scope runs the stop sequence; the child and its process group are
 * gone afterwards (or the report says `Unkillable`/`Survived`). A second SIGTERM/SIGINT received by a host run with
 * `NodeSignals.runMain` cuts the sequence short and goes straight to SIGKILL.
 *
 * @example
 * ```ts
 * import { Effect, Stream } from "effect"
 * import { ChildProcess } from "effect/process"
 * import { NodeChildProcess } from "@lifeline/node"
 *
 * const program = Effect.gen(function*() {
 *   const child = yield* NodeChildProcess.make({ command: ChildProcess.make("cat") })
 *   yield* child.transport.send([new TextEncoder().encode("hello")])
 *   yield* child.transport.end
 *   yield* Stream.runDrain(child.transport.incoming)
 *   return yield* child.exit // { exitCode: 0, signal: null }
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<Child, SpawnError, Scope.Scope> =>
  Effect.map(makeInternal(options), (self) => self.child)

/**
 * The transport of a child spawned for the life of the layer.
 *
 * @example
 * ```ts
 * import { ChildProcess } from "effect/process"
 * import { NodeChildProcess } from "@lifeline/node"
 *
 * const TransportLive = NodeChildProcess.layer({ command: ChildProcess.make("my-language-server", ["--stdio"]) })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<Transport.Transport, SpawnError> =>
  Layer.effect(Transport.Transport, Effect.map(make(options), (child) => child.transport))

/**
 * Options of {@link makePeer}: the peer's options without the transport, the child's, and a protocol shutdown step
 * that gets the peer.
 *
 * @since 0.1.0
 * @category models
 */
export interface PeerOptions<Serves extends Method.Any, Calls extends Method.Any, R>
  extends Omit<Peer.Options<Serves, Calls, R>, "transport">, Omit<Options, "shutdown">
{
  /** The protocol's shutdown step, e.g. `(peer) => peer.call(Shutdown, { reason: "closing" })`. */
  readonly shutdown?: ((peer: Peer.Peer<Serves, Calls>) => Effect.Effect<unknown, unknown>) | undefined
}

/**
 * A child and the peer that talks to it.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChildPeer<Serves extends Method.Any, Calls extends Method.Any> {
  readonly child: Child
  readonly peer: Peer.Peer<Serves, Calls>
}

/**
 * Spawns a child and starts a JSON-RPC peer on its stdio. When the child exits, every pending call fails at once with
 * `PeerExited` (exit code, signal, stderr tail) and new calls are refused with it. Closing the Scope runs one stop
 * sequence: the `shutdown` step, then closing the peer (pending calls fail, queued frames are flushed, stdin ends),
 * then the waits and signals of {@link make}.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { ChildProcess } from "effect/process"
 * import { Method, Protocol } from "@lifeline/kernel"
 * import { NodeChildProcess } from "@lifeline/node"
 *
 * const Echo = Method.request("echo", { params: Schema.Struct({ text: Schema.String }), result: Schema.String })
 * const Shutdown = Method.request("shutdown", { params: Schema.Struct({}), result: Schema.Unknown })
 * const client = Protocol.make({ calls: [Echo, Shutdown] })
 *
 * const program = Effect.gen(function*() {
 *   const { peer } = yield* NodeChildProcess.makePeer({
 *     command: ChildProcess.make("node", ["echo-server.js"]),
 *     protocol: client,
 *     handlers: {},
 *     shutdown: (peer) => peer.call(Shutdown, {})
 *   })
 *   return yield* peer.call(Echo, { text: "hi" })
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makePeer = <Serves extends Method.Any, Calls extends Method.Any, R = never>(
  options: PeerOptions<Serves, Calls, R>
): Effect.Effect<ChildPeer<Serves, Calls>, SpawnError, Scope.Scope | R> =>
  Effect.gen(function*() {
    const { shutdown, ...rest } = options
    const self = yield* makeInternal(rest)
    const peer = yield* internal.attachPeer(self, { ...rest, transport: self.child.transport }, shutdown)
    return { child: self.child, peer }
  })

/**
 * Options of {@link makeConnection}: the connection's options without the transport (protocol, handlers, handshake,
 * policy, ...), the child's, and a protocol shutdown step that gets the connection.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConnectionOptions<Serves extends Method.Any, Calls extends Method.Any, R>
  extends Omit<Connection.Options<Serves, Calls, R>, "transport">, Omit<Options, "shutdown">
{
  /** The protocol's shutdown step, e.g. `(connection) => connection.peer.call(Shutdown, { reason: "closing" })`. */
  readonly shutdown?:
    | ((connection: Connection.Connection<Serves, Calls>) => Effect.Effect<unknown, unknown>)
    | undefined
}

/**
 * A child and the connection (peer, lifecycle, shutdown policy) that talks to it.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChildConnection<Serves extends Method.Any, Calls extends Method.Any> {
  readonly child: Child
  readonly connection: Connection.Connection<Serves, Calls>
}

/**
 * Spawns a child and runs a `Connection` on its stdio: the handshake (e.g. `Connection.initiate` with Hermes'
 * `initialize`), the gates, and a stop under the shutdown policy. When the child exits on its own, pending calls fail
 * at once with `PeerExited` and the lifecycle moves to `Failed`; an exit during the stop ends in `Closed`. Closing
 * the Scope runs the stop sequence of {@link make}, whose "end of input" step is the connection's stop under its
 * policy (a drain waits, bounded by `shutdownTimeout`; a second signal to a host run by `NodeSignals.runMain` cuts it
 * short with `stopNow`). If the handshake fails, `makeConnection` fails with its error
 * and the child is stopped with the Scope.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { ChildProcess } from "effect/process"
 * import { Connection, Method, Protocol, ShutdownPolicy } from "@lifeline/kernel"
 * import { NodeChildProcess } from "@lifeline/node"
 *
 * const Initialize = Method.request("initialize", { params: Schema.Struct({}), result: Schema.Unknown })
 * const Shutdown = Method.request("shutdown", { params: Schema.Struct({}), result: Schema.Unknown })
 * const host = Protocol.make({ calls: [Initialize, Shutdown] })
 *
 * const program = Effect.gen(function*() {
 *   const { connection } = yield* NodeChildProcess.makeConnection({
 *     command: ChildProcess.make("node", ["extension.js"]),
 *     protocol: host,
 *     handlers: {},
 *     handshake: Connection.initiate((peer) => peer.call(Initialize, {})),
 *     policy: ShutdownPolicy.drain("2 seconds"),
 *     shutdown: (connection) => connection.peer.call(Shutdown, {})
 *   })
 *   return yield* connection.lifecycle.state // Ready
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeConnection = <Serves extends Method.Any, Calls extends Method.Any, R = never>(
  options: ConnectionOptions<Serves, Calls, R>
): Effect.Effect<
  ChildConnection<Serves, Calls>,
  SpawnError | Lifecycle.Failure | Lifecycle.IllegalTransition,
  Scope.Scope | R
> =>
  Effect.gen(function*() {
    const { shutdown, ...rest } = options
    const self = yield* makeInternal(rest)
    const connection = yield* internal.attach(
      self,
      Connection.make<Serves, Calls, R>({ ...rest, transport: self.child.transport }),
      (connection) => connection.peer,
      shutdown
    )
    // A second signal also cuts the connection's drain short, not only the waits for the child's exit.
    yield* NodeSignals.forceOnSecondSignal(connection.stopNow("Interrupted"), connection.awaitShutdown)
    return { child: self.child, connection }
  })
