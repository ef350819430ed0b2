/**
 * The extension SDK's shutdown checklist (docs/protocol.md, "shutdown"; docs/writing-an-extension.md, "What the SDK
 * does at shutdown"), within the shutdown budget: stop accepting work, drain or cancel the commands as the policy says,
 * release the windows' waiters and the resources, persist the state. The SDK's loop (`extension.ts`) runs it once,
 * whatever ends the extension, and answers `shutdown` with what it reports.
 *
 * @internal
 */
import type * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Scope from "effect/Scope"

/** Time kept back from a drain for releasing resources and writing the state. */
const cleanupReserve = Duration.seconds(1)
const interruptBound = Duration.millis(500)
const minimumStep = Duration.millis(250)

/**
 * At most this effect's time, and the caller does not wait for the rest, even if it is uninterruptible: it runs in a
 * detached fiber that is interrupted, without waiting, when the time is up (Effect 4 has no `Effect.disconnect`).
 */
const bounded = <A, E>(self: Effect.Effect<A, E>, duration: Duration.Duration) =>
  Effect.flatMap(Effect.forkDetach(Effect.interruptible(self)), (fiber) =>
    Fiber.join(fiber).pipe(
      Effect.timeoutOption(duration),
      Effect.tap((done) =>
        Option.isNone(done)
          ? Effect.sync(() => fiber.interruptUnsafe())
          : Effect.void
      )
    ))

/** What the checklist did: the steps that failed, and the commands it cancelled (running or waiting). @internal */
export interface Checklist {
  readonly failures: ReadonlyArray<string>
  readonly cancelled: number
}

/** What the loop gives the checklist. @internal */
export interface Steps {
  readonly budget: Duration.Duration
  readonly policy: ShutdownPolicy.Policy
  /** Completed by a forced stop: the drain ends at once. */
  readonly forced: Deferred.Deferred<void>
  readonly commands: FiberSet.FiberSet<void, never>
  /** Step 1: stops accepting work, drops the commands waiting for a slot and says how many. */
  readonly stopAccepting: Effect.Effect<number>
  /** Step 3: whoever waits for a window, released. */
  readonly windows: Map<string, Deferred.Deferred<void>>
  /** Step 4: the scope of the resources. */
  readonly resources: Scope.Closeable
  /** Step 5: why the state must not be saved (an unreadable file that could not be moved aside), if so. */
  readonly saveRefused: () => string | undefined
  /** Step 5: the state's file and its atomic write; none without state. */
  readonly save: { readonly file: string; readonly write: Effect.Effect<void, string> } | undefined
}

/** @internal */
export const describe = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  return error instanceof Error ? error.message : String(error)
}

/** Steps 1 to 5, once; never fails (a step that dies is reported as a failure). @internal */
export const run = (steps: Steps): Effect.Effect<Checklist> =>
  Effect.gen(function*() {
    const startedAt = yield* Clock.currentTimeMillis
    const deadline = startedAt + Duration.toMillis(steps.budget)
    const remaining = (keep: Duration.Duration = Duration.zero) =>
      Effect.map(
        Clock.currentTimeMillis,
        (now) => Duration.max(Duration.millis(deadline - now - Duration.toMillis(keep)), minimumStep)
      )
    const failures: Array<string> = []

    // 1. Stop accepting work: later `command/execute` notifications are dropped, and so are those that wait for
    // a slot: they never started.
    const dropped = yield* steps.stopAccepting
    if (dropped > 0) yield* Effect.logInfo(`dropping ${dropped} waiting command(s) that never started`)

    // 2. Cancel or drain the commands in flight, as the policy says; a forced stop ends the drain at once.
    const running = yield* FiberSet.size(steps.commands)
    if (running > 0 && steps.policy._tag === "Drain" && !Deferred.isDoneUnsafe(steps.forced)) {
      const drainFor = Duration.min(steps.policy.timeout, yield* remaining(cleanupReserve))
      yield* Effect.logInfo(`draining ${running} command(s) for at most ${Duration.format(drainFor)}`)
      yield* FiberSet.awaitEmpty(steps.commands).pipe(
        Effect.raceFirst(Deferred.await(steps.forced)),
        Effect.interruptible,
        Effect.timeoutOption(drainFor)
      )
    }
    const interrupted = yield* FiberSet.size(steps.commands)
    if (interrupted > 0) {
      yield* Effect.logInfo(`cancelling ${interrupted} command(s)`)
      const stopped = yield* bounded(FiberSet.clear(steps.commands), interruptBound)
      if (Option.isNone(stopped)) failures.push(`${interrupted} command(s) did not stop within 500 ms`)
    }
    const cancelled = interrupted + dropped

    // 3. Windows: Hermes closes them; whoever waits for one is released.
    for (const signal of steps.windows.values()) Deferred.doneUnsafe(signal, Exit.void)
    steps.windows.clear()

    // 4. Release resources (HTTP servers behind windows, connections, files) through their finalizers.
    const released = yield* Scope.close(steps.resources, Exit.void).pipe(
      Effect.exit,
      (effect) => Effect.flatMap(remaining(minimumStep), (bound) => bounded(effect, bound))
    )
    if (Option.isNone(released)) failures.push("Could not release resources in time")
    else if (Exit.isFailure(released.value)) {
      failures.push(`Could not release resources: ${describe(released.value.cause)}`)
    }

    // 5. Persist state, atomically.
    const saveRefused = steps.saveRefused()
    if (saveRefused !== undefined) failures.push(`Could not save state to disk: ${saveRefused}`)
    else if (steps.save !== undefined) {
      const { file, write } = steps.save
      const saved = yield* write.pipe(
        Effect.catchDefect((defect) => Effect.fail(`the write died: ${describe(Cause.die(defect))}`)),
        Effect.result,
        (effect) => Effect.flatMap(remaining(), (bound) => bounded(effect, bound))
      )
      if (Option.isNone(saved)) failures.push("Could not save state to disk in time")
      else if (Result.isFailure(saved.value)) failures.push(`Could not save state to disk: ${saved.value.failure}`)
      else yield* Effect.logDebug(`state saved to ${file}`)
    }

    const elapsed = (yield* Clock.currentTimeMillis) - startedAt
    yield* failures.length === 0
      ? Effect.logInfo(`cleanup finished in ${elapsed} ms`)
      : Effect.logWarning(`cleanup finished in ${elapsed} ms with failures: ${failures.join("; ")}`)
    return { failures, cancelled } satisfies Checklist
  }).pipe(
    Effect.catchCause((cause) =>
      Effect.as(Effect.logError("BUG: the shutdown checklist died", cause), {
        failures: [`the cleanup died: ${describe(cause)}`],
        cancelled: 0
      })
    )
  )
