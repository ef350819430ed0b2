/**
 * The running child as the `Handle` the rest depends on (a fake one in unit tests), and `spawnHandle`, which spawns a
 * real one with three pipes and the one function that signals it.
 *
 * @internal
 */
import * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import * as Transport from "@lifeline/kernel/Transport"
import type * as Process from "@lifeline/process/Process"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { identity } from "effect/Function"
import type * as ChildProcessCommand from "effect/process/ChildProcess"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as ChildProcess from "node:child_process"
import { environmentOf, isDirectory, nulCharacter, unwrap } from "./childCommand.js"
import * as Processes from "./processes.js"
import { type Reader, unsafeMakeReader } from "./streamReader.js"
import { makeWriter, type Writer } from "./streamWriter.js"

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

/*
 * The host's own shutdown policy is not the child's: a child that read it would drain (or not) on the host's terms and
 * answer later than the host waits for (docs/shutdown.md, "A child keeps its own policy"). A caller that wants the
 * child to have one passes it in the command's `env`.
 */
const policyVariables = [ShutdownPolicy.POLICY_VARIABLE, ShutdownPolicy.DRAIN_TIMEOUT_VARIABLE]

const failureOf = (error: NodeJS.ErrnoException): SpawnFailure => ({
  reason: error.code === "ENOENT" ? "NotFound" : error.code === "EACCES" ? "PermissionDenied" : "Unknown",
  detail: error.message
})

const ignore = () => {}

interface Spawned {
  readonly child: ChildProcess.ChildProcessWithoutNullStreams
  readonly stdout: Reader<Transport.TransportError>
  readonly stderr: Reader<unknown>
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
          env: environmentOf(options, policyVariables),
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

const messageOf = (u: unknown): string => u instanceof Error ? u.message : String(u)
