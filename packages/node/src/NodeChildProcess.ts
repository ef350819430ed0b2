/**
 * A child process as a transport, for the host side: spawned from an Effect `ChildProcess` command (arguments,
 * environment, working directory) inside a Scope, stdin/stdout as the `Transport`, stderr read line by line into the
 * host's log with its last lines kept, the exit observed, and the one stop sequence of `@lifeline/process`
 * (`StopSequence`) when the Scope closes:
 *
 * (protocol shutdown request, ≤ `shutdownTimeout`) → the connection closed under its policy (≤ `closeTimeout`: the
 * drain timeout + flush + 1 s) → end of stdin → `exitGrace` → SIGTERM to the process group → `killGrace` → SIGKILL to
 * the process group → `verifyTimeout`, then the same for descendants left in the group. docs/shutdown.md has the table
 * of bounds and the whole story from a signal to the last SIGKILL.
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
import type * as Journal from "@lifeline/journal/Journal"
import * as Connection from "@lifeline/kernel/Connection"
import type * as Lifecycle from "@lifeline/kernel/Lifecycle"
import type * as Method from "@lifeline/kernel/Method"
import type * as Peer from "@lifeline/kernel/Peer"
import type * as PeerError from "@lifeline/kernel/PeerError"
import * as Transport from "@lifeline/kernel/Transport"
import * as Process from "@lifeline/process/Process"
import type * as StopSequence from "@lifeline/process/StopSequence"
import type * as Config from "effect/Config"
import type * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import type * as ChildProcess from "effect/process/ChildProcess"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/childProcess.js"
import * as NodeSignals from "./NodeSignals.js"

/**
 * The child could not be started: the kernel's `Process.SpawnError` (one error for every host), with `reason`
 * `NotFound`, `PermissionDenied`, `BadDirectory`, `Unsupported` (a pipeline: spawn one program, use a shell command
 * line for a pipeline; or a `shell` command with arguments: pass the whole script as the command), `Unrecorded` (the
 * journal of `Options.journal` failed, so the child was killed at once; `cause` is the `JournalError`) or `Unknown`.
 *
 * @since 0.1.0
 * @category errors
 */
export const SpawnError: typeof Process.SpawnError = Process.SpawnError

/**
 * @since 0.1.0
 * @category errors
 */
export type SpawnError = Process.SpawnError

/**
 * How the child ended: the kernel's `Process.ExitStatus`, an exit code or the signal that killed it (then `exitCode`
 * is null).
 *
 * @since 0.1.0
 * @category models
 */
export type ExitStatus = Process.ExitStatus

/**
 * The step of the stop sequence after which the child was seen to exit: `StopSequence.Step`.
 *
 * @since 0.1.0
 * @category models
 */
export type StopStep = StopSequence.Step

/**
 * What became of the protocol shutdown request: `StopSequence.ShutdownOutcome`.
 *
 * @since 0.1.0
 * @category models
 */
export type ShutdownOutcome = StopSequence.ShutdownOutcome

/**
 * What a stop did: the kernel's `StopSequence.StopReport` (which step ended it, what became of the shutdown request,
 * of the close step and of the descendants, the signals sent, and `elapsedMillis`).
 *
 * @since 0.1.0
 * @category models
 */
export type StopReport = StopSequence.StopReport

/**
 * The bounds of the stop sequence: the kernel's options, with their defaults in one table (`StopSequence.Options`,
 * docs/shutdown.md). The close step's bound is derived from the connection's policy (its drain timeout plus the
 * flush), so a drain is never cut short by the stop.
 *
 * @since 0.1.0
 * @category models
 */
export interface StopOptions {
  /** How long the protocol shutdown request may take. Default 5 seconds. */
  readonly shutdownTimeout?: Duration.Input | undefined
  /** How long closing the connection may take. Default: its drain timeout + its flush timeout + 1 second. */
  readonly closeTimeout?: Duration.Input | undefined
  /** How long the child has to exit after its stdin ended, before SIGTERM. Default 1 second. */
  readonly exitGrace?: Duration.Input | undefined
  /** How long the process group has after SIGTERM, before SIGKILL. Default 1 second. */
  readonly killGrace?: Duration.Input | undefined
  /** How long to wait for the exit after SIGKILL before reporting `Unkillable`. Default 1 second. */
  readonly verifyTimeout?: Duration.Input | undefined
  /**
   * A child that does not answer the protocol shutdown in time is unresponsive: SIGKILL it at once instead of ending
   * its input and trying SIGTERM first (Hermes: "Timeout exceeded: process forcibly terminated"). Default true.
   */
  readonly killOnShutdownTimeout?: boolean | undefined
  /** @deprecated Use `exitGrace`. */
  readonly exitTimeout?: Duration.Input | undefined
  /** @deprecated Use `killGrace`. */
  readonly terminateTimeout?: Duration.Input | undefined
  /** @deprecated Use `verifyTimeout`. */
  readonly killTimeout?: Duration.Input | undefined
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
  /**
   * The level stderr lines are logged at; `None` keeps them out of the log (they are still kept). Default: the first
   * `stderrInfoLines` at Info, the rest at Debug. A logfmt line (what a Lifeline or Effect child logs) is logged as an
   * entry of its own (its message; its fields as `child.*` annotations), at the child's own level when that is higher.
   */
  readonly stderrLogLevel?: LogLevel.LogLevel | undefined
  /** Without `stderrLogLevel`: how many first lines are logged at Info. Default 20. */
  readonly stderrInfoLines?: number | undefined
  readonly stop?: StopOptions | undefined
  /** The protocol's shutdown step (e.g. a `shutdown` request), run first when the child is stopped. */
  readonly shutdown?: Effect.Effect<unknown, unknown> | undefined
  /**
   * Records the child in this journal, so that a host that crashes leaves no orphan: right after the spawn, its pid,
   * start time and command become an `InFlight` entry of kind `process` (`ProcessRecord.record`, under the fiber's
   * `JournalClaim.Owner`), and its end is recorded once its whole process group is gone, on its own or swept by the stop
   * sequence (`ProcessRecord.exited`): a leader that exits leaving descendants in the group stays `InFlight`, so a
   * reaper still finds them if the host crashes. After a crash, the next start's `Recovery.run({ reap: NodeReaper.reapProcess() })`
   * finds the entries still `InFlight` and kills those children.
   *
   * If the spawn cannot be recorded, the child is killed at once and the spawn fails with `SpawnError` `Unrecorded`.
   * If its exit cannot be recorded, a warning is logged and the entry stays `InFlight`: the next start finds the pid
   * gone (or reused) and leaves it alone. A child that even SIGKILL did not end (`Unkillable`) stays `InFlight` too,
   * for the next start to try again, and so does one whose descendants survived the sweep. Default: nothing is
   * recorded.
   *
   * @example
   * ```ts
   * import { Effect, Layer } from "effect"
   * import { ChildProcess } from "effect/process"
   * import { Journal } from "@lifeline/journal"
   * import { NodeChildProcess } from "@lifeline/node"
   * import { SqliteJournal } from "@lifeline/sqlite"
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
  /**
   * Runs the stop sequence now; closing the Scope runs it too, and so does, for a child made with {@link makePeer} or
   * {@link makeConnection}, a request to stop the host program (`GracefulShutdown`, provided by
   * `NodeSignals.runMain`). It runs once: every caller gets the same report.
   */
  readonly stop: Effect.Effect<StopReport>
}

const nameOf = (command: ChildProcess.Command): string =>
  command._tag === "StandardCommand" ? command.command.split(/[\\/]/).pop() ?? command.command : "pipeline"

const argv = (command: ChildProcess.Command): ReadonlyArray<string> =>
  command._tag === "StandardCommand" ? internal.argvOf(command) : ["pipeline"]

const commandLine = (command: ChildProcess.Command): string => argv(command).join(" ")

const makeInternal = (options: Options): Effect.Effect<internal.Internal, SpawnError, Scope.Scope> =>
  Effect.gen(function*() {
    const signals = yield* Effect.serviceOption(NodeSignals.NodeSignals)
    const handle = yield* Effect.mapError(
      internal.spawnHandle(options.command),
      (failure) => new Process.SpawnError({ ...failure, command: commandLine(options.command) })
    )
    if (options.journal !== undefined) {
      // Before the stop finalizer that `internal.make` registers, so the exit is recorded after the stop has run.
      yield* internal.record(handle, options.journal, argv(options.command)).pipe(
        Effect.mapError((error) =>
          new Process.SpawnError({
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
      stderrLogLevel: options.stderrLogLevel,
      stderrInfoLines: options.stderrInfoLines ?? 20,
      stop: options.stop ?? {},
      shutdown: options.shutdown,
      forced: Option.getOrUndefined(Option.map(signals, (service) => service.forced))
    })
  })

/**
 * Spawns a child in the current Scope. Closing the Scope runs the stop sequence; the child and its process group are
 * gone afterwards (or the report says `Unkillable`/`Survived`). A second SIGTERM/SIGINT received by a host run with
 * `NodeSignals.runMain` cuts the sequence short and goes straight to SIGKILL. A bare child is not registered with
 * `GracefulShutdown`: it belongs to whoever talks to it, whose own stop (a protocol shutdown request) comes first, and
 * its stop sequence runs when that owner's Scope closes.
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
    yield* internal.register(self)
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
 * A child and the connection (peer, lifecycle, shutdown policy) that talks to it, and the one way to stop both.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChildConnection<Serves extends Method.Any, Calls extends Method.Any> {
  readonly child: Child
  readonly connection: Connection.Connection<Serves, Calls>
  /**
   * The one stop, in this order: the protocol `shutdown` request (if given), the connection under its policy (a drain
   * lets work in flight finish; what is left is cut off, cancelled on the wire where the protocol can, and reported in
   * `connection.awaitShutdown`), the end of stdin, then the kernel's stop sequence (`exitGrace` → SIGTERM →
   * `killGrace` → SIGKILL → verify). Closing the Scope runs it, and so does a signal to a host run by
   * `NodeSignals.runMain`; it runs once, and every caller gets the same report. The same as `child.stop`.
   * (`connection.stop` alone closes only the conversation: the child usually exits at the end of its input, and the
   * stop sequence still runs when the Scope closes.)
   */
  readonly stop: Effect.Effect<StopReport>
}

/**
 * Spawns a child and runs a `Connection` on its stdio: the handshake (e.g. `Connection.initiate` with Hermes'
 * `initialize`), the gates, and a stop under the shutdown policy. When the child exits on its own, pending calls fail
 * at once with `PeerExited` and the lifecycle moves to `Failed`; an exit during the stop ends in `Closed`. Closing
 * the Scope runs {@link ChildConnection.stop}: the connection stops under its policy first (bounded by `closeTimeout`,
 * derived from the policy: a 10 s drain drains 10 s), then the stop sequence of {@link make}. A first signal to a
 * host run by `NodeSignals.runMain` runs that stop before the host's main fiber is interrupted, so calls the main
 * fiber waits for may finish within the drain; a second signal cuts it short (`stopNow`, then SIGKILL). If the
 * handshake fails, `makeConnection` fails with its error and the child is stopped with the Scope.
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
 *   const { connection, stop } = yield* NodeChildProcess.makeConnection({
 *     command: ChildProcess.make("node", ["extension.js"]),
 *     protocol: host,
 *     handlers: {},
 *     handshake: Connection.initiate((peer) => peer.call(Initialize, {})),
 *     policy: ShutdownPolicy.drain("2 seconds"),
 *     shutdown: (connection) => connection.peer.call(Shutdown, {})
 *   })
 *   yield* connection.lifecycle.state // Ready
 *   return yield* stop // { endedBy: "EndOfInput", ... }
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
  SpawnError | Lifecycle.Failure | Lifecycle.IllegalTransition | Config.ConfigError,
  Scope.Scope | R
> =>
  Effect.gen(function*() {
    const { shutdown, ...rest } = options
    const self = yield* makeInternal(rest)
    const connection = yield* internal.attach(
      self,
      // The child's stop (registered by `makeInternal`) stops the connection first: registering the connection on
      // its own too would let a signal close it before the protocol shutdown request could be sent.
      Connection.make<Serves, Calls, R>({ ...rest, transport: self.child.transport, gracefulShutdown: false }),
      (connection) => connection.peer,
      shutdown,
      // Why the connection closes: `Interrupted` for a signal to the host or a Scope closed by an interruption.
      internal.closingOf(self),
      rest.flushTimeout
    )
    yield* internal.register(self)
    // A second signal also cuts the connection's drain short, not only the waits for the child's exit.
    yield* NodeSignals.forceOnSecondSignal(connection.stopNow("Interrupted"), connection.awaitShutdown)
    return { child: self.child, connection, stop: self.child.stop }
  })

// The child of each connection made by `layerConnection`, for `childOf`: the connection is what the layer provides.
const children = new WeakMap<Connection.Connection<any, any>, ChildConnection<any, any>>()

/**
 * {@link makeConnection} as a Layer: the connection to a child for the life of the layer, provided as the service
 * `tag` (a `Connection.Service` class, or any key of a `Connection`). Built, it is `Ready`; released, it runs the
 * child's one stop (protocol shutdown, the connection under its policy, the ladder). The child itself (its `pid`,
 * `stop` and `StopReport`, its stderr tail) is {@link childOf} the connection.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { ChildProcess } from "effect/process"
 * import { Connection, Method, Protocol, ShutdownPolicy } from "@lifeline/kernel"
 * import { NodeChildProcess } from "@lifeline/node"
 *
 * const Echo = Method.request("echo", { params: Schema.Struct({ text: Schema.String }), result: Schema.String })
 * const Client = Protocol.make({ calls: [Echo] })
 * class Server extends Connection.Service<Server>()("app/Server", { protocol: Client }) {}
 *
 * const ServerLive = NodeChildProcess.layerConnection(Server, {
 *   command: ChildProcess.make("node", ["server.js"]),
 *   protocol: Client,
 *   handlers: {},
 *   policy: ShutdownPolicy.drain("2 seconds")
 * })
 *
 * const program = Effect.gen(function*() {
 *   const server = yield* Server
 *   const child = NodeChildProcess.childOf(server)! // { pid, stop, ... }
 *   yield* Effect.log(`server pid ${child.child.pid}: ${yield* server.peer.call(Echo, { text: "hi" })}`)
 *   const report = yield* child.stop // the same report the layer's release gets
 *   return report.endedBy
 * }).pipe(Effect.provide(ServerLive))
 * ```
 *
 * @since 0.2.0
 * @category layers
 */
export const layerConnection = <I, Serves extends Method.Any, Calls extends Method.Any, R = never>(
  tag: Context.Key<I, Connection.Connection<Serves, Calls>>,
  options: ConnectionOptions<Serves, Calls, R>
): Layer.Layer<
  I,
  SpawnError | Lifecycle.Failure | Lifecycle.IllegalTransition | Config.ConfigError,
  Exclude<R, Scope.Scope>
> =>
  Layer.effect(
    tag,
    Effect.map(makeConnection(options), (made) => {
      children.set(made.connection, made)
      return made.connection
    })
  )

/**
 * The child and its stop behind a connection made by {@link layerConnection} (or `undefined` for any other).
 *
 * @since 0.2.0
 * @category combinators
 */
export const childOf = <Serves extends Method.Any, Calls extends Method.Any>(
  connection: Connection.Connection<Serves, Calls>
): ChildConnection<Serves, Calls> | undefined => children.get(connection)
