/**
 * The body of `PromiseConnection`: a connection in a Scope of its own, opened and closed from Promise code.
 *
 * @internal
 */
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Scope from "effect/Scope"
import * as Connection from "../Connection.js"
import type * as Lifecycle from "../Lifecycle.js"
import type * as Method from "../Method.js"
import type * as Peer from "../Peer.js"
import * as PromiseClient from "../PromiseClient.js"
import type * as PromiseConnection from "../PromiseConnection.js"
import type * as Protocol from "../Protocol.js"
import * as Transport from "../Transport.js"

/*
 * A rejection the handler meant as an answer (an `RpcError`, or the method's typed error: a tagged error) is the
 * handler's failure; anything else is a bug of the handler, a defect, which the peer answers with -32603.
 */
const isAnswer = (error: unknown): boolean =>
  error instanceof RpcError.RpcError ||
  (typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string")

const requestHandler = (
  handler: (params: unknown, context: PromiseConnection.HandlerContext) => unknown
) =>
(params: unknown, context: Peer.HandlerContext) =>
  Effect.tryPromise({
    // The signal aborts when the handler's fiber is interrupted: a cancellation, a fail-fast stop, a drain's deadline.
    try: (signal) => Promise.resolve(handler(params, { ...context, signal })),
    catch: (error) => error
  }).pipe(Effect.catch((error) => isAnswer(error) ? Effect.fail(error) : Effect.die(error)))

const notificationHandler = (handler: (params: unknown) => unknown) => (params: unknown) =>
  Effect.tryPromise({ try: () => Promise.resolve(handler(params)), catch: (error) => error })

/** @internal */
export const handlers = <Serves extends Method.Any, Calls extends Method.Any>(
  protocol: Protocol.Protocol<Serves, Calls>,
  promiseHandlers: PromiseConnection.Handlers<Serves>
): Peer.Handlers<Serves, never> => {
  const effects: Record<string, unknown> = {}
  const given = promiseHandlers as unknown as Record<string, (...args: Array<any>) => unknown>
  for (const method of protocol.serves) {
    const handler = given[method.name]
    if (handler === undefined) continue
    effects[method.name] = method._tag === "Request" ? requestHandler(handler) : notificationHandler(handler)
  }
  return effects as Peer.Handlers<Serves, never>
}

// Effect's default logger writes to stdout: a Promise program's stdout is its own, never the library's.
const toStderr = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provideService(effect, Logger.LogToStderr, true)

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(toStderr(effect))

/** @internal */
export const open = async <Serves extends Method.Any, Calls extends Method.Any, E>(
  options: PromiseConnection.Options<Serves, Calls, E>
): Promise<PromiseConnection.PromiseConnection<Calls>> => {
  const { handlers: promiseHandlers, transport, ...connectionOptions } = options
  const scope = Effect.runSync(Scope.make())
  const started = await Effect.runPromiseExit(toStderr(Effect.gen(function*() {
    const context = yield* Layer.buildWithScope(transport, scope)
    return yield* Connection.make<Serves, Calls>({
      ...connectionOptions,
      handlers: handlers(options.protocol, promiseHandlers),
      transport: Context.get(context, Transport.Transport)
    }).pipe(Scope.provide(scope))
  })))
  if (Exit.isFailure(started)) {
    await Effect.runPromise(Scope.close(scope, started))
    throw Cause.squash(started.cause)
  }
  const connection = started.value
  let closing: Promise<Connection.ShutdownReport> | undefined
  const close = (reason?: Lifecycle.CloseReason) =>
    closing ??= run(
      connection.stop(reason).pipe(
        Effect.andThen(Scope.close(scope, Exit.void)),
        Effect.andThen(connection.awaitShutdown)
      )
    )
  return {
    client: PromiseClient.make(connection.peer),
    close,
    // `stopNow` cuts a drain that `close` started short; the release is the same.
    closeNow: (reason) => run(connection.stopNow(reason)).then(() => close(reason)),
    closed: run(connection.awaitShutdown)
  }
}
