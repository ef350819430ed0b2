/**
 * What stops a server when its host dies without closing it, both chosen by the transport's options: the host's
 * signals passed on to the server's group (`forwardHostSignals`: a Ctrl-C of a host that has no handler), and the
 * host's guardian process (`guardian`: any death, SIGKILL included, with nothing of the host left to run).
 *
 * @internal
 */
import * as NodeGuardian from "@lifeline/node/NodeGuardian"
import * as Duration from "effect/Duration"
import * as HostSignals from "./hostSignals.js"

/**
 * @internal
 */
export interface Options {
  readonly forwardHostSignals: boolean
  readonly guardian: boolean
  /** When the server was spawned, epoch ms: the guardian tells it from a later process that got its pid. */
  readonly startedAt: number
  /** The guardian's grace between SIGTERM and SIGKILL: the transport's `killGrace`. */
  readonly killGrace: Duration.Input
}

/**
 * Registers a running server (the leader of its group); the returned function, called once its group is gone,
 * unregisters it.
 *
 * @internal
 */
export const register = (pid: number, endInput: () => void, options: Options): () => void => {
  const unwatch = options.guardian
    ? NodeGuardian.watch(pid, {
      startedAt: options.startedAt,
      graceMillis: Duration.toMillis(options.killGrace)
    })
    : undefined
  const unregister = options.forwardHostSignals ? HostSignals.register(pid, endInput) : undefined
  return () => {
    unregister?.()
    unwatch?.()
  }
}
