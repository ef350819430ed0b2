/**
 * The host side of a child process: spawning it (`spawnHandle`), the running child as the `Handle` the rest depends
 * on (a fake one in unit tests), reading its stderr, observing its exit, and the one bounded stop sequence.
 *
 * @internal
 */
import * as Journal from "@lifeline/kernel/Journal"
import type * as Method from "@lifeline/kernel/Method"
import * as Peer from "@lifeline/kernel/Peer"
import * as PeerError from "@lifeline/kernel/PeerError"
import * as Recovery from "@lifeline/kernel/Recovery"
import * as Transport from "@lifeline/kernel/Transport"
import * as Clock from "effect/Clock"
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
  readonly exit: Effect.Effect<NodeChildProcess.ExitStatus>
  readonly unsafeExitStatus: () => NodeChildProcess.ExitStatus | undefined
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
    const exited = yield* Deferred.make<NodeChildProcess.ExitStatus>()
    let status: NodeChildProcess.ExitStatus | undefined

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
        const stdout = unsafeMakeReader(child.stdout, (cause) =>
          new Transport.TransportError({
            reason: "Read",
            message: `reading the child's stdout failed: ${messageOf(cause)}`,
            cause
          }))
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
        return Effect.sync(() => {
          child.kill("SIGKILL")
        })
      }),
      ({ child, stderr, stdout }) =>
        Effect.sync(() => {
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
 * Records the child in `journal` now, and its exit once: when it exits while the Scope is open (a watcher), or when
 * the Scope closes. Called before `make`, so its finalizer runs after the stop sequence and sees how the child ended;
 * a child still running then (`Unkillable`) stays `InFlight` for the next start's reaper. A failed spawn record kills
 * the child at once: nothing talks to it yet, and an unrecorded child is what a crash must not leave.
 *
 * @internal
 */
export const record = (
  handle: Handle,
  journal: Journal.Journal.Service,
  command: ReadonlyArray<string>
): Effect.Effect<void, Journal.JournalError, Scope.Scope> =>
  Effect.gen(function*() {
    const key = yield* Recovery.recordProcess({ pid: handle.pid, command }).pipe(
      Effect.provideService(Journal.Journal, journal),
      Effect.tapError(() => Effect.sync(() => handle.unsafeSignal("SIGKILL")))
    )
    const recordExit = yield* Effect.cached(
      Effect.suspend(() => {
        const status = handle.unsafeExitStatus()
        // Not ended: leave it InFlight for a reaper, only forget that this process runs it.
        if (status === undefined) return journal.release(key)
        return Recovery.processExited(key, status).pipe(
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
    yield* Effect.forkScoped(Effect.andThen(handle.exit, recordExit))
  })

const messageOf = (u: unknown): string => u instanceof Error ? u.message : String(u)

/**
 * The settings of the stop sequence, decoded.
 *
 * @internal
 */
export interface StopSettings {
  readonly shutdownTimeout: Duration.Duration
  readonly exitTimeout: Duration.Duration
  readonly terminateTimeout: Duration.Duration
  readonly killTimeout: Duration.Duration
  readonly killOnShutdownTimeout: boolean
}

/**
 * @internal
 */
export const decodeStopSettings = (options: NodeChildProcess.StopOptions | undefined): StopSettings => ({
  shutdownTimeout: Duration.fromInputUnsafe(options?.shutdownTimeout ?? Duration.seconds(5)),
  exitTimeout: Duration.fromInputUnsafe(options?.exitTimeout ?? Duration.seconds(1)),
  terminateTimeout: Duration.fromInputUnsafe(options?.terminateTimeout ?? Duration.seconds(1)),
  killTimeout: Duration.fromInputUnsafe(options?.killTimeout ?? Duration.seconds(1)),
  killOnShutdownTimeout: options?.killOnShutdownTimeout ?? true
})

/**
 * The steps the owner of the child plugs in: the protocol's shutdown request, and how input ends (closing the peer,
 * which fails what is pending, flushes what is queued and ends stdin).
 *
 * @internal
 */
export interface StopSteps {
  shutdown: Effect.Effect<unknown, unknown> | undefined
  endInput: Effect.Effect<void>
}

/**
 * Runs a bounded wait of the stop sequence in a fiber of its own, interruptible (Effect 4 starts a forked fiber
 * interruptible whatever its parent's region). The sequence runs uninterruptibly, often as a finalizer of a fiber that
 * has been interrupted (SIGTERM, a closing Scope), and a timeout waits for the interruption of what it cuts short.
 * Made interruptible in the sequence's own fiber, the wait would instead be interrupted at once by the pending
 * interruption. In a fiber of its own, the timeouts work and nothing else reaches it.
 */
const isolated = <A>(effect: Effect.Effect<A>): Effect.Effect<A> =>
  Effect.flatMap(Effect.forkDetach(effect), Fiber.join)

/**
 * Runs `effect` in a fiber of its own and waits for it; interrupted, stops waiting at once and leaves it to finish in
 * the background (a race or a timeout waits for its loser, and an uninterruptible loser would hold it).
 */
const disconnect = <A>(effect: Effect.Effect<A>): Effect.Effect<A> =>
  Effect.flatMap(
    Effect.forkDetach(effect),
    (fiber) => Effect.onInterrupt(Fiber.join(fiber), () => Effect.asVoid(Effect.forkDetach(Fiber.interrupt(fiber))))
  )

/** How often the stop sequence looks for descendants left in the process group. */
const groupPollInterval = Duration.millis(20)

/**
 * The one bounded stop sequence: (protocol shutdown) → end of input → wait → SIGTERM → wait → SIGKILL → wait, then
 * the same for descendants left in the process group. Every wait is a Clock timeout. `forced` (a second SIGTERM or
 * SIGINT in the host) cuts every wait short and goes straight to SIGKILL.
 *
 * @internal
 */
export const runStop = (
  handle: Handle,
  settings: StopSettings,
  steps: StopSteps,
  forced: Effect.Effect<unknown> | undefined
): Effect.Effect<NodeChildProcess.StopReport> =>
  Effect.gen(function*() {
    const startedAt = yield* Clock.currentTimeMillis
    let isForced = false
    const forcedWatch = forced === undefined ? undefined : Effect.tap(forced, () =>
      Effect.sync(() => {
        isForced = true
      }))
    const hasExited = () => handle.unsafeExitStatus() !== undefined
    const groupGone = Effect.repeat(Effect.sync(() => !handle.unsafeGroupAlive()), {
      schedule: Schedule.spaced(groupPollInterval),
      until: (gone) => gone
    })
    /** `wait`, at most `duration`, and not after a forced stop: `onTimeout` in those cases. */
    const within = <A, B>(wait: Effect.Effect<A>, duration: Duration.Duration, onTimeout: B): Effect.Effect<A | B> => {
      const bounded = Effect.timeoutOrElse(Effect.map(wait, identity<A | B>), {
        duration,
        orElse: () => Effect.succeed(onTimeout)
      })
      return isolated(
        forcedWatch === undefined ? bounded : Effect.raceFirst(bounded, Effect.as(forcedWatch, onTimeout))
      )
    }
    const exitWithin = (duration: Duration.Duration): Effect.Effect<boolean> =>
      hasExited()
        ? Effect.succeed(true)
        : isForced
        ? Effect.succeed(false)
        : within(Effect.as(handle.exit, true), duration, false)
    const groupGoneWithin = (duration: Duration.Duration): Effect.Effect<boolean> =>
      within(Effect.as(groupGone, true), duration, false)

    let inputEnded = false
    const endInput = Effect.suspend(() => {
      if (inputEnded) return Effect.void
      inputEnded = true
      // Closing the connection is uninterruptible (it flushes, maybe drains): disconnected, so that its bound holds.
      return isolated(Effect.timeoutOption(disconnect(steps.endInput), settings.shutdownTimeout)).pipe(
        Effect.andThen(handle.stdin.end)
      )
    })

    let endedBy: NodeChildProcess.StopStep | undefined = hasExited() ? "Exited" : undefined
    let shutdown: NodeChildProcess.ShutdownOutcome = "Skipped"
    let killSent = false

    if (endedBy === undefined && steps.shutdown !== undefined) {
      yield* Effect.logDebug("stop: protocol shutdown")
      shutdown = yield* within(
        Effect.raceFirst(
          Effect.match(steps.shutdown, { onFailure: () => "Failed" as const, onSuccess: () => "Completed" as const }),
          Effect.as(handle.exit, "Failed" as const)
        ),
        settings.shutdownTimeout,
        "TimedOut" as const
      )
      if (hasExited()) endedBy = "Shutdown"
    }

    if (endedBy === undefined) {
      const unresponsive = isForced || (shutdown === "TimedOut" && settings.killOnShutdownTimeout)
      if (!unresponsive) {
        yield* Effect.logDebug("stop: end of input")
        yield* endInput
        if (yield* exitWithin(settings.exitTimeout)) {
          endedBy = "EndOfInput"
        } else if (!isForced) {
          yield* Effect.logWarning(
            `stop: still running ${Duration.toMillis(settings.exitTimeout)} ms after end of input: SIGTERM`
          )
          handle.unsafeSignal("SIGTERM")
          if (yield* exitWithin(settings.terminateTimeout)) endedBy = "Terminate"
        }
      }
      if (endedBy === undefined) {
        yield* Effect.logWarning(
          isForced
            ? "stop: forced: SIGKILL"
            : unresponsive
            ? `stop: no answer to shutdown within ${Duration.toMillis(settings.shutdownTimeout)} ms: SIGKILL`
            : `stop: still running ${Duration.toMillis(settings.terminateTimeout)} ms after SIGTERM: SIGKILL`
        )
        handle.unsafeSignal("SIGKILL")
        killSent = true
        yield* endInput
        const exited = yield* isolated(Effect.timeoutOrElse(Effect.as(handle.exit, true), {
          duration: settings.killTimeout,
          orElse: () => Effect.succeed(false)
        }))
        endedBy = exited ? "Kill" : "Unkillable"
        if (!exited) {
          yield* Effect.logError(`stop: still running ${Duration.toMillis(settings.killTimeout)} ms after SIGKILL`)
        }
      }
    }
    // Exited before or during the shutdown step: the connection still has to be closed.
    yield* endInput

    let descendants: NodeChildProcess.StopReport["descendants"] = "None"
    if (endedBy === "Unkillable") {
      // SIGKILL went to the whole group already, and waiting again for what did not die of it would not help.
      if (handle.unsafeGroupAlive()) descendants = "Survived"
    } else if (handle.unsafeGroupAlive()) {
      if (!killSent && !isForced) {
        yield* Effect.logDebug("stop: processes left in the child's process group: SIGTERM")
        handle.unsafeSignal("SIGTERM")
        if (yield* groupGoneWithin(settings.terminateTimeout)) descendants = "Terminated"
      }
      if (descendants === "None") {
        yield* Effect.logWarning("stop: processes left in the child's process group: SIGKILL")
        handle.unsafeSignal("SIGKILL")
        const gone = yield* isolated(Effect.timeoutOrElse(Effect.as(groupGone, true), {
          duration: settings.killTimeout,
          orElse: () => Effect.succeed(false)
        }))
        descendants = gone ? "Killed" : "Survived"
      }
    }

    const report: NodeChildProcess.StopReport = {
      endedBy,
      shutdown,
      descendants,
      exit: handle.unsafeExitStatus(),
      elapsedMillis: (yield* Clock.currentTimeMillis) - startedAt
    }
    yield* Effect.logDebug(`stop: done (${endedBy}) in ${report.elapsedMillis} ms`)
    return report
  }).pipe(Effect.uninterruptible)

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
}

/**
 * @internal
 */
export interface Settings {
  readonly name: string
  readonly stderrTailLines: number
  readonly maxStderrLineLength: number
  readonly stderrLogLevel: LogLevel.LogLevel
  readonly stop: StopSettings
  readonly shutdown: Effect.Effect<unknown, unknown> | undefined
  readonly forced: Effect.Effect<unknown> | undefined
}

/**
 * Builds the child around a handle in the current Scope. The stderr reader and the exit observer are forked before
 * the stop finalizer is registered, so they outlive it: stderr is read until the very end (a child blocked on a full
 * stderr pipe could never exit), and the exit is observed during the stop.
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
      const how = status.signal === null ? `code ${status.exitCode}` : `signal ${status.signal}`
      if (stopping || (status.exitCode === 0 && status.signal === null)) yield* Effect.logDebug(`exited (${how})`)
      else {yield* Effect.logWarning(
          `exited unexpectedly (${how})`,
          ...(error.stderrTail.length > 0 ? [error.stderrTail] : [])
        )}
      for (const hook of hooks.splice(0)) yield* hook(error)
      yield* Deferred.succeed(afterExit, void 0)
    }).pipe(annotate, Effect.forkScoped)

    const steps: StopSteps = { shutdown: settings.shutdown, endInput: handle.stdin.end }
    const stopped = yield* Deferred.make<NodeChildProcess.StopReport>()
    const stop: Effect.Effect<NodeChildProcess.StopReport> = Effect.suspend(() => {
      if (stopping) return Deferred.await(stopped)
      stopping = true
      return runStop(handle, settings.stop, steps, settings.forced).pipe(
        Effect.tap((report) => Deferred.succeed(stopped, report)),
        annotate,
        Effect.uninterruptible
      )
    })
    yield* Effect.addFinalizer(() => stop)

    const transport: Transport.Transport.Service = {
      // At the end of stdout, wait (bounded) for the exit to be handled, so that pending calls fail with `PeerExited`
      // rather than with the plainer "transport closed" of a stream that just ended.
      incoming: Stream.concat(
        handle.stdout,
        Stream.fromEffectDrain(Effect.timeoutOption(Deferred.await(afterExit), settings.stop.exitTimeout))
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
      isStopping: () => stopping,
      onExit: (hook) =>
        Effect.suspend(() => {
          if (exitError !== undefined) return hook(exitError)
          hooks.push(hook)
          return Effect.void
        })
    }
  })

/**
 * @internal
 */
export const logLevelOf = (level: LogLevel.LogLevel | undefined): LogLevel.LogLevel => level ?? "Debug"

/**
 * Starts what talks to the child (a peer, a connection) on its transport, in a Scope of its own that the stop
 * sequence closes as its "end of input" step: after the protocol shutdown (which needs it), before the signals.
 * When the child exits on its own, the connection is over: pending calls fail with `PeerExited`, and the peer closes
 * with it (a connection on top moves to `Failed`). An exit during the stop is expected: pending calls still fail with
 * `PeerExited`, and the stop closes the rest.
 *
 * @internal
 */
export const attach = <A, E, R>(
  self: Internal,
  start: Effect.Effect<A, E, R | Scope.Scope>,
  peerOf: (started: A) => Pick<Peer.Peer<any, any>, "failPending" | "close">,
  shutdown: ((started: A) => Effect.Effect<unknown, unknown>) | undefined
): Effect.Effect<A, E, Exclude<R, Scope.Scope>> =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    self.steps.endInput = Scope.close(scope, Exit.void)
    const started = yield* start.pipe(
      Scope.provide(scope),
      Effect.onError(() => Scope.close(scope, Exit.void))
    )
    if (shutdown !== undefined) self.steps.shutdown = shutdown(started)
    const peer = peerOf(started)
    yield* self.onExit((error) => self.isStopping() ? Effect.asVoid(peer.failPending(error)) : peer.close(error))
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
  attach(self, Peer.make<Serves, Calls, R>(options), (peer) => peer, shutdown)
