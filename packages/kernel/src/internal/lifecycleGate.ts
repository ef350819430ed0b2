/**
 * The gates of a lifecycle: what an inbound request and an outbound call are told in each state.
 *
 * @internal
 */
import * as RpcError from "@lifeline/jsonrpc/RpcError"
import type * as Lifecycle from "../Lifecycle.js"
import { ShutdownError } from "../PeerError.js"

/** @internal */
export const inboundGate = (
  state: Lifecycle.State,
  method: string,
  isHandshake: boolean
): RpcError.RpcError | undefined => {
  switch (state._tag) {
    case "Starting":
    case "Initializing":
      return isHandshake ? undefined : RpcError.RpcError.serverNotInitialized(method)
    case "Ready":
      return isHandshake
        ? RpcError.RpcError.invalidRequest(`${method}: the handshake has already completed`)
        : undefined
    case "Closing":
    case "Closed":
    case "Failed":
      return RpcError.RpcError.shuttingDown(method)
  }
}

/** @internal */
export const outboundGate = (state: Lifecycle.State, closedBy?: Lifecycle.CloseReason): ShutdownError | undefined => {
  switch (state._tag) {
    case "Starting":
    case "Initializing":
    case "Ready":
      return undefined
    case "Closing":
      return refusal(state.reason, state._tag)
    case "Closed":
      return refusal(closedBy ?? "Stop", state._tag)
    case "Failed":
      return new ShutdownError({ reason: "Failed", phase: state._tag, detail: state.error.message })
  }
}

const refusal = (reason: Lifecycle.CloseReason, phase: Lifecycle.Tag): ShutdownError =>
  reason === "Interrupted" || reason === "Stop"
    ? new ShutdownError({ reason, phase })
    : new ShutdownError({ reason: "Stop", phase, detail: reason })
