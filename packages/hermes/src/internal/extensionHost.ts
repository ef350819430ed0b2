/**
 * The extension host's supervisor: one generation (process + connection) at a time, crash detection and the restart
 * budget (a shutdown during a restart cancels it, docs/protocol.md "Restarts"), the settings a start uses, and the
 * commands (`execute`, `reloadWith`, the waits). The rooms beside it: how one generation starts
 * (`extensionHostLaunch.ts`), the event log (`extensionHostEvents.ts`), the request handlers
 * (`extensionHostHandlers.ts`), how one generation is stopped (`extensionHostStop.ts`), and the values shared with
 * `ExtensionHost.ts` (`extensionHostModel.ts`).
 *
 * @internal
 */
import * as Bounds from "@lifeline/kernel/Bounds"
import * as GracefulShutdown from "@lifeline/kernel/GracefulShutdown"
import * as Process from "@lifeline/process/Process"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type * as ExtensionHost from "../ExtensionHost.js"
import * as HermesProtocol from "../HermesProtocol.js"
import * as MessageStore from "../MessageStore.js"
import * as Spawner from "../Spawner.js"
import * as WindowPresenter from "../WindowPresenter.js"
import * as EventLog from "./extensionHostEvents.js"
import * as Handlers from "./extensionHostHandlers.js"
import * as Launch from "./extensionHostLaunch.js"
import * as Model from "./extensionHostModel.js"
import * as Stop from "./extensionHostStop.js"
import type { Generation } from "./extensionHostStop.js"

/** A count option: a whole number, at least `min`; `Infinity` stays (no bound), `NaN` is the default. */
const count = (value: number | undefined, fallback: number, min: number) => {
  const whole = Math.floor(value ?? fallback)
  return Number.isNaN(whole) ? fallback : Math.max(min, whole)
}

/** `text` cut to `max` characters, saying how many more there were. */
const cut = (text: string, max: number): string =>
  text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters)`

/** @internal */
export const start = (
  spec: Spawner.Spec,
  options: ExtensionHost.Options
): Effect.Effect<
  ExtensionHost.Extension,
  never,
  Scope.Scope | Spawner.Spawner | MessageStore.MessageStore | WindowPresenter.WindowPresenter
> =>
  Effect.gen(function*() {
    const spawner = yield* Spawner.Spawner
    const store = yield* MessageStore.MessageStore
    const windows = yield* WindowPresenter.WindowPresenter
    const initializeTimeout = Duration.fromInputUnsafe(options.initializeTimeout ?? HermesProtocol.INITIALIZE_TIMEOUT)
    const shutdownTimeout = Duration.fromInputUnsafe(options.shutdownTimeout ?? HermesProtocol.SHUTDOWN_TIMEOUT)
    const exitGrace = Duration.fromInputUnsafe(options.exitGrace ?? Bounds.hostExitGrace)
    const killGrace = Duration.fromInputUnsafe(options.killGrace ?? Bounds.killGrace)
    const maxRestarts = options.restart?.maxRestarts ?? 3
    const restartWindow = Duration.fromInputUnsafe(options.restart?.within ?? Duration.seconds(60))
    const label = [spec.command, ...(spec.args ?? [])].join(" ")
    const defaults = Model.defaultLimits
    const historyLimit = count(options.historyLimit, defaults.historyLimit, 1)
    const maxEventText = count(options.maxEventTextLength, defaults.maxEventTextLength, 0)
    const maxOpenWindows = count(options.maxOpenWindows, defaults.maxOpenWindows, 0)
    const maxPatches = count(options.maxPatches, defaults.maxPatches, 0)
    const maxPatchValueBytes = count(options.maxPatchValueBytes, defaults.maxPatchValueBytes, 0)
    const maxPatchRequestBytes = count(options.maxPatchRequestBytes, defaults.maxPatchRequestBytes, 0)
    const text = (value: string) => cut(value, maxEventText)

    // -- events -----------------------------------------------------------------------------------------------

    const { emit, events, setStatus, status, ...log } = yield* EventLog.make(historyLimit, label)

    // -- state ------------------------------------------------------------------------------------------------

    const lock = yield* Semaphore.make(1)
    // Created before the shutdown finalizer below, so it closes after it: leftover processes are killed only once
    // the polite shutdown has had its chance.
    const generations = yield* Effect.acquireRelease(Scope.make(), (scope, exit) => Scope.close(scope, exit))
    let current: Generation | undefined
    let info: Option.Option<HermesProtocol.InitializeResult> = Option.none()
    let generationCount = 0
    let restarts: Array<number> = []
    // What the next start uses: `reloadWith` changes them (the user changed the extension's settings).
    let currentSpec = spec
    let currentSettings = options.settings
    // Completed with its reason by a shutdown requested while a (re)start may be running: the start gives up instead
    // of making the shutdown wait behind it (docs/protocol.md, "Restarts"). The stop renews it once it holds the lock,
    // so that a later start (a reload) is not cancelled by a shutdown already over.
    let cancelLaunch = Deferred.makeUnsafe<HermesProtocol.ShutdownReason>()
    // What stopping a start the shutdown cancelled did, for that shutdown to answer.
    let cancelledStop: ExtensionHost.ShutdownSummary | undefined
    let lastActivity = yield* Clock.currentTimeMillis
    const touch = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.sync(() => {
        lastActivity = now
      }))

    // -- serving the extension (./extensionHostHandlers.ts) ------------------------------------------------------

    const handlers = Handlers.make({
      store,
      windows,
      emit,
      text,
      touch,
      info: () => info,
      label,
      maxOpenWindows,
      maxPatches,
      maxPatchValueBytes,
      maxPatchRequestBytes
    })
    const makeHandlers = handlers.makeHandlers

    // -- processes --------------------------------------------------------------------------------------------

    // Completed by a forced stop (a second signal to a program under `NodeSignals.runMain`): every stop sequence
    // running or to come cuts its waits short and goes to SIGKILL.
    const forced = yield* Deferred.make<void>()
    const verifyTimeout = Bounds.hostVerifyTimeout(killGrace)

    const stopContext: Stop.StopContext = {
      label,
      text,
      emit,
      setStatus,
      forced,
      shutdownTimeout,
      exitGrace,
      killGrace,
      verifyTimeout
    }
    const kill = (generation: Generation) => Stop.kill(generation, verifyTimeout)
    const launchContext: Launch.LaunchContext = {
      spawner,
      generations,
      options,
      initializeTimeout,
      maxOpenWindows,
      makeHandlers,
      stop: stopContext
    }
    const exited = (generation: Generation, exitStatus: Process.ExitStatus, expected: boolean) =>
      Stop.exited(stopContext, generation, exitStatus, expected)

    const launch: Effect.Effect<void> = Effect.gen(function*() {
      const cancel = cancelLaunch
      // A shutdown came first (during a crash's handling, say): nothing to start.
      if (Deferred.isDoneUnsafe(cancel)) return
      const number = ++generationCount
      info = Option.none()
      yield* setStatus("Starting")
      // Only the `settings` option can be refused here: `reloadWith` checks before it stops anything.
      const refused = Launch.refuseSettings(currentSettings)
      if (refused !== undefined) {
        yield* emit((at) => Model.Event.Failed({ at, reason: refused.message }))
        return yield* setStatus("Failed")
      }
      const launched = yield* Launch.launch(launchContext, number, currentSpec, currentSettings, cancel)
      if (launched._tag === "Cancelled") return yield* stopUnstarted(launched.generation, launched.reason)
      if (launched._tag === "Failed") return
      const { connection, generation } = launched
      current = generation
      info = Option.some(launched.info)
      const result = launched.info
      yield* touch
      yield* emit((at) =>
        Model.Event.Ready({
          at,
          generation: number,
          name: result.name,
          version: result.version,
          commands: result.commands
        })
      )
      yield* setStatus("Ready")
      // A crash is an exit, or a connection lost, that the host did not ask for.
      yield* Effect.raceFirst(Deferred.await(generation.exit), connection.peer.closed).pipe(
        Effect.andThen(lock.withPermits(1)(onCrash(generation))),
        Effect.forkIn(generation.scope)
      )
    })

    const stopUnstarted = (generation: Generation, reason: HermesProtocol.ShutdownReason) =>
      Effect.map(Stop.stopUnstarted(stopContext, generation, reason), (summary) => {
        cancelledStop = summary
      })

    const onCrash = (generation: Generation): Effect.Effect<void> =>
      Effect.gen(function*() {
        if (generation.stopping || current !== generation) return
        generation.stopping = true
        current = undefined
        info = Option.none()
        // A process whose connection was lost is usually exiting: a moment for that, then the forced ladder.
        const exitStatus = Option.getOrUndefined(
          yield* Effect.timeoutOption(Deferred.await(generation.exit), Duration.millis(100))
        ) ?? (yield* kill(generation))
        yield* exited(generation, exitStatus, false)
        yield* Effect.logWarning(`extension crashed (${Process.describe(exitStatus)})`).pipe(
          Effect.annotateLogs({ extension: label })
        )
        const now = yield* Clock.currentTimeMillis
        restarts = restarts.filter((at) => now - at < Duration.toMillis(restartWindow))
        if (restarts.length >= maxRestarts) {
          const reason = `crashed after ${restarts.length} restart(s) within ${Duration.format(restartWindow)}: ` +
            `the restart budget (${maxRestarts}) is exhausted`
          yield* emit((at) => Model.Event.Failed({ at, reason }))
          yield* setStatus("Failed")
        } else {
          restarts.push(now)
          yield* emit((at) => Model.Event.Restarting({ at, restart: restarts.length, maxRestarts }))
          yield* setStatus("Restarting")
          yield* launch
        }
        // Closed last: this fiber lives in that scope.
        yield* Effect.forkDetach(Scope.close(generation.scope, Exit.void))
      })

    const stopGeneration = (generation: Generation, reason: HermesProtocol.ShutdownReason) =>
      Effect.tap(Stop.stopGeneration(stopContext, generation, reason), () =>
        Effect.sync(() => {
          if (current === generation) {
            current = undefined
            info = Option.none()
          }
        }))

    const stopUnderLock = (reason: HermesProtocol.ShutdownReason) =>
      Effect.andThen(
        // Before the lock: a (re)start that holds it gives up now instead of running its handshake to the end.
        Effect.sync(() => Deferred.doneUnsafe(cancelLaunch, Exit.succeed(reason))),
        lock.withPermits(1)(Effect.gen(function*() {
          cancelLaunch = Deferred.makeUnsafe()
          const cancelled = cancelledStop
          cancelledStop = undefined
          const generation = current
          if (generation === undefined) {
            const now = yield* SubscriptionRef.get(status)
            // A start this shutdown cancelled (stopped without a `shutdown` request, or never spawned) ends as a
            // stop does.
            if (cancelled !== undefined || now === "Starting" || now === "Restarting" || now === "Stopping") {
              yield* setStatus(reason === "disabled" ? "Disabled" : "Stopped")
            } else if (reason === "disabled" && (now === "Stopped" || now === "Failed")) {
              yield* setStatus("Disabled")
            }
            return Option.fromUndefinedOr(cancelled)
          }
          const summary = yield* stopGeneration(generation, reason)
          yield* setStatus(reason === "disabled" ? "Disabled" : "Stopped")
          return Option.some(summary)
        }))
      )
    // The stop under way, joined by whoever asks meanwhile (a signal, the program, the finalizer) instead of starting
    // a second one; it runs detached, so interrupting one caller (a second signal interrupts the main fiber) never
    // leaves it half done, and a forced stop (`forced`) cuts that same ladder short.
    let stopping: Fiber.Fiber<Option.Option<ExtensionHost.ShutdownSummary>> | undefined
    const shutdown = (reason: HermesProtocol.ShutdownReason = "closing") =>
      Effect.suspend(() => {
        if (stopping !== undefined) return Fiber.join(stopping)
        let fiber: Fiber.Fiber<Option.Option<ExtensionHost.ShutdownSummary>> | undefined
        return Effect.flatMap(
          Effect.forkDetach(Effect.ensuring(
            stopUnderLock(reason),
            Effect.sync(() => {
              if (stopping === fiber) stopping = undefined
            })
          )),
          (forked) => {
            fiber = forked
            stopping = forked
            return Fiber.join(forked)
          }
        )
      })

    // Under `NodeSignals.runMain`, a signal stops the extension as `shutdown` does, before the main fiber is
    // interrupted; a second one forces the stop. Registered before the finalizer below, so it is still registered
    // while that finalizer runs: the second signal interrupts the main fiber first, then forces what is registered.
    yield* GracefulShutdown.register({
      name: `extension ${label}`,
      stop: shutdown("closing"),
      stopNow: Effect.andThen(Deferred.succeed(forced, void 0), shutdown("closing"))
    })

    // Run in a fiber of its own: a finalizer of an interrupted fiber could not wait on the Clock-bound steps.
    yield* Effect.addFinalizer(() => Effect.flatMap(Effect.forkDetach(shutdown("closing")), Fiber.join))

    const awaitStatus = (predicate: (s: ExtensionHost.Status) => boolean) =>
      SubscriptionRef.changes(status).pipe(
        Stream.filter(predicate),
        Stream.runHead,
        Effect.flatMap(Option.match({ onNone: () => SubscriptionRef.get(status), onSome: Effect.succeed }))
      )

    const awaitQuiet = (settle: Duration.Input) => {
      const settleMillis = Duration.toMillis(Duration.fromInputUnsafe(settle))
      const loop: Effect.Effect<void> = Effect.suspend(() => {
        if (current === undefined) return Effect.void
        return Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const quietFor = now - lastActivity
          if (handlers.activeRequests() === 0 && quietFor >= settleMillis) return Effect.void
          return Effect.andThen(Effect.sleep(Duration.millis(Math.max(settleMillis - quietFor, 10))), loop)
        })
      })
      return loop
    }

    const execute = (command: string, args?: ReadonlyArray<unknown>) =>
      Effect.gen(function*() {
        const generation = current
        const state = yield* SubscriptionRef.get(status)
        if (generation === undefined || state !== "Ready" || generation.connection === undefined) {
          return yield* new Model.CommandRefused({
            command,
            reason: "NotReady",
            detail: `the extension is ${state}`
          })
        }
        const known = Option.exists(info, (i) => i.commands.some((c) => c.id === command))
        if (!known) {
          return yield* new Model.CommandRefused({
            command,
            reason: "UnknownCommand",
            detail: "the extension did not announce it in initialize"
          })
        }
        yield* generation.connection.peer.notify(
          HermesProtocol.ExecuteCommand,
          args === undefined ? { command } : { command, arguments: args }
        ).pipe(
          Effect.mapError((e) => new Model.CommandRefused({ command, reason: "Disconnected", detail: e.message }))
        )
        yield* touch
        yield* emit((at) => Model.Event.CommandSent({ at, command }))
      })

    // Under the lock, as every later start: a shutdown that comes meanwhile (a signal) cancels it and then waits for it.
    yield* lock.withPermits(1)(launch)

    const reloadWith = (changes: ExtensionHost.Reconfiguration) =>
      Effect.suspend(() => {
        const refused = Launch.refuseSettings(changes.settings)
        if (refused !== undefined) return Effect.fail(refused)
        return Effect.andThen(
          lock.withPermits(1)(Effect.gen(function*() {
            if (current !== undefined) yield* stopGeneration(current, "reload")
            currentSpec = {
              ...currentSpec,
              ...(changes.args === undefined ? {} : { args: changes.args }),
              ...(changes.env === undefined ? {} : { env: changes.env })
            }
            if (changes.settings !== undefined) currentSettings = changes.settings
            restarts = []
            yield* launch
          })),
          SubscriptionRef.get(status)
        )
      })

    const handle: ExtensionHost.Extension = {
      get spec() {
        return currentSpec
      },
      status: SubscriptionRef.get(status),
      statusChanges: SubscriptionRef.changes(status),
      events,
      history: log.history,
      droppedEvents: log.droppedEvents,
      info: Effect.sync(() => info),
      execute,
      shutdown,
      disable: shutdown("disabled"),
      reload: Effect.orDie(reloadWith({})), // no settings to refuse
      reloadWith,
      awaitStatus,
      awaitQuiet
    }
    return handle
  })
