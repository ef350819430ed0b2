/**
 * Effect's `ChildProcessSpawner` over the supervisor: Effect's own Node spawner does the plumbing of each process
 * (stdio settings, streams, additional fds, `unref`, errors), and this module adds what it lacks (docs/supervising-
 * effect-children.md): a bounded stop of the whole group with zombies counted as exited, `kill` of an exited child
 * that succeeds, the exit as data, and the journal record. A pipeline is wired here, one supervised process per stage,
 * so that every stage has its own stop and record (Effect's spawner wires it inside, where no stage can be reached).
 *
 * @internal
 */
import type * as Process from "@lifeline/process/Process"
import type * as StopSequence from "@lifeline/process/StopSequence"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as PlatformError from "effect/PlatformError"
import * as ChildProcess from "effect/process/ChildProcess"
import * as ChildProcessSpawner from "effect/process/ChildProcessSpawner"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { Writable } from "node:stream"
import { argvOf } from "./childCommand.js"
import * as Guardian from "./guardian.js"
import * as SpawnedProcess from "./spawnedProcess.js"
import type { Entry, Recorder } from "./spawnerJournal.js"
import * as Supervisor from "./supervisor.js"

/**
 * @internal
 */
export interface Settings {
  readonly killGrace: Duration.Input
  readonly verifyTimeout: Duration.Input
  readonly recorder: Recorder | undefined
  /** Each child watched by the host's guardian with this grace (ms) between its SIGTERM and SIGKILL; none: not. */
  readonly guardianGrace: number | undefined
}

/**
 * How each handle this module made exited and was stopped: read by `NodeSupervisedSpawner.exitStatus`/`lastStop`.
 *
 * @internal
 */
export const supervised = new WeakMap<ChildProcessSpawner.ChildProcessHandle, {
  readonly exit: Effect.Effect<Process.ExitStatus>
  readonly exitStatus: () => Process.ExitStatus | undefined
  readonly lastStop: () => StopSequence.StopReport | undefined
  /** Calls a listener once the exit is seen (from Node's event, after `exitStatus` has it); none without Node's. */
  readonly onExit: ((listener: () => void) => () => void) | undefined
  /** Whether it has exited and its process group has no live member left (zombies do not count). Never waits. */
  readonly gone: () => boolean
  /** The Node stream of its stdin, when Node published the process and the stdin is a pipe. */
  readonly stdin: Writable | undefined
  /** Takes its stdout from Effect's stream (see spawnedProcess.ts), once; `undefined` when it cannot. */
  readonly takeStdout: () => SpawnedProcess.TakenOutput | undefined
}>()

const posix = process.platform !== "win32"

// Effect's handle reports a signal only inside the message of the error under its exit code's `PlatformError`.
const signalOf = (cause: Cause.Cause<unknown>): string | null => {
  const error = Cause.squash(cause)
  const reason: unknown = PlatformError.isPlatformError(error) ? error.reason.cause : undefined
  const match = /receipt of signal: '(\w+)'/.exec(reason instanceof Error ? reason.message : "")
  return match === null ? null : match[1]
}

const killFailed = (command: ChildProcess.StandardCommand, report: StopSequence.StopReport) =>
  PlatformError.systemError({
    _tag: "Unknown",
    module: "ChildProcess",
    method: "kill",
    description: `${command.command} (${report.endedBy}) was still running after SIGKILL`
  })

const unrecorded = (command: ChildProcess.StandardCommand, cause: unknown) =>
  PlatformError.systemError({
    _tag: "Unknown",
    module: "ChildProcess",
    method: "spawn",
    description: `${command.command} could not be recorded in the journal, so it was killed`,
    cause
  })

/** How often an exit that Effect's handle could not report (its input stream failed first) is looked for. */
const exitPoll = Schedule.spaced(Duration.millis(10))

/** How often the watcher of an exited child looks whether its process group is gone. */
const groupWatch = Schedule.spaced(Duration.millis(100))

/**
 * @internal
 */
export const make = (
  inner: ChildProcessSpawner.ChildProcessSpawner["Service"],
  settings: Settings
): ChildProcessSpawner.ChildProcessSpawner["Service"] => {
  const bounds = Supervisor.boundsOf(settings.killGrace, settings.verifyTimeout)
  // The bounds of the last `forceKillAfter` seen: a face that gives every command the same one (an MCP transport's
  // kill grace) decodes it once, not on every stop.
  let lastForceKillAfter: { readonly input: Duration.Input; readonly bounds: typeof bounds } | undefined
  const boundsAfter = (forceKillAfter: Duration.Input) => {
    if (lastForceKillAfter?.input !== forceKillAfter) {
      lastForceKillAfter = {
        input: forceKillAfter,
        bounds: Supervisor.boundsOf(forceKillAfter, settings.verifyTimeout)
      }
    }
    return lastForceKillAfter.bounds
  }
  const spawnOne = (
    command: ChildProcess.StandardCommand
  ): Effect.Effect<ChildProcessSpawner.ChildProcessHandle, PlatformError.PlatformError, Scope.Scope> =>
    Effect.gen(function*() {
      // Effect's release goes in a Scope of its own, closed in the background once the stop below is done: it would
      // otherwise wait for the group without a bound (no `forceKillAfter`) or for zombies (up to 1 s).
      const innerScope = yield* Scope.make()
      const [handle, node] = yield* SpawnedProcess.capture(inner.spawn(command), (spawned) => spawned.pid).pipe(
        Scope.provide(innerScope),
        Effect.onError(() => Scope.close(innerScope, Exit.void))
      )
      let status: Process.ExitStatus | undefined
      let lastStop: StopSequence.StopReport | undefined
      const untilStopped = Effect.repeat(Effect.map(handle.isRunning, (running) => !running), {
        schedule: exitPoll,
        until: (stopped) => stopped
      })
      const seen = (exitStatus: Process.ExitStatus) =>
        Effect.sync(() => {
          status ??= exitStatus
          return status
        })
      const exited = yield* Deferred.make<Process.ExitStatus>()
      let observe: Effect.Effect<Process.ExitStatus>
      if (node !== undefined) {
        // The exit as Node reports it (see spawnedProcess.ts), from a listener: no fiber waits for it.
        const onExit = (exitCode: number | null, signal: NodeJS.Signals | null) => {
          status ??= { exitCode, signal }
          const exitStatus = status
          // The fibers waiting for it (the watcher below, `awaitExit`) run at once when it is done: after the exit
          // event's other listeners (a stop's, an MCP transport's), which the next close waits for, not before them.
          setImmediate(() => Deferred.doneUnsafe(exited, Exit.succeed(exitStatus)))
        }
        if (node.exitCode !== null || node.signalCode !== null) onExit(node.exitCode, node.signalCode)
        else node.once("exit", onExit)
        observe = Deferred.await(exited)
      } else {
        // Effect's `exitCode` is evaluated once, by the watcher below: each evaluation races two waits and, for a
        // signalled child, builds an error and the command's display text.
        observe = Effect.matchCauseEffect(handle.exitCode, {
          onSuccess: (code) => seen({ exitCode: code, signal: null }),
          onFailure: (cause) => {
            const signal = signalOf(cause)
            return signal !== null
              ? seen({ exitCode: null, signal })
              : Effect.andThen(Effect.ignore(untilStopped), seen({ exitCode: null, signal: null }))
          }
        }).pipe(Effect.tap((exitStatus) => Deferred.succeed(exited, exitStatus)), Supervisor.onSystemClock)
      }
      const child: Supervisor.Child = {
        pid: handle.pid,
        ownsGroup: posix && command.options.detached !== false,
        exit: Deferred.await(exited),
        // Node records the exit on the process before it emits `exit`, and a listener added before ours (Effect's
        // own) may run a stop before ours is called: the status is read from the process then.
        unsafeExitStatus: () => {
          if (status === undefined && node !== undefined && (node.exitCode !== null || node.signalCode !== null)) {
            status = { exitCode: node.exitCode, signal: node.signalCode }
          }
          return status
        },
        // Called after the listener that records the exit, which was added first.
        unsafeOnExit: node === undefined ? undefined : (listener) => {
          node.once("exit", listener)
          return () => node.off("exit", listener)
        }
      }

      const argv = argvOf(command)
      let entry: Entry | undefined
      let unwatch: (() => void) | undefined
      const guardianGrace = settings.guardianGrace
      // Watched before the journal write: the guardian's line is in its pipe at once, a journal write takes longer.
      const watch = guardianGrace === undefined ? Effect.void : Effect.sync(() => {
        unwatch ??= Guardian.watch(child.pid, { graceMillis: guardianGrace })
      })
      const record = Effect.andThen(
        watch,
        settings.recorder === undefined ? Effect.void : Effect.map(
          settings.recorder.record(child.pid, argv),
          (recorded) => {
            entry = recorded
          }
        )
      )
      const forget = (end: Process.ExitStatus | undefined, later = false) =>
        Effect.suspend(() => {
          unwatch?.()
          unwatch = undefined
          const recorded = entry
          entry = undefined
          return recorded === undefined ? Effect.void : later ? recorded.exitedLater(end) : recorded.exited(end)
        })
      yield* record.pipe(
        // Nothing talks to it yet, and an unrecorded child is what a crash must not leave.
        Effect.tapError(() =>
          Effect.andThen(
            Effect.sync(() => Supervisor.unsafeSignal(child, "SIGKILL")),
            Effect.forkDetach(Scope.close(innerScope, Exit.void))
          )
        ),
        Effect.mapError((error) => unrecorded(command, error))
      )

      const stopWith = (options: ChildProcess.KillOptions | undefined) =>
        Effect.tap(
          Supervisor.stop(
            child,
            options?.killSignal ?? "SIGTERM",
            options?.forceKillAfter === undefined ? bounds : boundsAfter(options.forceKillAfter)
          ),
          (report) =>
            Effect.andThen(
              Effect.sync(() => {
                lastStop = report
              }),
              // Left `InFlight` while anything of it runs, for the next start's sweep. Written after the stop returns:
              // a crash before it leaves a record of a process that is gone, which the sweep finds `Gone`.
              report.endedBy === "Unkillable" || report.descendants === "Survived"
                ? Effect.void
                : forget(status, true)
            )
        )

      let referenced = true
      // One watcher per child: it reports the exit, then closes the record once the group is gone, not only when the
      // Scope closes. Not in a Scope: an unref'ed child outlives its Scope, and its exit is still reported; the watch
      // of its group stops with the Scope. It lets the fibers that wait for the same exit (a stop) go first: it is
      // woken first, having waited the longest, and what it does can wait that long. The group is looked at once
      // before any schedule is built: it is mostly gone already, or the Scope is closing (the stop sees to it then).
      let scoped = true
      const groupDone = Effect.sync(() => !scoped || !Supervisor.unsafeGroupAlive(child))
      yield* Effect.flatMap(observe, (exitStatus) =>
        Effect.andThen(
          Effect.andThen(Effect.yieldNow, Effect.suspend(() => Supervisor.reportExit(child, exitStatus))),
          Effect.flatMap(groupDone, (done) =>
            done ? Effect.void : Effect.repeat(groupDone, { schedule: groupWatch, until: (gone) => gone }))
        )).pipe(
          Effect.andThen(Effect.suspend(() => scoped ? forget(status, true) : Effect.void)),
          Supervisor.onSystemClock,
          Effect.forkDetach
        )

      yield* Effect.addFinalizer(() =>
        Effect.gen(function*() {
          scoped = false
          // An unref'ed child that still runs is left running, as Effect's spawner leaves it.
          if (referenced || status !== undefined) {
            const report = yield* stopWith(command.options)
            // Nothing is left for Effect's release to wait for.
            if (report.endedBy !== "Unkillable") yield* Effect.ignore(handle.unref)
          }
          yield* Effect.forkDetach(Scope.close(innerScope, Exit.void))
        })
      )

      const unref: Effect.Effect<ChildProcessSpawner.Reref, PlatformError.PlatformError> = Effect.map(
        handle.unref,
        (reref) => {
          referenced = false
          return Effect.andThen(
            reref,
            Effect.suspend(() => {
              if (referenced) return Effect.void
              referenced = true
              return status === undefined && entry === undefined ?
                Effect.catch(
                  record,
                  (error) => Effect.logWarning(`could not record child process ${child.pid}`, error)
                ) :
                Effect.void
            })
          )
        }
      ).pipe(Effect.tap(() => forget(undefined)))

      let stdoutTaken = false
      const self = ChildProcessSpawner.makeHandle({
        ...handle,
        kill: (options) =>
          Effect.flatMap(
            stopWith(options),
            (report) => report.endedBy === "Unkillable" ? Effect.fail(killFailed(command, report)) : Effect.void
          ),
        unref
      })
      supervised.set(self, {
        exit: child.exit,
        exitStatus: child.unsafeExitStatus,
        lastStop: () => lastStop,
        onExit: child.unsafeOnExit,
        gone: () => child.unsafeExitStatus() !== undefined && !Supervisor.unsafeGroupAlive(child),
        stdin: node?.stdin ?? undefined,
        takeStdout: () => {
          if (node === undefined || stdoutTaken) return undefined
          stdoutTaken = true
          return SpawnedProcess.takeStdout(node)
        }
      })
      return self
      // Uninterruptible from the spawn to the stop's finalizer, so no interruption leaves a child nobody stops. The
      // spawn itself waits only for Node's `spawn` or `error` event.
    }).pipe(Effect.uninterruptible)

  const sourceOf = (
    handle: ChildProcessSpawner.ChildProcessHandle,
    from: ChildProcess.PipeFromOption | undefined
  ): Stream.Stream<Uint8Array, PlatformError.PlatformError> => {
    if (from === undefined || from === "stdout") return handle.stdout
    if (from === "stderr") return handle.stderr
    if (from === "all") return handle.all
    const fd = ChildProcess.parseFdName(from)
    return fd === undefined ? handle.stdout : handle.getOutputFd(fd)
  }

  /** The next stage of a pipeline, with `source` as its stdin or as an input fd (an unknown fd name means stdin). */
  const fedBy = (
    command: ChildProcess.StandardCommand,
    source: Stream.Stream<Uint8Array, PlatformError.PlatformError>,
    to: ChildProcess.PipeToOption | undefined
  ): ChildProcess.StandardCommand => {
    const options = command.options
    const fd = to === undefined || to === "stdin" ? undefined : ChildProcess.parseFdName(to)
    if (fd === undefined) {
      const stdin = options.stdin
      // Its encoding and `endOnDone` are kept when the stage gave a whole stdin configuration.
      const config = typeof stdin === "object" && !Stream.isStream(stdin)
        ? { ...stdin, stream: source }
        : { stream: source }
      return ChildProcess.make(command.command, command.args, { ...options, stdin: config })
    }
    const name = ChildProcess.fdName(fd) as `fd${number}`
    const existing = options.additionalFds?.[name]
    return ChildProcess.make(command.command, command.args, {
      ...options,
      additionalFds: {
        ...options.additionalFds,
        [name]: existing?.type === "duplex" ? { ...existing, stream: source } : { type: "input", stream: source }
      }
    })
  }

  const flatten = (command: ChildProcess.Command): {
    readonly commands: Array<ChildProcess.StandardCommand>
    readonly pipes: Array<ChildProcess.PipeOptions>
  } => {
    if (command._tag === "StandardCommand") return { commands: [command], pipes: [] }
    const left = flatten(command.left)
    const right = flatten(command.right)
    return { commands: [...left.commands, ...right.commands], pipes: [...left.pipes, command.options, ...right.pipes] }
  }

  const spawn = (
    command: ChildProcess.Command
  ): Effect.Effect<ChildProcessSpawner.ChildProcessHandle, PlatformError.PlatformError, Scope.Scope> =>
    Effect.gen(function*() {
      if (command._tag === "StandardCommand") return yield* spawnOne(command)
      const { commands, pipes } = flatten(command)
      const handles = [yield* spawnOne(commands[0])]
      for (let i = 1; i < commands.length; i++) {
        const pipe = pipes[i - 1] ?? {}
        handles.push(yield* spawnOne(fedBy(commands[i], sourceOf(handles[i - 1], pipe.from), pipe.to)))
      }
      const last = handles[handles.length - 1]
      const self = ChildProcessSpawner.makeHandle({
        ...last,
        stdin: handles[0].stdin,
        // Every stage, the last first (as Effect's spawner does); the first failure is reported once all were tried.
        kill: (options) =>
          Effect.flatMap(
            Effect.forEach([...handles].reverse(), (handle) => Effect.exit(handle.kill(options))),
            (exits) => Effect.asVoid(Effect.all(exits))
          ),
        unref: Effect.map(
          Effect.forEach(handles, (handle) => handle.unref),
          (rerefs) => Effect.forEach([...rerefs].reverse(), (reref) => reref, { discard: true })
        )
      })
      const info = supervised.get(last)
      // Its exit is the last stage's; its input, the first stage's.
      if (info !== undefined) supervised.set(self, { ...info, stdin: supervised.get(handles[0])?.stdin })
      return self
    })

  return ChildProcessSpawner.make(spawn)
}
