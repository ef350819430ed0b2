/**
 * The bodies of a connection's handshake: `initiate`, the peer an initiating handshake sees, and how an error of a
 * handshake becomes a `Lifecycle.Failure`.
 *
 * @internal
 */
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Bounds from "../Bounds.js"
import type * as Connection from "../Connection.js"
import * as Lifecycle from "../Lifecycle.js"
import type * as Method from "../Method.js"
import type * as Peer from "../Peer.js"
import * as PeerError from "../PeerError.js"
import * as Transport from "../Transport.js"

// Effect 4 durations may be negative; a negative timeout is a zero one, as it was with Effect 3.
/** @internal */
export const nonNegative = (input: Duration.Input): Duration.Duration =>
  Duration.max(Duration.fromInputUnsafe(input), Duration.zero)

const defaultHandshakeTimeout = Bounds.handshakeTimeout

/** @internal */
export const initiate = (first: any, params?: any, options?: any): Connection.Initiate<any, any, any, any> => {
  if (typeof first === "function") {
    return { _tag: "Initiate", run: first, timeout: nonNegative(params?.timeout ?? defaultHandshakeTimeout) }
  }
  const method = first as Method.AnyRequest
  const then = options?.then as
    | ((result: unknown, peer: Peer.Peer<any, any>) => Effect.Effect<unknown, unknown>)
    | undefined
  return {
    _tag: "Initiate",
    method,
    run: (peer: Peer.Peer<any, any>) => {
      const call = peer.call(method, params, options?.callOptions)
      return (then === undefined ? call : Effect.flatMap(call, (result) => then(result, peer))) as Effect.Effect<
        unknown,
        any
      >
    },
    timeout: nonNegative(options?.timeout ?? defaultHandshakeTimeout)
  }
}

/**
 * The peer as an initiating handshake sees it: while the lifecycle is `Starting` or `Initializing`, a call with no
 * timeout of its own (from its options or its method) waits longer than the handshake, so the handshake's timeout is
 * what ends it, with `HandshakeTimeout`. Once the handshake is over, calls are the peer's own again.
 *
 * @internal
 */
export const handshakePeer = <Serves extends Method.Any, Calls extends Method.Any>(
  peer: Peer.Peer<Serves, Calls>,
  lifecycle: Lifecycle.Lifecycle,
  timeout: Duration.Duration
): Peer.Peer<Serves, Calls> => {
  // Longer than the handshake, so that its timeout always fires first, even on a TestClock that wakes both at once.
  const bound = Duration.sum(timeout, Duration.seconds(1))
  const during = () => {
    const state = lifecycle.unsafeState()._tag
    return state === "Starting" || state === "Initializing"
  }
  return {
    ...peer,
    call: (method, params, callOptions) =>
      Effect.suspend(() =>
        peer.call(
          method,
          params,
          callOptions?.timeout !== undefined || method.timeout !== undefined || !during()
            ? callOptions
            : { ...callOptions, timeout: bound }
        )
      ),
    callUntyped: (method, params, callOptions) =>
      Effect.suspend(() =>
        peer.callUntyped(
          method,
          params,
          callOptions?.timeout !== undefined || !during() ? callOptions : { ...callOptions, timeout: bound }
        )
      )
  }
}

/** @internal */
export const asFailure = (error: unknown): Lifecycle.Failure =>
  error instanceof RpcError.RpcError
    ? error
    : RpcError.make(
      -32000,
      error instanceof Error && error.message !== "" ? error.message : "The handshake failed",
      error
    )

/** @internal */
export const isFailure = (error: unknown): error is Lifecycle.Failure =>
  error instanceof RpcError.RpcError ||
  error instanceof Lifecycle.HandshakeTimeout ||
  error instanceof Transport.TransportError ||
  error instanceof PeerError.RequestTimeout ||
  error instanceof PeerError.PeerClosed ||
  error instanceof PeerError.ShutdownError ||
  error instanceof PeerError.PeerExited
