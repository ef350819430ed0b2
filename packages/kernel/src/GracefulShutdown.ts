/**
 * The graceful shutdown of a whole program: every live connection (or child process) registered here stops under its
 * own policy before the main fiber is interrupted. `NodeSignals.runMain` provides it and calls `stop` at the first
 * signal, `force` at the second.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"

/**
 * Something that stops under its own policy: a connection, or a child process and its connection.
 *
 * @since 0.1.0
 * @category models
 */
export interface Entry {
  /** For the log. */
  readonly name: string
  /** Stops under the policy and completes once stopped (bounded by the policy's own deadlines). Idempotent. */
  readonly stop: Effect.Effect<unknown>
  /** Stops fail-fast, cutting a stop in progress short, and completes once stopped. Idempotent. */
  readonly stopNow: Effect.Effect<unknown>
}

/**
 * The registry of what must stop before the program ends.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { GracefulShutdown } from "@lifeline/kernel"
 *
 * const program = Effect.gen(function*() {
 *   const shutdown = yield* GracefulShutdown.GracefulShutdown
 *   yield* shutdown.register({ name: "worker", stop: Effect.void, stopNow: Effect.void })
 *   yield* shutdown.stop // every registered entry has stopped
 * }).pipe(Effect.scoped, Effect.provide(GracefulShutdown.layer))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export class GracefulShutdown
  extends Context.Service<GracefulShutdown, GracefulShutdown.Service>()("@lifeline/kernel/GracefulShutdown")
{}

/**
 * @since 0.1.0
 */
export declare namespace GracefulShutdown {
  /**
   * @since 0.1.0
   * @category models
   */
  export interface Service {
    /**
     * Adds `entry` for the life of the current Scope. Once the program is stopping, an entry is stopped as soon as it
     * registers (fail-fast once forced), and `stop` waits for it too.
     */
    readonly register: (entry: Entry) => Effect.Effect<void, never, Scope.Scope>
    /**
     * Asks every entry to stop under its policy, all at once, and completes when every one has stopped (each is
     * bounded by its own deadline). Idempotent: a second caller waits for the same stop.
     */
    readonly stop: Effect.Effect<void>
    /** Stops every entry fail-fast now (a second signal), and completes when every one has stopped. */
    readonly force: Effect.Effect<void>
    /** `Running`, `Stopping` once `stop` was called, `Forced` once `force` was. */
    readonly phase: Effect.Effect<"Running" | "Stopping" | "Forced">
    /** How many entries are registered. */
    readonly size: Effect.Effect<number>
  }
}

/**
 * A registry with nothing in it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<GracefulShutdown.Service> = Effect.sync(() => {
  const entries = new Set<Entry>()
  // Every stop started so far, by entry: `stop` waits for all of them, those of late entries included.
  const running = new Map<Entry, Deferred.Deferred<void>>()
  let phase: "Running" | "Stopping" | "Forced" = "Running"

  // Each entry stops in a fiber of its own, detached: it must outlive whoever asked (a signal handler, a finalizer).
  const start = (entry: Entry, how: "stop" | "stopNow"): Effect.Effect<void> =>
    Effect.suspend(() => {
      // A forced stop replaces the graceful one in the map: it completes when the entry has stopped, sooner.
      const done = Deferred.makeUnsafe<void>()
      running.set(entry, done)
      return Effect.asVoid(Effect.forkDetach(
        entry[how].pipe(
          Effect.catchCause((cause) => Effect.logWarning(`${entry.name}: the ${how} failed`, cause)),
          Effect.ensuring(Effect.sync(() => Deferred.doneUnsafe(done, Exit.void)))
        )
      ))
    })

  const awaitAll: Effect.Effect<void> = Effect.suspend(() => {
    const pending = Array.from(running.values())
    return Effect.andThen(
      Effect.forEach(pending, Deferred.await, { discard: true }),
      // Entries that registered meanwhile were started too: wait for them as well.
      Effect.suspend(() => running.size > pending.length ? awaitAll : Effect.void)
    )
  })

  return {
    register: (entry) =>
      Effect.acquireRelease(
        Effect.suspend(() => {
          entries.add(entry)
          return phase === "Running" ? Effect.void : start(entry, phase === "Forced" ? "stopNow" : "stop")
        }),
        () => Effect.sync(() => entries.delete(entry))
      ),
    stop: Effect.suspend(() => {
      if (phase !== "Running") return awaitAll
      phase = "Stopping"
      return Effect.andThen(
        Effect.forEach(Array.from(entries), (entry) => start(entry, "stop"), { discard: true }),
        awaitAll
      )
    }),
    force: Effect.suspend(() => {
      if (phase === "Forced") return awaitAll
      phase = "Forced"
      // Also the entries whose graceful stop still runs but whose Scope has already closed (interrupting the main
      // fiber closes the Scopes entries registered in, unregistering them): forcing must reach them too.
      const targets = new Set(entries)
      for (const [entry, done] of running) if (!Deferred.isDoneUnsafe(done)) targets.add(entry)
      return Effect.andThen(
        Effect.forEach(Array.from(targets), (entry) => start(entry, "stopNow"), { discard: true }),
        awaitAll
      )
    }),
    phase: Effect.sync(() => phase),
    size: Effect.sync(() => entries.size)
  }
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<GracefulShutdown> = Layer.effect(GracefulShutdown, make)

/**
 * Registers `entry` with the {@link GracefulShutdown} service for the life of the current Scope, when the service is
 * present (a program run by `NodeSignals.runMain`); does nothing otherwise.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { GracefulShutdown } from "@lifeline/kernel"
 *
 * const program = GracefulShutdown.register({ name: "cache", stop: Effect.void, stopNow: Effect.void }).pipe(
 *   Effect.scoped
 * )
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const register = (entry: Entry): Effect.Effect<void, never, Scope.Scope> =>
  Effect.flatMap(
    Effect.serviceOption(GracefulShutdown),
    Option.match({ onNone: () => Effect.void, onSome: (service) => service.register(entry) })
  )
