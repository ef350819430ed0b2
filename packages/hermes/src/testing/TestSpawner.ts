/**
 * A `Spawner` for tests: each "process" is an Effect run in a fiber over a `TestTransport` pair, so a host can be
 * tested against real extensions built with the SDK, or against misbehaving ones written by hand, under `TestClock`.
 * SIGTERM interrupts the fiber (its finalizers run, as a signal handler would); SIGKILL ends it at once.
 *
 * @since 0.1.0
 */
import * as Transport from "@lifeline/kernel/Transport"
import type * as Process from "@lifeline/process/Process"
import * as TestTransport from "@lifeline/testing/TestTransport"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Spawner from "../Spawner.js"

/**
 * What a spawned test process runs, with its end of the transport as the `Transport` service (its stdin and stdout).
 * Succeeding is exit code 0, failing exit code 1.
 *
 * @since 0.1.0
 * @category models
 */
export type Behaviour = Effect.Effect<unknown, unknown, Transport.Transport>

/**
 * A spawner that also tells what it started.
 *
 * @since 0.1.0
 * @category models
 */
export interface TestSpawner extends Spawner.Spawner.Service {
  /** Every spec spawned, in order. */
  readonly spawned: Effect.Effect<ReadonlyArray<Spawner.Spec>>
}

/**
 * A test spawner. `route` picks the behaviour of each spawn from its spec and its index (0 for the first), so a test
 * can crash the first two starts and let the third one run, say.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { TestSpawner } from "@lifeline/hermes/testing"
 *
 * const silent = TestSpawner.make(() => Effect.never) // never answers initialize
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (route: (spec: Spawner.Spec, index: number) => Behaviour): Effect.Effect<TestSpawner> =>
  Effect.sync(() => {
    const spawned: Array<Spawner.Spec> = []
    const spawn = (spec: Spawner.Spec) =>
      Effect.gen(function*() {
        const index = spawned.length
        spawned.push(spec)
        const pair = yield* TestTransport.makePair()
        const exit = yield* Deferred.make<Process.ExitStatus>()
        let signal: Process.Signal | undefined
        const fiber = yield* route(spec, index).pipe(
          Effect.provideService(Transport.Transport, pair.right),
          Effect.onExit((result) =>
            Effect.andThen(
              // A process that exits closes its stdout.
              pair.right.end,
              Deferred.succeed(
                exit,
                signal !== undefined
                  ? { exitCode: null, signal }
                  : { exitCode: Exit.isSuccess(result) ? 0 : 1, signal: null }
              )
            )
          ),
          Effect.ignore,
          Effect.forkDetach
        )
        // Like a signal: the sender does not wait for the process to handle it.
        const interruptFork = Effect.sync(() => fiber.interruptUnsafe())
        const kill = (sent: Process.Signal): Effect.Effect<void> =>
          Effect.suspend(() => {
            if (signal === "SIGKILL") return Effect.void
            signal = sent
            if (sent === "SIGTERM") return interruptFork
            // Nothing of the process runs any more: its pipes close and its exit is known at once.
            return Effect.all([
              pair.leftToRight.close,
              pair.rightToLeft.close,
              Deferred.succeed(exit, { exitCode: null, signal: "SIGKILL" }),
              interruptFork
            ], { discard: true })
          })
        yield* Effect.addFinalizer(() =>
          Effect.flatMap(Deferred.isDone(exit), (done) => done ? Effect.void : kill("SIGKILL"))
        )
        const process: Spawner.Process = {
          pid: 10_000 + index,
          transport: pair.left,
          exit: Deferred.await(exit),
          kill,
          stderrTail: Effect.succeed([])
        }
        return process
      })
    return { spawn, spawned: Effect.sync(() => spawned.slice()) }
  })

/**
 * The test spawner as the `Spawner` service.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { TestSpawner } from "@lifeline/hermes/testing"
 *
 * const SpawnerTest = TestSpawner.layer(() => Effect.never)
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (route: (spec: Spawner.Spec, index: number) => Behaviour): Layer.Layer<Spawner.Spawner> =>
  Layer.effect(Spawner.Spawner, make(route))
