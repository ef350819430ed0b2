/**
 * The host side of a child process: spawning it (`spawnHandle`), the running child as the `Handle` the rest depends
 * on (a fake one in unit tests), reading its stderr, observing its exit, and the kernel's stop sequence over it.
 *
 * @internal
 */
import type * as Connection from "@lifeline/kernel/Connection"
import * as GracefulShutdown from "@lifeline/kernel/GracefulShutdown"
import * as Journal from "@lifeline/kernel/Journal"
import type * as JournalError from "@lifeline/kernel/JournalError"
import type * as Lifecycle from "@lifeline/kernel/Lifecycle"
import type * as Method from "@lifeline/kernel/Method"
import * as Peer from "@lifeline/kernel/Peer"
import * as PeerError from "@lifeline/kernel/PeerError"
import * as Process from "@lifeline/kernel/Process"
import * as ProcessRecord from "@lifeline/kernel/ProcessRecord"
import type * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import * as StopSequence from "@lifeline/kernel/StopSequence"
import * as Transport from "@lifeline/kernel/Transport"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import { identity } from "effect/Function"
import type * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import type * as ChildProcessCommand from "effect/process/ChildProcess"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import type * as NodeChildProcess from "../NodeChildProcess.js"
import { LineSplitter, Tail } from "./lines.js"
import * as Processes from "./processes.js"
import { describeFailure, makeWriter, type Reader, unsafeMakeReader, type Writer } from "./streams.js"

/**
 * A running child, as the stop sequence and the transport see it.
 *
 * @internal
 */
export interface Handle {
  readonly pid: number
  readonly stdout: Stream.Stream<Uint8Array, Transport.TransportError>
  readonly stderr: Stream.Stream<Uint8Array>
  readonly stdin: Writer
  /** Waits for the exit. */
  readonly exit: Effect.Effect<Process.ExitStatus>
  readonly unsafeExitStatus: () => Process.ExitStatus | undefined
  /** Sends `signal` to the child's process group (POSIX), or to the child alone; never throws, never waits. */
  readonly unsafeSignal: (signal: NodeJS.Signals) => void
  /** Whether a live process (the child or one of its descendants) is left in the child's process group. */
  readonly unsafeGroupAlive: () => boolean
}

/**
 * Why a spawn failed, before it becomes the public `SpawnError`.
 *
 * @internal
 */
export interface SpawnFailure {
  readonly reason: "NotFound" | "PermissionDenied" | "BadDirectory" | "Unsupported" | "Unknown"
  readonly detail: string
}

const posix = process.platform !== "win32"

const failureOf = (error: NodeJS.ErrnoException): SpawnFailure => ({
  reason: error.code === "ENOENT" ? "NotFound" : error.code === "EACCES" ? "PermissionDenied" : "Unknown",
  detail: error.message
})

const isDirectory = (path: string): boolean => {
  try {
    return Fs.statSync(path).isDirectory()
  } catch {
    return false
  }
}

const ignore = () => {}

interface Spawned {
  readonly child: ChildProcess.ChildProcessWithoutNullStreams
  readonly stdout: Reader<Transport.TransportError>
  readonly stderr: Reader<unknown>
}

const unwrap = (word: string | Redacted.Redacted<string>): string =>
  Redacted.isRedacted(word) ? Redacted.value(word) : word

/**
 * The program and its arguments as they may be shown or recorded: a `Redacted` argument is `<redacted>`.
 *
 * @internal
 */
export const argvOf = (command: ChildProcessCommand.StandardCommand): Array<string> => [
  command.command,
  ...command.args.map((word) => Redacted.isRedacted(word) ? "<redacted>" : word)
]

// Node's own NUL check throws an error that quotes the value: rejected first, so a `Redacted` value stays hidden.
const nulCharacter = (command: ChildProcessCommand.StandardCommand): string | undefined => {
  if (command.command.includes("\0")) return "the command contains a NUL character"
  const index = command.args.findIndex((word) => unwrap(word).includes("\0"))
  if (index !== -1) return `argument ${index + 1} contains a NUL character`
  for (const [name, value] of Object.entries(command.options.env ?? {})) {
    if (value !== undefined && unwrap(value).includes("\0")) {
      return `the environment variable ${name} contains a NUL character`
    }
  }
  return undefined
}

/** The environment as Effect 4's `NodeChildProcessSpawner` builds it: no `env`, the host's; `undefined` removes. */
const environmentOf = (options: ChildProcessCommand.CommandOptions): NodeJS.ProcessEnv | undefined => {
  if (options.env === undefined) return undefined
  const env: NodeJS.ProcessEnv = options.extendEnv === true ? { ...process.env } : {}
  for (const [name, value] of Object.entries(options.env)) {
    if (value === undefined) delete env[name]
    else env[name] = unwrap(value)
  }
  return env
}

/**
 * Spawns one program with three pipes, from an Effect 4 `ChildProcess` command: its program, arguments, `cwd`, `env`
 * (with `extendEnv`), `shell`, `detached` and `windowsHide`, with the defaults of `NodeChildProcessSpawner`; its stdio,
 * `additionalFds`, `killSignal` and `forceKillAfter` are not used (three pipes; the stop sequence signals). `detached`
 * is the default on POSIX: the child leads its own process group (and session), so a signal to `-pid` reaches its
 * descendants too, and a terminal's Ctrl-C reaches only the host, which then stops its children in order. The
 * release is a last resort that never waits: SIGKILL to the group if the child is still running, then the pipes are
 * destroyed.
 *
 * Not `ChildProcessSpawner.spawn` (4.1): its release and `kill` wait for the exit without a bound on the Clock, and
 * its handle has no signal in the exit status, no writable stdin (a `Sink`) and no signal that does not wait.
 *
 * @internal
 */
export const spawnHandle = (
  command: ChildProcessCommand.Command
): Effect.Effect<Handle, SpawnFailure, Scope.Scope> =>
  Effect.gen(function*() {
    if (command._tag !== "StandardCommand") {
      return yield* Effect.fail<SpawnFailure>({
        reason: "Unsupported",
        detail: "a piped Command is not supported: spawn one program (use a shell command line for a pipeline)"
      })
    }
    const options = command.options
    const shell = options.shell !== undefined && options.shell !== false
    if (shell && command.args.length > 0) {
      return yield* Effect.fail<SpawnFailure>({
        reason: "Unsupported",
        detail: "the shell option cannot be combined with arguments: pass the whole script as the command"
      })
    }
    const nul = nulCharacter(command)
    if (nul !== undefined) return yield* Effect.fail<SpawnFailure>({ reason: "Unknown", detail: nul })
    const cwd = options.cwd
    if (cwd !== undefined && !isDirectory(cwd)) {
      return yield* Effect.fail<SpawnFailure>({ reason: "BadDirectory", detail: `${cwd} is not a directory` })
    }
    const detached = options.detached ?? posix
    // Only a detached child leads a process group of its own: otherwise it shares the host's, which must not be hit.
    const ownsGroup = posix && detached
    const exited = yield* Deferred.make<Process.ExitStatus>()
    let status: Process.ExitStatus | undefined

    const { child, stderr, stdout } = yield* Effect.acquireRelease(
      Effect.callback<Spawned, SpawnFailure>((resume) => {
        const child = ChildProcess.spawn(command.command, command.args.map(unwrap), {
          stdio: "pipe",
          cwd,
          env: environmentOf(options),
          shell: options.shell,
          detached,
          windowsHide: options.windowsHide ?? !detached
        })
        // Read from the start: what a child writes just before it exits is lost to a reader that comes later.
        // Once the connection is done with stdout, what the child still writes is dropped, never left in a full pipe
        // that would keep the child from exiting at the end of its input.
        const stdout = unsafeMakeReader(
          child.stdout,
          (cause) =>
            new Transport.TransportError({
              reason: "Read",
              message: `reading the child's stdout failed: ${messageOf(cause)}`,
              cause
            }),
          { onRelease: "discard" }
        )
        const stderr = unsafeMakeReader(child.stderr, identity)
        const onError = (error: NodeJS.ErrnoException) => {
          stdout.unsafeRelease()
          stderr.unsafeRelease()
          resume(Effect.fail(failureOf(error)))
        }
        child.once("error", onError)
        child.once("spawn", () => {
          child.off("error", onError)
          // Errors after the spawn (a failed kill) are reported by the effects that caused them; an 'error' event
          // nobody listens to would crash the host.
          child.on("error", ignore)
          resume(Effect.succeed({ child, stdout, stderr }))
        })
        child.once("exit", (exitCode, signal) => {
          status = { exitCode, signal }
          Deferred.doneUnsafe(exited, Exit.succeed(status))
        })
        // Interrupted while it starts: nothing has talked to it, there is nothing to ask it politely.
        return Effect.sync(() => signal(child, ownsGroup, "SIGKILL"))
      }),
      ({ child, stderr, stdout }) =>
        Effect.sync(() => {
          // A last resort that never waits: the stop sequence, a finalizer that ran before this one, has already
          // signalled the group; only a child it reported `Unkillable` (or a stop that never ran) is still here.
          if (status === undefined) signal(child, ownsGroup, "SIGKILL")
          stdout.unsafeRelease()
          stderr.unsafeRelease()
          child.stdin.destroy()
          child.stdout.destroy()
          child.stderr.destroy()
        })
    )
    // A pipe that fails after its reader is done must not crash the host either.
    child.stdout.on("error", ignore)
    child.stderr.on("error", ignore)
    const pid = child.pid!

    const handle: Handle = {
      pid,
      stdout: stdout.stream,
      stderr: Stream.catch(stderr.stream, () => Stream.empty),
      stdin: makeWriter(child.stdin),
      exit: Deferred.await(exited),
      unsafeExitStatus: () => status,
      unsafeSignal: (sig) => signal(child, ownsGroup, sig),
      unsafeGroupAlive: () => ownsGroup ? Processes.isGroupAlive(pid) : status === undefined
    }
    return handle
  })

/**
 * The one function that signals a child: its whole process group when it leads one (POSIX, `detached`), else the child
 * alone. The stop sequence's `Target.signal` is this; so are the two emergencies that have no sequence to run (a spawn
 * interrupted while it starts, a spawn the journal could not record) and the release's last resort.
 */
const signal = (child: ChildProcess.ChildProcess, ownsGroup: boolean, sig: NodeJS.Signals): void => {
  if (ownsGroup) {
    try {
      process.kill(-child.pid!, sig)
      return
    } catch {
      // The group is gone (ESRCH): only the child itself can be left, and the handle knows whether it is.
    }
  }
  try {
    child.kill(sig)
  } catch {
    // Already gone.
  }
}

/**
 * Records the child in `journal` now, and its end once: when its whole process group is gone while the Scope is open
 * (a watcher: the leader's exit is not enough, since descendants it left in the group are what a reaper must still
 * find after a crash of the host), or when the Scope closes. Called before `make`, so its finalizer runs after the
 * stop sequence and sees how it ended: a child still running then (`Unkillable`), or descendants that survived the
 * sweep of the group, stay `InFlight` for the next start's reaper. A failed spawn record kills the child at once:
 * nothing talks to it yet, and an unrecorded child is what a crash must not leave.
 *
 * @internal
 */
export const record = (
  handle: Handle,
  journal: Journal.Journal.Service,
  command: ReadonlyArray<string>
): Effect.Effect<void, JournalError.JournalError, Scope.Scope> =>
  Effect.gen(function*() {
    const key = yield* ProcessRecord.record({ pid: handle.pid, command }).pipe(
      Effect.provideService(Journal.Journal, journal),
      Effect.tapError(() => Effect.sync(() => handle.unsafeSignal("SIGKILL")))
    )
    const recordExit = yield* Effect.cached(
      Effect.suspend(() => {
        const status = handle.unsafeExitStatus()
        // Not ended, or members of its group are left: leave it InFlight for a reaper, only forget that this process
        // runs it.
        if (status === undefined || handle.unsafeGroupAlive()) return journal.release(key)
        return ProcessRecord.exited(key, status).pipe(
          Effect.provideService(Journal.Journal, journal),
          Effect.catch((error) =>
            Effect.logWarning(`could not record the exit of child process ${handle.pid}`, error).pipe(
              Effect.andThen(journal.release(key))
            )
          )
        )
      }).pipe(Effect.uninterruptible)
    )
    yield* Effect.addFinalizer(() => recordExit)
    // Registered after the finalizer, so interrupted before it runs: whichever comes first records, once.
    yield* Effect.forkScoped(Effect.andThen(handle.exit, Effect.andThen(groupGone(handle), recordExit)))
  })

/** How often a recorded child's process group is looked at once its leader has exited. */
const groupPollInterval = Duration.millis(100)

/** Completes once no live process is left in the child's process group. */
const groupGone = (handle: Handle): Effect.Effect<void> =>
  Effect.asVoid(Effect.repeat(Effect.sync(() => !handle.unsafeGroupAlive()), {
    schedule: Schedule.spaced(groupPollInterval),
    until: (gone) => gone
  }))

const messageOf = (u: unknown): string => u instanceof Error ? u.message : String(u)

/**
 * The stop options with the names of the kernel's stop sequence: the deprecated aliases of `NodeChildProcess`
 * (`exitTimeout`, `terminateTimeout`, `killTimeout`) are read when the new name is not given.
 *
 * @internal
 */
export const stopOptionsOf = (
  options: NodeChildProcess.StopOptions | undefined
): Omit<StopSequence.Options, "policy" | "flushTimeout"> => ({
  shutdownTimeout: options?.shutdownTimeout,
  closeTimeout: options?.closeTimeout,
  exitGrace: options?.exitGrace ?? options?.exitTimeout,
  killGrace: options?.killGrace ?? options?.terminateTimeout,
  verifyTimeout: options?.verifyTimeout ?? options?.killTimeout,
  killOnShutdownTimeout: options?.killOnShutdownTimeout
})

/**
 * The steps the owner of the child plugs in: the protocol's shutdown request, and how the conversation closes (under
 * its policy, or fail-fast) before the input ends; and what the close step's bound derives from.
 *
 * @internal
 */
export interface StopSteps {
  shutdown: Effect.Effect<unknown, unknown> | undefined
  close: Effect.Effect<unknown> | undefined
  closeNow: Effect.Effect<unknown> | undefined
  policy: ShutdownPolicy.Policy | undefined
  flushTimeout: Duration.Input | undefined
}

/**
 * The child as the kernel's stop sequence sees it: signals go to its process group (POSIX), and the group counts as
 * alive while a live member is left in it.
 *
 * @internal
 */
export const targetOf = (handle: Handle): StopSequence.Target => ({
  exit: handle.exit,
  exitStatus: Effect.sync(() => Option.fromUndefinedOr(handle.unsafeExitStatus())),
  signal: (signal) => Effect.sync(() => handle.unsafeSignal(signal)),
  groupAlive: Effect.sync(() => handle.unsafeGroupAlive()),
  endInput: handle.stdin.end
})

/** How long the exit waits for the rest of stderr, which may arrive after the exit event or be held open forever by a
 * grandchild. */
const stderrSettle = Duration.millis(100)

/**
 * What the public module builds on: a child with its transport, stderr tail, exit hooks and stop sequence.
 *
 * @internal
 */
export interface Internal {
  readonly child: NodeChildProcess.Child
  readonly steps: StopSteps
  /** Runs `hook` with the exit error when the child exits (now, if it has already). */
  readonly onExit: (hook: (error: PeerError.PeerExited) => Effect.Effect<void>) => Effect.Effect<void>
  /** True once the stop sequence has started: an exit from then on is expected. */
  readonly isStopping: () => boolean
  /**
   * True when the stop comes from an interruption: the Scope closed with one (an interrupted `Effect.scoped` fiber,
   * `Scope.close(scope, Exit.interrupt())`), or a signal to the host (`register`). What talks to the child closes
   * with `Interrupted` then, as the kernel's `Connection.make` and `Peer.make` do for a Scope of their own.
   */
  readonly isInterrupted: () => boolean
  /** Notes that the stop comes from an interruption (a signal to the host). */
  readonly markInterrupted: Effect.Effect<void>
  /** Forces the stop (as a second signal does): every wait of the stop sequence is cut short, SIGKILL follows. */
  readonly force: Effect.Effect<void>
  readonly settings: Settings
}

/**
 * @internal
 */
export interface Settings {
  readonly name: string
  readonly stderrTailLines: number
  readonly maxStderrLineLength: number
  readonly stderrLogLevel: LogLevel.LogLevel
  readonly stop: NodeChildProcess.StopOptions
  readonly shutdown: Effect.Effect<unknown, unknown> | undefined
  readonly forced: Effect.Effect<unknown> | undefined
}

/**
 * Builds the child around a handle in the current Scope. The stderr reader and the exit observer are forked before
 * the stop finalizer is registered, so they outlive it: stderr is read until the very end (a child blocked on a full
 * stderr pipe could never exit), and the exit is observed during the stop. The stop is the kernel's stop sequence
 * over the handle.
 *
 * @internal
 */
export const make = (handle: Handle, settings: Settings): Effect.Effect<Internal, never, Scope.Scope> =>
  Effect.gen(function*() {
    const tail = new Tail<string>(settings.stderrTailLines)
    const splitter = new LineSplitter(settings.maxStderrLineLength)
    // `All` is no level an entry can have in Effect 4 (`Effect.logWithLevel` takes a `Severity`): the lowest one.
    const level: LogLevel.Severity | undefined = settings.stderrLogLevel === "None"
      ? undefined
      : settings.stderrLogLevel === "All"
      ? "Trace"
      : settings.stderrLogLevel
    const logLine = (line: string): Effect.Effect<void> => {
      tail.push(line)
      return level === undefined ? Effect.void : Effect.logWithLevel(level)(line)
    }
    const annotate = Effect.annotateLogs({ child: settings.name, pid: handle.pid })
    const options = stopOptionsOf(settings.stop)

    const stderrReader = yield* handle.stderr.pipe(
      Stream.runForEach((chunk) => Effect.forEach(splitter.push(chunk), logLine, { discard: true })),
      Effect.andThen(Effect.suspend(() => Effect.forEach(splitter.end(), logLine, { discard: true }))),
      Effect.annotateLogs("stream", "stderr"),
      annotate,
      Effect.forkScoped
    )

    let stopping = false
    let exitError: PeerError.PeerExited | undefined
    const hooks: Array<(error: PeerError.PeerExited) => Effect.Effect<void>> = []
    const afterExit = yield* Deferred.make<void>()

    yield* Effect.gen(function*() {
      const status = yield* handle.exit
      yield* Effect.timeoutOption(Fiber.await(stderrReader), stderrSettle)
      const error = new PeerError.PeerExited({
        exitCode: status.exitCode,
        signal: status.signal,
        stderrTail: tail.toArray()
      })
      exitError = error
      const how = Process.describe(status)
      if (stopping || Process.isSuccess(status)) yield* Effect.logDebug(`exited (${how})`)
      else {yield* Effect.logWarning(
          `exited unexpectedly (${how})`,
          ...(error.stderrTail.length > 0 ? [error.stderrTail] : [])
        )}
      for (const hook of hooks.splice(0)) yield* hook(error)
      yield* Deferred.succeed(afterExit, void 0)
    }).pipe(annotate, Effect.forkScoped)

    const steps: StopSteps = {
      shutdown: settings.shutdown,
      close: undefined,
      closeNow: undefined,
      policy: undefined,
      flushTimeout: undefined
    }
    const forcedHere = yield* Deferred.make<void>()
    const forced = settings.forced === undefined
      ? Deferred.await(forcedHere)
      : Effect.raceFirst(Deferred.await(forcedHere), Effect.asVoid(settings.forced))
    const stopped = yield* Deferred.make<NodeChildProcess.StopReport>()
    const stop: Effect.Effect<NodeChildProcess.StopReport> = Effect.suspend(() => {
      if (stopping) return Deferred.await(stopped)
      stopping = true
      return StopSequence.run(
        targetOf(handle),
        { shutdown: steps.shutdown, close: steps.close, closeNow: steps.closeNow, forced },
        { ...options, policy: steps.policy, flushTimeout: steps.flushTimeout }
      ).pipe(
        Effect.tap((report) => Deferred.succeed(stopped, report)),
        annotate,
        Effect.uninterruptible
      )
    })
    let interrupted = false
    // The Scope's exit says why it closed; the stop it runs passes that on to what talks to the child (`attach`).
    yield* Effect.addFinalizer((exit) =>
      Effect.andThen(
        Effect.sync(() => {
          if (Exit.hasInterrupts(exit)) interrupted = true
        }),
        stop
      )
    )
    const force = Effect.asVoid(Deferred.succeed(forcedHere, void 0))

    const transport: Transport.Transport.Service = {
      // At the end of stdout, wait (bounded) for the exit to be handled, so that pending calls fail with `PeerExited`
      // rather than with the plainer "transport closed" of a stream that just ended.
      incoming: Stream.concat(
        handle.stdout,
        Stream.fromEffectDrain(Effect.timeoutOption(Deferred.await(afterExit), StopSequence.bounds(options).exitGrace))
      ),
      send: (chunks) =>
        Effect.mapError(handle.stdin.write(chunks), (failure) =>
          new Transport.TransportError({
            reason: failure._tag === "Closed" ? "Closed" : "Write",
            message: `writing to the child's stdin failed: ${describeFailure(failure)}`,
            ...(failure._tag === "Failed" ? { cause: failure.error } : {})
          })),
      end: handle.stdin.end,
      unsafeTrySend: handle.stdin.trySend
    }

    const child: NodeChildProcess.Child = {
      pid: handle.pid,
      name: settings.name,
      transport,
      exit: handle.exit,
      exitStatus: Effect.sync(() => Option.fromUndefinedOr(handle.unsafeExitStatus())),
      exited: Effect.andThen(Deferred.await(afterExit), Effect.sync(() => exitError!)),
      stderrTail: Effect.sync(() => tail.toArray()),
      kill: (sig) => Effect.sync(() => handle.unsafeSignal(sig)),
      stop
    }

    return {
      child,
      steps,
      force,
      settings,
      isStopping: () => stopping,
      isInterrupted: () => interrupted,
      markInterrupted: Effect.sync(() => {
        interrupted = true
      }),
      onExit: (hook) =>
        Effect.suspend(() => {
          if (exitError !== undefined) return hook(exitError)
          hooks.push(hook)
          return Effect.void
        })
    }
  })

/**
 * Registers the child's one stop with `GracefulShutdown` (when a program run by `NodeSignals.runMain` provides it), so
 * that a signal to the host stops the child, the conversation with it first, before the host's main fiber is
 * interrupted. Only for a child this module talks to (a peer, a connection): a bare child (`NodeChildProcess.make`)
 * belongs to whoever talks to it, whose own stop (the Hermes host's `shutdown` request, say) must come first. A stop
 * from a signal is an interruption: the peer or connection closes with `Interrupted`.
 *
 * @internal
 */
export const register = (self: Internal): Effect.Effect<void, never, Scope.Scope> =>
  GracefulShutdown.register({
    name: `child ${self.settings.name} (pid ${self.child.pid})`,
    stop: Effect.andThen(self.markInterrupted, self.child.stop),
    stopNow: Effect.andThen(self.markInterrupted, Effect.andThen(self.force, self.child.stop))
  })

/**
 * @internal
 */
export const logLevelOf = (level: LogLevel.LogLevel | undefined): LogLevel.LogLevel => level ?? "Debug"

/**
 * How the stop sequence closes what talks to the child: under its policy, and fail-fast. A plain peer closes the same
 * way both times (it has no policy): its pending calls fail, queued frames are flushed, stdin ends.
 *
 * @internal
 */
export interface Closing {
  readonly close: Effect.Effect<unknown>
  readonly closeNow: Effect.Effect<unknown>
  readonly policy: ShutdownPolicy.Policy | undefined
}

/**
 * How the stop sequence closes a connection: `stop` under its policy, `stopNow` when forced, each until the end of its
 * teardown. The reason is `Interrupted` when the stop comes from an interruption (a signal to the host, a Scope closed
 * by one: {@link Internal.isInterrupted}), `Stop` otherwise, as the connection's lifecycle and its `ShutdownError`s
 * tell it.
 *
 * @internal
 */
export const closingOf = (self: Internal) => (connection: Connection.Connection<any, any>): Closing => {
  const reason = (): Lifecycle.CloseReason => self.isInterrupted() ? "Interrupted" : "Stop"
  return {
    close: Effect.andThen(Effect.suspend(() => connection.stop(reason())), connection.awaitShutdown),
    closeNow: Effect.andThen(Effect.suspend(() => connection.stopNow(reason())), connection.awaitShutdown),
    policy: connection.policy
  }
}

/**
 * Starts what talks to the child (a peer, a connection) on its transport, in a Scope of its own that the stop
 * sequence closes in its close step: after the protocol shutdown request (which needs it), before the end of input and
 * the signals. When the child exits on its own, the connection is over: pending calls fail with `PeerExited`, and the
 * peer closes with it (a connection on top moves to `Failed`). An exit during the stop is expected: pending calls
 * still fail with `PeerExited`, and the stop closes the rest.
 *
 * @internal
 */
export const attach = <A, E, R>(
  self: Internal,
  start: Effect.Effect<A, E, R | Scope.Scope>,
  peerOf: (started: A) => Pick<Peer.Peer<any, any>, "failPending" | "close" | "refuseNew" | "closed">,
  shutdown: ((started: A) => Effect.Effect<unknown, unknown>) | undefined,
  closing?: ((started: A) => Closing) | undefined,
  flushTimeout?: Duration.Input | undefined
): Effect.Effect<A, E, Exclude<R, Scope.Scope>> =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    // With the exit the child's own Scope closed with: an interruption there is one here, for the peer's finalizer.
    const closeScope = Effect.suspend(() => Scope.close(scope, self.isInterrupted() ? Exit.interrupt() : Exit.void))
    self.steps.close = closeScope
    self.steps.closeNow = closeScope
    self.steps.flushTimeout = flushTimeout
    const started = yield* start.pipe(
      Scope.provide(scope),
      Effect.onError(() => closeScope)
    )
    if (shutdown !== undefined) self.steps.shutdown = shutdown(started)
    if (closing !== undefined) {
      const how = closing(started)
      // The Scope is closed after the close under the policy: its finalizers find the connection closed already.
      self.steps.close = Effect.andThen(how.close, closeScope)
      self.steps.closeNow = Effect.andThen(how.closeNow, closeScope)
      self.steps.policy = how.policy
    }
    const peer = peerOf(started)
    yield* self.onExit((error) => {
      if (self.isStopping()) return Effect.asVoid(peer.failPending(error))
      if (closing === undefined) return peer.close(error)
      // A connection closes itself once the transport ends (stdout ends at the exit), with `error`, and its teardown
      // interrupts the handlers still running and reports them as cut off; closing the peer here would interrupt them
      // first, unreported. A descendant that holds stdout open must not keep it open: closed after the grace at the
      // latest. Forked: the transport's end waits for these hooks.
      return Effect.andThen(
        Effect.andThen(peer.refuseNew(error), peer.failPending(error)),
        Effect.forkDetach(
          Effect.flatMap(
            Effect.timeoutOption(peer.closed, StopSequence.bounds(stopOptionsOf(self.settings.stop)).exitGrace),
            (closed) => Option.isNone(closed) ? peer.close(error) : Effect.void
          )
        )
      )
    })
    return started
  })

/**
 * @internal
 */
export const attachPeer = <Serves extends Method.Any, Calls extends Method.Any, R = never>(
  self: Internal,
  options: Peer.Options<Serves, Calls, R>,
  shutdown: ((peer: Peer.Peer<Serves, Calls>) => Effect.Effect<unknown, unknown>) | undefined
): Effect.Effect<Peer.Peer<Serves, Calls>, never, R> =>
  attach(self, Peer.make<Serves, Calls, R>(options), (peer) => peer, shutdown, undefined, options.flushTimeout)
