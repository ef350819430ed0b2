/**
 * How the extension host starts one generation: spawn the process, answer its requests from the start, and run the
 * `initialize` handshake under the host's own bound (docs/protocol.md, "initialize"), which kills a process that did
 * not answer in time. A shutdown during the start cancels it (docs/protocol.md, "Restarts"). What a start refuses
 * before it spawns anything (an invalid name in the answer, settings that are not JSON or too large) is here too. The
 * supervisor (`extensionHost.ts`) decides what to do with the outcome.
 *
 * @internal
 */
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Connection from "@lifeline/kernel/Connection"
import * as Lifecycle from "@lifeline/kernel/Lifecycle"
import type * as Peer from "@lifeline/kernel/Peer"
import * as PeerError from "@lifeline/kernel/PeerError"
import * as ShutdownPolicy from "@lifeline/kernel/ShutdownPolicy"
import type * as Process from "@lifeline/process/Process"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberMap from "effect/FiberMap"
import * as Result from "effect/Result"
import * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import type * as ExtensionHost from "../ExtensionHost.js"
import * as HermesProtocol from "../HermesProtocol.js"
import type * as Spawner from "../Spawner.js"
import * as Model from "./extensionHostModel.js"
import * as Stop from "./extensionHostStop.js"
import type { Generation, HostConnection } from "./extensionHostStop.js"

/** `text` quoted for a message, every character outside printable ASCII escaped, at most 64 characters of it. */
const quote = (text: string): string => {
  const shown = JSON.stringify(text.slice(0, 64)).replace(
    /[^\x20-\x7e]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`
  )
  return text.length <= 64 ? shown : `${shown}… (${text.length - 64} more characters)`
}

/**
 * Why `name` cannot name an extension, or `undefined` if it can (`HermesProtocol.isExtensionName`, the rule the SDK
 * checks too): the name becomes the extension's data directory, `<dataDir>/extensions/<name>`.
 */
const invalidName = (name: string): string | undefined =>
  HermesProtocol.isExtensionName(name)
    ? undefined
    : `initialize: ${quote(name)} is not an extension name: 1 to ${HermesProtocol.MAX_NAME_LENGTH} letters, digits, ` +
      `".", "_" or "-", not dots only (it names the extension's data directory)`

/** Why the host will not pass `settings`, or `undefined` when it may (docs/protocol.md, "initialize"). @internal */
export const refuseSettings = (
  settings: HermesProtocol.Settings | undefined
): ExtensionHost.SettingsRefused | undefined => {
  if (settings === undefined) return undefined
  const limit = HermesProtocol.MAX_SETTINGS_BYTES
  const bytes = HermesProtocol.settingsBytes(settings)
  if (bytes === undefined || typeof settings !== "object" || settings === null || Array.isArray(settings)) {
    return new Model.SettingsRefused({ reason: "NotJson", limit })
  }
  return bytes > limit ? new Model.SettingsRefused({ reason: "TooLarge", limit, actual: bytes }) : undefined
}

/** What a start needs of the host. @internal */
export interface LaunchContext {
  readonly spawner: Spawner.Spawner.Service
  /** Each generation's Scope is forked from it. */
  readonly generations: Scope.Scope
  readonly options: ExtensionHost.Options
  readonly initializeTimeout: Duration.Duration
  readonly maxOpenWindows: number
  readonly makeHandlers: (generation: Generation) => Peer.Handlers<HermesProtocol.HostServes, never>
  readonly stop: Stop.StopContext
}

/**
 * How a start ended: `Ready` (the handshake is done), `Cancelled` by a shutdown before `initialize` was answered (the
 * generation still to be stopped), or `Failed` (already reported as `Failed` and stopped).
 *
 * @internal
 */
type Launched =
  | {
    readonly _tag: "Ready"
    readonly generation: Generation
    readonly connection: HostConnection
    readonly info: HermesProtocol.InitializeResult
  }
  | { readonly _tag: "Cancelled"; readonly generation: Generation; readonly reason: HermesProtocol.ShutdownReason }
  | { readonly _tag: "Failed" }

const failed: Launched = { _tag: "Failed" }

/** Starts generation `number` of `spec` with `settings`; `cancel` is completed by a shutdown. @internal */
export const launch = (
  ctx: LaunchContext,
  number: number,
  spec: Spawner.Spec,
  settings: HermesProtocol.Settings | undefined,
  cancel: Deferred.Deferred<HermesProtocol.ShutdownReason>
): Effect.Effect<Launched> =>
  Effect.gen(function*() {
    const { emit, setStatus, text } = ctx.stop
    const { initializeTimeout, options } = ctx
    // How much later than `initializeTimeout` the kernel's handshake bound is: the host's own bound fires first.
    const handshakeMargin = Duration.seconds(1)
    const kill = (generation: Generation) => Stop.kill(generation, ctx.stop.verifyTimeout)
    const scope = yield* Scope.fork(ctx.generations, "sequential")
    const env = { ...spec.env, [HermesProtocol.DATA_DIR_VARIABLE]: options.dataDir }
    const spawned = yield* Scope.provide(ctx.spawner.spawn({ ...spec, env }), scope).pipe(Effect.result)
    if (Result.isFailure(spawned)) {
      yield* Scope.close(scope, Exit.void)
      yield* emit((at) => Model.Event.SpawnFailed({ at, generation: number, detail: spawned.failure.message }))
      yield* emit((at) => Model.Event.Failed({ at, reason: spawned.failure.message }))
      yield* setStatus("Failed")
      return failed
    }
    const process = spawned.success
    yield* emit((at) => Model.Event.Spawned({ at, generation: number, pid: process.pid }))
    const exit = yield* Deferred.make<Process.ExitStatus>()
    yield* process.exit.pipe(Effect.flatMap((s) => Deferred.succeed(exit, s)), Effect.forkIn(scope))
    const windowFibers = yield* Scope.provide(FiberMap.make<string>(), scope)
    const generation: Generation = {
      number,
      scope,
      process,
      exit,
      windows: windowFibers,
      windowSlots: yield* Semaphore.make(ctx.maxOpenWindows),
      connection: undefined,
      stopping: false
    }
    yield* emit((at) => Model.Event.Initializing({ at, generation: number }))
    let answer: HermesProtocol.InitializeResult | undefined
    const params: HermesProtocol.InitializeParams = {
      hermesVersion: options.hermesVersion ?? "0.1.0",
      protocolVersion: HermesProtocol.PROTOCOL_VERSION,
      dataDir: options.dataDir,
      hostPid: options.hostPid ?? 0,
      ...(settings === undefined ? {} : { settings })
    }
    const outcome = yield* Connection.make({
      protocol: HermesProtocol.Host,
      transport: process.transport,
      handlers: ctx.makeHandlers(generation),
      handshake: Connection.initiate<HermesProtocol.HostServes, HermesProtocol.HostCalls>(
        (peer) =>
          peer.call(HermesProtocol.Initialize, params, { timeout: Duration.sum(initializeTimeout, handshakeMargin) })
            .pipe(
              // The protocol kills an extension that did not answer in time, and the kill comes first: a failed
              // handshake closes the connection, and an extension that exits at the end of its input would
              // otherwise win that race and look as if it had stopped by itself.
              Effect.timeoutOrElse({
                duration: initializeTimeout,
                orElse: () =>
                  Effect.andThen(
                    kill(generation),
                    Effect.fail(
                      new Lifecycle.HandshakeTimeout({ timeoutMillis: Duration.toMillis(initializeTimeout) })
                    )
                  )
              }),
              Effect.tap((result) => {
                // Refused as a result that does not match its Schema is: the name is part of what the protocol says.
                const refused = invalidName(result.name)
                if (refused !== undefined) return Effect.fail(RpcError.RpcError.internalError(refused))
                answer = result
                return Effect.void
              }),
              Effect.tap(() => peer.notify(HermesProtocol.Initialized, undefined))
            ),
        // Later than the host's own bound above, which kills before it fails the handshake.
        { timeout: Duration.sum(initializeTimeout, handshakeMargin) }
      ),
      policy: ShutdownPolicy.FailFast(),
      // Not stopped by a signal on its own: the host's stop (registered in `start`) asks `shutdown` over it first.
      gracefulShutdown: false,
      requestTimeout: options.requestTimeout,
      limits: options.wireLimits
    }).pipe(
      Scope.provide(scope),
      Effect.result,
      Effect.map((made) => ({ _tag: "Made" as const, made })),
      // A shutdown while the process has not answered `initialize` yet stops it at once, without a `shutdown`
      // request: it holds no state yet. Its connection lives in the generation's Scope, closed by that stop.
      Effect.raceFirst(Effect.map(Deferred.await(cancel), (reason) => ({ _tag: "Cancelled" as const, reason })))
    )
    if (outcome._tag === "Cancelled") return { _tag: "Cancelled", generation, reason: outcome.reason }
    const made = outcome.made

    if (Result.isFailure(made) || answer === undefined) {
      const error = Result.isFailure(made) ? made.failure : undefined
      const hasExited = yield* Deferred.isDone(exit)
      // A timeout first: the host's own bound kills the process before it fails the handshake, so it has exited.
      const reason: ExtensionHost.InitializeFailure = error?._tag === "HandshakeTimeout" ||
          error?._tag === "RequestTimeout"
        ? "timeout"
        : hasExited || error instanceof PeerError.PeerClosed || error instanceof PeerError.PeerExited
        ? "exited"
        : "error"
      const detail = text(
        error === undefined
          ? "no answer"
          : error instanceof RpcError.RpcError
          ? Stop.describeWireError(error)
          : error.message
      )
      generation.stopping = true
      yield* emit((at) => Model.Event.InitializeFailed({ at, generation: number, reason, detail }))
      const exitStatus = hasExited ? yield* Deferred.await(exit) : yield* kill(generation)
      yield* Scope.close(scope, Exit.void)
      yield* Stop.exited(ctx.stop, generation, exitStatus, true)
      yield* emit((at) => Model.Event.Failed({ at, reason: `initialize ${reason}: ${detail}` }))
      yield* setStatus("Failed")
      return failed
    }
    generation.connection = made.success
    return { _tag: "Ready", generation, connection: made.success, info: answer }
  })
