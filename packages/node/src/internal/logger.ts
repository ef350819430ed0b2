/**
 * Logging for processes whose stdout is the protocol: a logfmt logger that writes to stderr, and the swap of the
 * logger that would write to stdout (Effect's default logger) for it.
 *
 * @internal
 */
import * as UntrustedText from "@lifeline/kernel/UntrustedText"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import type * as Scope from "effect/Scope"
import { type Guarded, unsafeGuard } from "./guardedStream.js"

/**
 * The line with every control character, line or paragraph separator and bidirectional override written as a
 * `\uXXXX` escape (`UntrustedText.escape`), so one entry stays one line and a terminal shows what was logged instead
 * of obeying it (a logged value that came from the other side, its stderr, a method name, a reason, cannot move the
 * cursor, rewrite the terminal's title or clipboard, or start a line that looks like another entry).
 *
 * @internal
 */
const escapeLine: (line: string) => string = UntrustedText.escape

/**
 * One logfmt line per entry, written straight to `stderr` (not through `console`, which user code may replace, and
 * not through `Logger.LogToStderr`, which only sends the built-in loggers to `console.error`). Once stderr is broken
 * (the host is gone), lines are dropped: logging must never be what kills the process.
 *
 * @internal
 */
export const makeStderrLogger = (stderr: NodeJS.WritableStream): Logger.Logger<unknown, void> => {
  let guarded: Guarded | undefined
  return Logger.make((options) => {
    // Guarded at the first line, not when the module is loaded: importing it must not touch process.stderr.
    guarded ??= unsafeGuard(stderr)
    guarded.write(escapeLine(Logger.formatLogFmt.log(options)) + "\n")
  })
}

/**
 * @internal
 */
export const stderrLogger: Logger.Logger<unknown, void> = makeStderrLogger(process.stderr)

/**
 * Replaces the logger that writes to stdout with `logger`, keeping any other logger (tracing, a file, ...).
 *
 * @internal
 */
const useLogger =
  (logger: Logger.Logger<unknown, void>) =>
  (loggers: ReadonlySet<Logger.Logger<unknown, any>>): ReadonlySet<Logger.Logger<unknown, any>> => {
    const next = new Set(loggers)
    next.delete(Logger.defaultLogger)
    next.add(logger)
    return next
  }

/**
 * Logs of `effect` (and of the fibers it forks) go to `logger` instead of stdout. `LogToStderr` also sends a
 * built-in console logger that user code adds later (`Logger.consolePretty`) to stderr.
 *
 * @internal
 */
export const withStderrLogger =
  (logger: Logger.Logger<unknown, void>) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    effect.pipe(
      Effect.updateService(Logger.CurrentLoggers, useLogger(logger)),
      Effect.provideService(Logger.LogToStderr, true)
    )

/**
 * {@link withStderrLogger} for the rest of the current Scope, in the calling fiber and the fibers it forks afterwards.
 *
 * @internal
 */
export const useStderrLoggerScoped = (logger: Logger.Logger<unknown, void>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.andThen(
    Effect.updateServiceScoped(Logger.CurrentLoggers, useLogger(logger)),
    Effect.updateServiceScoped(Logger.LogToStderr, () => true)
  )
