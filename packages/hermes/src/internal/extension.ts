/**
 * The extension runtime behind `Extension.run`: the SDK's loop. It serves the extension side of the protocol, gives
 * commands their `Editor`, and ends in the one shutdown checklist (`extensionChecklist.ts`) that every way of ending
 * runs exactly once. The command queue is in `extensionCommands.ts`, the state file in `stateFile.ts`.
 *
 * @internal
 */
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Bounds from "@lifeline/kernel/Bounds"
import * as Connection from "@lifeline/kernel/Connection"
import * as GracefulShutdown from "@lifeline/kernel/GracefulShutdown"
import type * as Peer from "@lifeline/kernel/Peer"
import * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import * as Transport from "@lifeline/kernel/Transport"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import type * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberSet from "effect/FiberSet"
import * as FileSystem from "effect/FileSystem"
import * as Option from "effect/Option"
import * as Path from "effect/Path"
import * as Result from "effect/Result"
import * as Scope from "effect/Scope"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Editor from "../Editor.js"
import type * as Extension from "../Extension.js"
import * as HermesProtocol from "../HermesProtocol.js"
import * as HostMonitor from "../HostMonitor.js"
import * as Checklist from "./extensionChecklist.js"
import * as Commands from "./extensionCommands.js"
import * as StateFile from "./stateFile.js"

type ExtensionPeer = Peer.Peer<
  typeof HermesProtocol.Extension.serves[number],
  typeof HermesProtocol.Extension.calls[number]
>

/** `Extension.defaultCommandLimits` (the reasons are there). @internal */
export const defaultCommandLimits = { maxConcurrentCommands: 16, maxQueuedCommands: 64 } as const

/**
 * Hermes' data directory: what the host said in `initialize`, else `HERMES_DATA_DIR`, else `~/.hermes`
 * (docs/protocol.md, "initialize"). Read through `Config`, so tests can set it with a `ConfigProvider`.
 */
const resolveDataDir = (path: Path.Path, fromHost: string | undefined) =>
  fromHost !== undefined && fromHost.trim() !== ""
    ? Effect.succeed(fromHost)
    : Config.NonEmptyString(HermesProtocol.DATA_DIR_VARIABLE).pipe(
      Config.orElse(() => Config.map(Config.NonEmptyString("HOME"), (home) => path.join(home, ".hermes"))),
      Effect.mapError(() => "neither the host, HERMES_DATA_DIR nor HOME names a data directory")
    )

/**
 * Text the host chose (a shutdown reason, a version), for a log line: it may hold anything, so it is cut to 200
 * characters and quoted, with every character outside printable ASCII escaped (no line breaks, no terminal escapes,
 * no bidirectional overrides), whatever logger prints it.
 */
const quote = (text: string): string => {
  const escaped = JSON.stringify(text.length > 200 ? text.slice(0, 200) : text).replace(
    /[^\x20-\x7e]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`
  )
  return text.length > 200 ? `${escaped} (cut, ${text.length} characters)` : escaped
}

const knownReasons = HermesProtocol.ShutdownReason.literals.join(", ")

/** A count option: a whole number, at least `min`; `Infinity` stays (no bound), `NaN` is the default. */
const count = (value: number | undefined, fallback: number, min: number) => {
  const whole = Math.floor(value ?? fallback)
  return Number.isNaN(whole) ? fallback : Math.max(min, whole)
}

/** @internal */
export const run = <S, Res, R>(
  extension: Extension.Extension<S, Res, R>
): Effect.Effect<
  Extension.Outcome,
  Config.ConfigError,
  Transport.Transport | FileSystem.FileSystem | Path.Path | Exclude<R, Editor.Editor | Scope.Scope>
> =>
  Effect.gen(function*() {
    const options = extension.options
    const name = options.name
    if (!HermesProtocol.isExtensionName(name)) {
      const rule = `1 to ${HermesProtocol.MAX_NAME_LENGTH} letters, digits, ".", "_" or "-", not dots only`
      return yield* Effect.die(
        new Error(
          `BUG: ${quote(name)} is not an extension name: ${rule} (it names the extension's data directory; hosts ` +
            "refuse any other)"
        )
      )
    }
    const transport = yield* Transport.Transport
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const context = (yield* Effect.context<never>()) as Context.Context<Exclude<R, Editor.Editor | Scope.Scope>>
    // The one rule (option, service, environment, fail-fast). A policy someone wrote down wrong in the environment is
    // not replaced by another: the run fails before it reads a byte, and says why.
    const policy = yield* ShutdownPolicy.resolve(options.policy).pipe(
      Effect.tapError((error) =>
        Effect.logError(
          `cannot start: the shutdown policy in the environment is invalid: ${error.message.replace(/\s*\n\s*/g, " ")}`
        )
      )
    )
    const monitor = yield* Effect.serviceOption(HostMonitor.HostMonitor)
    const runScope = yield* Effect.scope
    const budget = Duration.fromInputUnsafe(options.shutdownBudget ?? Bounds.extensionShutdownBudget)
    const maxConcurrent = count(options.maxConcurrentCommands, defaultCommandLimits.maxConcurrentCommands, 1)
    const maxQueued = count(options.maxQueuedCommands, defaultCommandLimits.maxQueuedCommands, 0)

    const commands = yield* FiberSet.make<void, never>()
    const resourcesScope = yield* Scope.make()
    const state = yield* SubscriptionRef.make<S>(options.state?.initial as S)
    let stateFile: string | undefined
    // Set when the state file could not be read at start and was moved aside (reported in the shutdown answer), or
    // could not be moved either (then nothing is saved over it: what was not read is never overwritten).
    let stateSetAside: NonNullable<HermesProtocol.ShutdownData["stateSetAside"]> | undefined
    let saveRefused: string | undefined
    let resources = undefined as Res
    // What the host sent in `initialize`; none is an empty object, so an author never checks for its absence.
    let settings: HermesProtocol.Settings = {}
    let accepting = true
    const windows = new Map<string, Deferred.Deferred<void>>()
    // `window/closed` can overtake the fiber that registers the window it names (docs/protocol.md: notifications
    // arrive at any time): remember such ids for the registration.
    const closedEarly = new Set<string>()
    // Completed by a forced stop (a second signal under `NodeSignals.runMain`): a drain in progress ends at once.
    const forced = yield* Deferred.make<void>()
    const peerReady = yield* Deferred.make<ExtensionPeer>()
    const shutdownRequested = yield* Deferred.make<HermesProtocol.ShutdownReason | undefined>()
    // Completed with the host's pid when the monitor reports that the host exited without closing our stdin.
    const hostExited = yield* Deferred.make<number>()
    let watchingHost = false

    /** Watches the host named in `initialize`, once, for as long as the run lasts. 0 means unknown: no watch. */
    const watchHost = (hostPid: number) =>
      Effect.suspend(() => {
        if (watchingHost || hostPid <= 0 || Option.isNone(monitor)) return Effect.void
        watchingHost = true
        return monitor.value.awaitExit(hostPid).pipe(
          Effect.andThen(Deferred.succeed(hostExited, hostPid)),
          Effect.forkIn(runScope),
          Effect.asVoid
        )
      })

    const withPeer = <A, E>(f: (peer: ExtensionPeer) => Effect.Effect<A, E>) =>
      Effect.flatMap(Deferred.await(peerReady), f)

    const editor: Editor.Editor.Service = {
      getMessage: (format) =>
        withPeer((peer) => peer.call(HermesProtocol.GetMessage, format === undefined ? undefined : { format })).pipe(
          Effect.map((result) => result.message)
        ),
      patchMessage: (patches) =>
        withPeer((peer) => peer.call(HermesProtocol.PatchMessage, { patches })).pipe(Effect.map((r) => r.applied)),
      setMessage: (message) => withPeer((peer) => Effect.asVoid(peer.call(HermesProtocol.SetMessage, { message }))),
      openWindow: (params) =>
        withPeer((peer) => peer.call(HermesProtocol.OpenWindow, params)).pipe(
          Effect.map(({ windowId }): Editor.Window => {
            const signal = Deferred.makeUnsafe<void>()
            if (closedEarly.delete(windowId) || !accepting) Deferred.doneUnsafe(signal, Exit.void)
            else windows.set(windowId, signal)
            return { windowId, url: params.url, closed: Deferred.await(signal) }
          })
        )
    }

    const runCommand = ({ args, command, id }: Commands.Queued<Extension.Command<S, Res, R>>) =>
      Effect.suspend(() => command.run({ command: id, arguments: args, state, resources, settings })).pipe(
        Effect.scoped,
        Effect.provideService(Editor.Editor, editor),
        (effect) =>
          Effect.provide(effect as Effect.Effect<void, unknown, Exclude<R, Editor.Editor | Scope.Scope>>, context),
        Effect.matchCauseEffect({
          onSuccess: () => Effect.logDebug(`command ${id} finished`),
          onFailure: (cause) =>
            Cause.hasInterruptsOnly(cause)
              ? Effect.logInfo(`command ${id} cancelled`)
              : Effect.logError(`command ${id} failed`, cause)
        }),
        Effect.annotateLogs({ "hermes.command": id }),
        Effect.withSpan(`hermes.command ${id}`)
      )

    // Commands running and waiting (./extensionCommands.ts).
    const queue = Commands.make<Extension.Command<S, Res, R>>({
      commands,
      maxConcurrent,
      maxQueued,
      run: runCommand,
      accepting: () => accepting,
      quote
    })

    // -- the shutdown checklist (docs/protocol.md, "shutdown"), run once whatever ends the extension ---------------

    const checklistDone = yield* Deferred.make<Checklist.Checklist>()
    let checklistStarted = false

    const checklist: Effect.Effect<Checklist.Checklist> = Effect.suspend(() => {
      if (checklistStarted) return Deferred.await(checklistDone)
      checklistStarted = true
      const file = stateFile
      const stateOptions = options.state
      return Checklist.run({
        budget,
        policy,
        forced,
        commands,
        stopAccepting: Effect.suspend(() => {
          accepting = false
          return queue.drop
        }),
        windows,
        resources: resourcesScope,
        saveRefused: () => saveRefused,
        save: stateOptions !== undefined && file !== undefined
          ? {
            file,
            write: SubscriptionRef.get(state).pipe(
              Effect.flatMap((value) => StateFile.save(fs, path, file, stateOptions.schema, value))
            )
          }
          : undefined
      }).pipe(
        Effect.tap((result) => Deferred.succeed(checklistDone, result)),
        Effect.uninterruptible
      )
    })

    /**
     * A state file that could not be read is moved aside before anything can write over it, and reported: its
     * content may be all the user has (a file written by a newer version, a disk that was full for a moment).
     */
    const setAsideUnreadable = (file: string, problem: StateFile.LoadFailure) =>
      Effect.gen(function*() {
        const moved = yield* Effect.result(StateFile.setAside(fs, file, yield* Clock.currentTimeMillis))
        if (Result.isFailure(moved)) {
          saveRefused = `${problem.detail}; ${moved.failure}, so it is left as it is and not overwritten`
          return yield* Effect.logWarning(
            `${problem.detail}; ${moved.failure}: starting from the initial state, which will not be saved over it`
          )
        }
        if (Option.isNone(moved.success)) {
          return yield* Effect.logWarning(`${problem.detail}; it is gone now: starting from the initial state`)
        }
        stateSetAside = { path: moved.success.value, reason: problem.reason, detail: problem.detail }
        yield* Effect.logWarning(
          `${problem.detail}; moved to ${moved.success.value}, not overwritten: starting from the initial state`
        )
      })

    // -- the protocol ---------------------------------------------------------------------------------------------

    const handlers: Peer.Handlers<typeof HermesProtocol.Extension.serves[number], never> = {
      initialize: (params) =>
        Effect.gen(function*() {
          yield* Effect.logInfo(
            `initialize from Hermes ${quote(params.hermesVersion)} (protocol ${
              quote(params.protocolVersion)
            }, pid ${params.hostPid})`
          )
          yield* watchHost(params.hostPid)
          // Bounded by the Schema (`HermesProtocol.MAX_SETTINGS_BYTES`): more was answered -32602 before this ran.
          if (params.settings !== undefined) settings = params.settings
          const dataDir = yield* resolveDataDir(path, params.dataDir)
          if (options.state !== undefined) {
            const file = StateFile.fileOf(path, dataDir, name)
            stateFile = file
            const loaded = yield* StateFile.load(fs, file, options.state.schema).pipe(
              Effect.catch((problem) => Effect.as(setAsideUnreadable(file, problem), Option.none()))
            )
            if (Option.isSome(loaded)) {
              yield* SubscriptionRef.set(state, loaded.value)
              yield* Effect.logInfo(`state loaded from ${file}`)
            }
          }
          if (options.resources !== undefined) {
            resources = yield* options.resources.pipe(
              Scope.provide(resourcesScope),
              (effect) =>
                Effect.provide(effect as Effect.Effect<Res, unknown, Exclude<R, Editor.Editor | Scope.Scope>>, context),
              Effect.catchCause((cause) => Effect.fail(`could not acquire resources: ${Checklist.describe(cause)}`))
            )
          }
          return { name, version: options.version, commands: extension.commands }
        }).pipe(Effect.mapError((detail) => RpcError.make(-32000, "Initialize failed", detail))),
      initialized: () => Effect.logDebug("initialized"),
      shutdown: (params) =>
        Effect.gen(function*() {
          // Any reason is accepted: refusing a shutdown would get the process killed with its state unsaved. One the
          // protocol does not name is read as `closing` (docs/protocol.md, "shutdown").
          const given = params?.reason
          const known = given === undefined || HermesProtocol.isShutdownReason(given)
          const reason = known ? given : "closing"
          yield* known
            // A missing reason is logged as `unknown`, the word the protocol uses for it (docs/protocol.md, "shutdown").
            ? Effect.logInfo(`shutdown requested (reason: ${reason ?? "unknown"})`)
            : Effect.logWarning(
              `shutdown requested with an unknown reason ${quote(given)} (known: ${knownReasons}): handled as closing`
            )
          const result = yield* checklist
          yield* Deferred.succeed(shutdownRequested, reason)
          if (result.failures.length > 0) {
            const setAside = stateSetAside === undefined
              ? ""
              : `; the state file that could not be read was moved to ${stateSetAside.path}`
            return yield* Effect.fail(
              RpcError.make(HermesProtocol.SHUTDOWN_FAILED, "Shutdown failed", result.failures.join("; ") + setAside)
            )
          }
          return stateSetAside === undefined ? { success: true } : { success: true, data: { stateSetAside } }
        }),
      "command/execute": ({ arguments: args, command }) =>
        Effect.suspend(() => {
          if (!accepting) return Effect.logWarning(`command ${quote(command)} ignored: shutting down`)
          const definition = Object.hasOwn(options.commands, command) ? options.commands[command] : undefined
          if (definition === undefined) return Effect.logWarning(`unknown command ${quote(command)}`)
          return queue.offer({ id: command, command: definition, args: args ?? [] })
        }),
      "window/closed": ({ windowId }) =>
        Effect.sync(() => {
          const signal = windows.get(windowId)
          if (signal !== undefined) {
            windows.delete(windowId)
            Deferred.doneUnsafe(signal, Exit.void)
          } else if (closedEarly.size < 1024) {
            closedEarly.add(windowId)
          }
        })
    }

    const connection = yield* Connection.make({
      protocol: HermesProtocol.Extension,
      transport,
      handlers,
      handshake: Connection.accept("initialize", { notifications: ["initialized"] }),
      // Once the checklist runs (a `shutdown`, the end of stdin, a signal) the lifecycle is still `Ready`, so its gate
      // would serve a request, answer -32601 to an unknown one and -32600 to a second `initialize`: every request but
      // `shutdown` (whose second copy gets the first one's answer, docs/protocol.md) is -32003 instead, as documented.
      // Notifications still reach their handlers (`window/closed` releases a window; `command/execute` is refused by
      // its own), and outbound calls stay open: commands drain through `editor/*` calls.
      gate: {
        inbound: (method) =>
          accepting || method === HermesProtocol.Shutdown.name ? undefined : RpcError.RpcError.shuttingDown(method),
        outbound: () => undefined
      },
      policy,
      // A signal must not close the connection before the checklist: commands drain through `editor/*` calls.
      gracefulShutdown: false
    }).pipe(Effect.orDie)
    yield* Deferred.succeed(peerReady, connection.peer)

    // Under `NodeSignals.runMain`, the first signal runs the checklist (a drain included) while the connection is
    // still open, before the run is interrupted; the second one cuts the drain short. Registered before the finalizer
    // below, so it is still registered while that finalizer runs: the second signal interrupts the run first, then
    // forces what is registered.
    yield* GracefulShutdown.register({
      name: `extension ${name}`,
      stop: checklist.pipe(Effect.annotateLogs({ "hermes.extension": name })),
      stopNow: Effect.andThen(Deferred.succeed(forced, void 0), checklist).pipe(
        Effect.annotateLogs({ "hermes.extension": name })
      )
    })

    // Registered after the connection, so it runs first: on interruption, commands drain while the host is still
    // reachable, and the connection is torn down after.
    yield* Effect.addFinalizer(() => Effect.asVoid(checklist))

    const ending = yield* Effect.raceAll([
      Effect.map(Deferred.await(shutdownRequested), (reason) => ({ _tag: "Shutdown" as const, reason })),
      Effect.map(connection.peer.closed, (why) => ({
        _tag: why._tag === "PeerClosed" && why.reason === "TransportClosed" ? "EndOfInput" as const : "Failed" as const,
        reason: undefined
      })),
      Effect.map(Deferred.await(hostExited), () => ({ _tag: "HostExited" as const, reason: undefined }))
    ])
    if (ending._tag === "Shutdown") {
      // The answer is queued once the handler has finished; `stop` then writes it before it ends the transport.
      yield* Effect.timeoutOption(connection.peer.awaitIdle, Duration.seconds(1))
    } else if (ending._tag === "HostExited") {
      const hostPid = yield* Deferred.await(hostExited)
      yield* Effect.logWarning(`the host (pid ${hostPid}) exited without closing the connection: shutting down`)
    } else {
      yield* Effect.logInfo(ending._tag === "EndOfInput" ? "the host closed the connection" : "the connection failed")
    }
    yield* connection.stop(
      ending._tag === "Shutdown" ? "RemoteShutdown" : ending._tag === "HostExited" ? "Stop" : "TransportClosed"
    )
    const result = yield* checklist
    return {
      _tag: ending._tag,
      reason: ending.reason,
      failures: result.failures,
      cancelled: result.cancelled,
      refusedCommands: queue.refused()
    }
  }).pipe(
    Effect.scoped,
    Effect.onInterrupt(() => Effect.logInfo("interrupted: the shutdown checklist ran as a finalizer")),
    Effect.annotateLogs({ "hermes.extension": extension.options.name })
  )
