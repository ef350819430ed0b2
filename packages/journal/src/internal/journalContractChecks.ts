/**
 * The assertions the journal contract's cases share (`journalContract.ts` and its two parts, claims and limits): apart
 * from the cases so that no part imports the module that imports it.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { JournalError, OwnerInUse } from "../JournalError.js"

/** @internal */
export class ContractViolation extends Error {
  override readonly name = "ContractViolation"
}

const show = (value: unknown) => JSON.stringify(value, (_, item) => typeof item === "bigint" ? `${item}n` : item)

/** @internal */
export const check = (condition: boolean, what: string, ...actual: ReadonlyArray<unknown>): Effect.Effect<void> =>
  condition
    ? Effect.void
    : Effect.die(new ContractViolation(actual.length > 0 ? `${what} (got ${show(actual[0])})` : what))

// Waits, in real time and at most 5 s, for a storage round trip that a fiber woken by the TestClock started: the
// Clock decides when it runs, the server how long it takes.
/** @internal */
export const eventually = (condition: Effect.Effect<boolean, unknown>, what: string): Effect.Effect<void, unknown> =>
  Effect.gen(function*() {
    for (let tries = 0; tries < 1000; tries++) {
      if (yield* condition) return
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
    }
    return yield* Effect.die(new ContractViolation(`${what}: still false after 5 s`))
  })

/** @internal */
export const same = (actual: unknown, expected: unknown, what: string): Effect.Effect<void> =>
  show(actual) === show(expected)
    ? Effect.void
    : Effect.die(new ContractViolation(`${what}: expected ${show(expected)}, got ${show(actual)}`))

/** Fails with the journal's error of `reason`, or dies: the step had to be refused. */
/** @internal */
export const refused = <A>(
  effect: Effect.Effect<A, JournalError | OwnerInUse, Scope.Scope>,
  expected: string,
  what: string
) =>
  Effect.flatMap(Effect.exit(effect), (exit) => {
    if (Exit.isSuccess(exit)) return Effect.die(new ContractViolation(`${what}: succeeded, expected ${expected}`))
    const error = Option.getOrUndefined(Exit.findErrorOption(exit))
    const got = error instanceof JournalError ? error.reason : error instanceof OwnerInUse ? "OwnerInUse" : undefined
    return same(got, expected, what)
  })
