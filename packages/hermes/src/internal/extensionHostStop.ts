/**
 * How the extension host stops one generation (its process and connection): docs/protocol.md's shutdown sequence on
 * the kernel's stop ladder (`StopSequence`), the stop of a process that has not answered `initialize` yet (a shutdown
 * during a restart, docs/protocol.md "Restarts"), and the forced kill of a process the host gives up on.
 *
 * @internal
 */
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import type * as Connection from "@lifeline/kernel/Connection"
import * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import type * as Process from "@lifeline/process/Process"
import * as StopSequence from "@lifeline/process/StopSequence"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberMap from "effect/FiberMap"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import type * as Semaphore from "effect/Semaphore"
import type * as ExtensionHost from "../ExtensionHost.js"
import * as HermesProtocol from "../HermesProtocol.js"
import type * as Spawner from "../Spawner.js"
import * as Model from "./extensionHostModel.js"

/** @internal */
export type HostConnection = Connection.Connection<HermesProtocol.HostServes, HermesProtocol.HostCalls>

/** One process the host started, with its connection once `initialize` has been answered. @internal */
export interface Generation {
  readonly number: number
  readonly scope: Scope.Closeable
  readonly process: Spawner.Process
  readonly exit: Deferred.Deferred<Process.ExitStatus>
  readonly windows: FiberMap.FiberMap<string>
  /** One permit per window that may be open: taken by `ui/openWindow`, given back when the window has closed. */
  readonly windowSlots: Semaphore.Semaphore
  connection: HostConnection | undefined
  /** Set once the host has decided to stop it: its exit is then no crash. */
  stopping: boolean
}

/** What the stops need of the host: its event log, its status, the forced-stop signal and its bounds. @internal */
export interface StopContext {
  readonly label: string
  /** Text the extension controls, cut to `maxEventTextLength`. */
  readonly text: (value: string) => string
  readonly emit: (make: (at: number) => ExtensionHost.Event) => Effect.Effect<void>
  readonly setStatus: (status: ExtensionHost.Status) => Effect.Effect<void>
  /** Completed by a forced stop (a second signal): every stop running or to come goes to SIGKILL at once. */
  readonly forced: Deferred.Deferred<void>
  readonly shutdownTimeout: Duration.Duration
  readonly exitGrace: Duration.Duration
  readonly killGrace: Duration.Duration
  readonly verifyTimeout: Duration.Duration
}

/** @internal */
export const describeWireError = (error: RpcError.RpcError): string =>
  `${error.code} ${error.message}${
    error.data === undefined ? "" : `: ${typeof error.data === "string" ? error.data : JSON.stringify(error.data)}`
  }`

/** The status reported for a process that did not exit even after SIGKILL (`Unkillable`). @internal */
const unknownExit: Process.ExitStatus = { exitCode: null, signal: null }

/** Records the generation's exit, with the last lines of its stderr. @internal */
export const exited = (
  ctx: StopContext,
  generation: Generation,
  exitStatus: Process.ExitStatus,
  expected: boolean
): Effect.Effect<void> =>
  Effect.flatMap(
    generation.process.stderrTail,
    (stderrTail) =>
      ctx.emit((at) =>
        Model.Event.Exited({ at, generation: generation.number, status: exitStatus, expected, stderrTail })
      )
  )

/**
 * The generation's process as the kernel's stop sequence sees it. The `Spawner` knows no process groups: the
 * sequence takes the process's own exit for the group's.
 */
export const targetOf = (generation: Generation): StopSequence.Target => ({
  exit: Deferred.await(generation.exit),
  exitStatus: Effect.flatMap(Deferred.poll(generation.exit), Effect.transposeOption),
  signal: generation.process.kill,
  endInput: generation.process.transport.end
})

/**
 * The stop sequence, forced from the start: SIGKILL at once, then the exit (bounded: a process the OS cannot kill
 * is reported with an unknown status). For a process the host gives up on (a failed `initialize`, a lost
 * connection): it is owed no `shutdown`, and its input is left to the generation's Scope, so that it cannot exit by
 * itself at the end of its input first (protocol: "its process killed").
 */
export const kill = (generation: Generation, verifyTimeout: Duration.Duration) =>
  Effect.map(
    StopSequence.run({ ...targetOf(generation), endInput: Effect.void }, { forced: Effect.void }, {
      verifyTimeout
    }),
    (report) => report.exit ?? unknownExit
  )

/** The first steps of every stop of a generation: marked stopping, `Stopping`, `ShutdownStarted`; when it began. */
const beginStop = (ctx: StopContext, generation: Generation, reason: HermesProtocol.ShutdownReason) =>
  Effect.gen(function*() {
    generation.stopping = true
    const startedAt = yield* Clock.currentTimeMillis
    yield* ctx.setStatus("Stopping")
    yield* ctx.emit((at) => Model.Event.ShutdownStarted({ at, reason }))
    return startedAt
  })

/** The last steps of every stop: the generation's Scope closed, `ShutdownFinished` with its summary, the exit. */
const finishStop = (
  ctx: StopContext,
  generation: Generation,
  startedAt: number,
  report: StopSequence.StopReport,
  answer: Pick<ExtensionHost.ShutdownSummary, "reason" | "responded" | "success" | "error">
) =>
  Effect.gen(function*() {
    yield* Scope.close(generation.scope, Exit.void)
    const elapsed = (yield* Clock.currentTimeMillis) - startedAt
    const summary: ExtensionHost.ShutdownSummary = {
      ...answer,
      killed: report.signals.includes("SIGKILL"),
      terminated: report.signals.includes("SIGTERM"),
      exit: report.exit,
      elapsedMillis: elapsed,
      elapsedMs: elapsed
    }
    yield* ctx.emit((at) => Model.Event.ShutdownFinished({ at, summary }))
    yield* exited(ctx, generation, report.exit ?? unknownExit, true)
    return summary
  })

/**
 * Stops a process that has not answered `initialize` yet, for a shutdown that came meanwhile: no `shutdown`
 * request (it holds no state), its input ended, `exitGrace` to exit by itself, SIGTERM, `killGrace`, SIGKILL; a
 * forced stop (a second signal) goes to SIGKILL at once. Bounded by `exitGrace` + `killGrace` + the verification,
 * within the bound of a normal shutdown with the defaults (docs/protocol.md, "Restarts").
 */
export const stopUnstarted = (
  ctx: StopContext,
  generation: Generation,
  reason: HermesProtocol.ShutdownReason
): Effect.Effect<ExtensionHost.ShutdownSummary> =>
  Effect.gen(function*() {
    const startedAt = yield* beginStop(ctx, generation, reason)
    const report = yield* StopSequence.run(targetOf(generation), { forced: Deferred.await(ctx.forced) }, {
      exitGrace: ctx.exitGrace,
      killGrace: ctx.killGrace,
      verifyTimeout: ctx.verifyTimeout
    })
    return yield* finishStop(ctx, generation, startedAt, report, {
      reason,
      responded: false,
      success: false,
      error: "not asked: it had not answered initialize yet (its start was cancelled)"
    })
  })

/**
 * docs/protocol.md's sequence on the kernel's one stop ladder (`StopSequence`): `shutdown` within `shutdownTimeout` (no
 * answer: SIGKILL at once), the connection closed (the end of stdin), then `exitGrace` to exit after a successful
 * answer (`killGrace` after an error answer), SIGTERM, `killGrace`, SIGKILL (docs/protocol.md, "Lifecycle").
 */
export const stopGeneration = (
  ctx: StopContext,
  generation: Generation,
  reason: HermesProtocol.ShutdownReason
): Effect.Effect<ExtensionHost.ShutdownSummary> =>
  Effect.gen(function*() {
    const startedAt = yield* beginStop(ctx, generation, reason)
    yield* FiberMap.clear(generation.windows)
    const connection = generation.connection!
    let responded = false
    let success = false
    let error: string | undefined
    // Fails unless the answer is `{ success: true }`: the ladder then gives the process `killGrace`, not
    // `exitGrace`. The call's own timeout is longer than `shutdownTimeout`, so the ladder's bound is what ends it.
    const ask = Effect.suspend(() => {
      if (Deferred.isDoneUnsafe(ctx.forced)) {
        error = "not asked: the stop was forced"
        return Effect.fail(error)
      }
      return connection.peer.call(HermesProtocol.Shutdown, { reason }, {
        timeout: Duration.sum(ctx.shutdownTimeout, Duration.seconds(1))
      }).pipe(
        Effect.exit,
        Effect.flatMap((answer) => {
          if (Exit.isSuccess(answer)) {
            responded = true
            success = answer.value.success
            if (success) return Effect.void
            error = "the extension answered { success: false }"
            return Effect.fail(error)
          }
          const failure = Cause.findErrorOption(answer.cause)
          if (Option.isSome(failure) && failure.value instanceof RpcError.RpcError) {
            responded = true
            const described = ctx.text(describeWireError(failure.value))
            error = described
            return Effect.andThen(
              Effect.logWarning(`shutdown answered with an error: ${described}`).pipe(
                Effect.annotateLogs({ extension: ctx.label })
              ),
              Effect.fail(described)
            )
          }
          // Once the stop is forced, the ladder kills the process at once: the call may fail because the
          // connection was lost or torn down before the interruption reaches it. Either way, it was the force.
          error = Deferred.isDoneUnsafe(ctx.forced)
            ? "no answer before the stop was forced"
            : Option.match(failure, { onNone: () => Cause.pretty(answer.cause), onSome: (e) => e.message })
          return Effect.fail(error)
        })
      )
    })
    const close = (stop: (reason?: "Stop") => Effect.Effect<unknown>) =>
      Effect.andThen(stop("Stop"), connection.awaitShutdown)
    const report = yield* StopSequence.run(
      targetOf(generation),
      {
        shutdown: ask,
        close: close(connection.stop),
        closeNow: close(connection.stopNow),
        forced: Deferred.await(ctx.forced)
      },
      {
        shutdownTimeout: ctx.shutdownTimeout,
        exitGrace: ctx.exitGrace,
        killGrace: ctx.killGrace,
        verifyTimeout: ctx.verifyTimeout,
        policy: ShutdownPolicy.FailFast()
      }
    )
    if (!responded && error === undefined) {
      error = report.shutdown === "TimedOut"
        ? report.forced
          ? "no answer before the stop was forced"
          : `no answer within ${Duration.format(ctx.shutdownTimeout)}`
        : report.shutdown === "Skipped"
        ? "not asked: the extension had already exited"
        : "the extension exited before it answered"
    }
    return yield* finishStop(ctx, generation, startedAt, report, { reason, responded, success, error })
  })
