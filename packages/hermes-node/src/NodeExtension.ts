/**
 * An extension as the main program of its Node process: `Extension.run` over this process's stdin and stdout
 * (`NodeStdio`; logs on stderr), files through Node's file system, the host's pid watched, SIGTERM/SIGINT/SIGHUP
 * running the shutdown checklist (`NodeSignals.runMain`), and the exit code from the outcome.
 *
 * Import this module by its own path (`@lifeline/hermes-node/NodeExtension`), not through the barrel: an extension
 * that loads only the modules it uses starts within Hermes' 10 s initialize budget even on a busy machine.
 *
 * @since 0.1.0
 */
// Deep imports, for the same reason: the barrels pull in SQLite, HTTP servers and every platform module.
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as Extension from "@lifeline/hermes/Extension"
import * as HostMonitor from "@lifeline/hermes/HostMonitor"
import * as NodeSignals from "@lifeline/node/NodeSignals"
import * as NodeStdio from "@lifeline/node/NodeStdio"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * The `HostMonitor` over `NodeStdio.awaitHostExit`: the host's pid from `initialize`, checked every 250 ms. A host
 * that was SIGKILLed while a grandchild holds our stdin open never ends that stdin, and the extension must not
 * outlive it. {@link runMain} provides it; a program that runs `Extension.run` itself provides it too.
 *
 * @example
 * ```ts
 * import { Extension } from "@lifeline/hermes"
 * import { NodeExtension } from "@lifeline/hermes-node"
 * import { NodeStdio } from "@lifeline/node"
 * import { NodeFileSystem, NodePath } from "@effect/platform-node"
 * import { Effect, Layer } from "effect"
 *
 * declare const extension: Extension.Extension<unknown, never, never>
 *
 * export const outcome = Extension.run(extension).pipe(
 *   Effect.provide(
 *     Layer.mergeAll(NodeStdio.layer(), NodeFileSystem.layer, NodePath.layer, NodeExtension.layerHostMonitor)
 *   )
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerHostMonitor: Layer.Layer<HostMonitor.HostMonitor> = HostMonitor.layer({
  awaitExit: (pid) => NodeStdio.awaitHostExit(pid)
})

/**
 * Runs `extension` on this process's stdin and stdout until the host shuts it down or goes away (its stdin ends, or
 * the process named by `hostPid` exits), then exits. The exit code (`NodeSignals.ExitCode`):
 *
 * - 0 when it ended by itself: the host shut it down (`Shutdown`; a cleanup that failed was reported in the answer),
 *   or went away (`EndOfInput`, `HostExited`);
 * - 1 when the connection failed (`Failed`: a fatal framing error such as a `Content-Length` over the limit, a read
 *   error): the host is still there and did not ask it to stop, so whoever watches the process must see a failure;
 *   also when it could not start: an invalid `LIFELINE_SHUTDOWN_POLICY` or `LIFELINE_DRAIN_TIMEOUT` (logged, naming
 *   the variable);
 * - 143, 130, 129 after SIGTERM, SIGINT, SIGHUP: the checklist ran (a drain included) while the connection to the host
 *   was still open, then the run was interrupted; 2 or 3 when a second signal forced the stop.
 *
 * @example
 * ```ts
 * import * as Editor from "@lifeline/hermes/Editor"
 * import * as Extension from "@lifeline/hermes/Extension"
 * import * as NodeExtension from "@lifeline/hermes-node/NodeExtension"
 * import * as Effect from "effect/Effect"
 *
 * NodeExtension.runMain(Extension.make({
 *   name: "hello",
 *   version: "1.0.0",
 *   commands: {
 *     "hello.sign": {
 *       title: "Sign the message",
 *       run: () => Effect.asVoid(Editor.patchMessage([{ path: "MSH-3", value: "HELLO" }]))
 *     }
 *   }
 * }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const runMain = <S, Res>(extension: Extension.Extension<S, Res, never>): void =>
  NodeSignals.runMain(
    Extension.run(extension).pipe(
      Effect.tap((outcome) =>
        Effect.logInfo(`${extension.options.name} ended: ${outcome._tag}`).pipe(
          Effect.annotateLogs({
            reason: String(outcome.reason),
            failures: outcome.failures.join("; "),
            cancelled: outcome.cancelled,
            refusedCommands: outcome.refusedCommands
          })
        )
      ),
      Effect.flatMap((outcome) =>
        outcome._tag === "Failed"
          ? Effect.fail(`${extension.options.name}: the connection to the host failed (exit code 1)`)
          : Effect.void
      ),
      Effect.provide(Layer.mergeAll(NodeStdio.layer(), NodeFileSystem.layer, NodePath.layer, layerHostMonitor))
    )
  )
