/**
 * How an extension learns that its host process is gone when nobody tells it: `initialize` carries the host's pid,
 * and a host that dies while something else holds the extension's stdin open (a grandchild that inherited the pipe)
 * never ends that stdin. The SDK races `awaitExit(hostPid)` against its work and runs the shutdown checklist when it
 * wins. Without this service nothing is watched; the Node wiring provides one over `NodeStdio.awaitHostExit`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * The host monitor. `Extension.run` uses it when the context has one and `initialize` names a host (`hostPid` > 0;
 * 0 means unknown, and nothing is watched).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { HostMonitor } from "@lifeline/hermes"
 *
 * const program = Effect.gen(function*() {
 *   const monitor = yield* HostMonitor.HostMonitor
 *   yield* monitor.awaitExit(4242)
 *   yield* Effect.logWarning("the host is gone")
 * })
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class HostMonitor extends Context.Service<HostMonitor, HostMonitor.Service>()("@lifeline/hermes/HostMonitor") {}

/**
 * @since 0.1.0
 */
export declare namespace HostMonitor {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /** Completes once process `pid` has exited; never fails. Interrupted when the extension ends first. */
    readonly awaitExit: (pid: number) => Effect.Effect<void>
  }
}

/**
 * A monitor that never reports an exit: the same as providing none.
 *
 * @example
 * ```ts
 * import { HostMonitor } from "@lifeline/hermes"
 *
 * const WatchNothing = HostMonitor.layer(HostMonitor.never)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const never: HostMonitor.Service = { awaitExit: () => Effect.never }

/**
 * Provides `service` as the host monitor; the Node wiring passes `NodeStdio.awaitHostExit`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { HostMonitor } from "@lifeline/hermes"
 *
 * // In a Node program: HostMonitor.layer({ awaitExit: (pid) => NodeStdio.awaitHostExit(pid) })
 * const HostGoneAfterThreeSeconds = HostMonitor.layer({ awaitExit: () => Effect.sleep("3 seconds") })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (service: HostMonitor.Service): Layer.Layer<HostMonitor> => Layer.succeed(HostMonitor, service)
