/**
 * Logging for processes whose stdout is the protocol: a logfmt logger that writes to stderr, and the swap of the
 * loggers that would write to stdout (Effect's default logger and the pretty logger `runMain` installs) for it.
 *
 * @internal
 */
import * as HashSet from "effect/HashSet"
import * as Logger from "effect/Logger"
import { type Guarded, unsafeGuard } from "./streams.js"

/**
 * One logfmt line per entry, written straight to `stderr` (not through `console`, which user code may replace). Once
 * stderr is broken (the host is gone), lines are dropped: logging must never be what kills the process.
 *
 * @internal
 */
export const makeStderrLogger = (stderr: NodeJS.WritableStream): Logger.Logger<unknown, void> => {
  let guarded: Guarded | undefined
  return Logger.make((options) => {
    // Guarded at the first line, not when the module is loaded: importing it must not touch process.stderr.
    guarded ??= unsafeGuard(stderr)
    guarded.write(Logger.logfmtLogger.log(options) + "\n")
  })
}

/**
 * @internal
 */
export const stderrLogger: Logger.Logger<unknown, void> = makeStderrLogger(process.stderr)

/**
 * Replaces the loggers that write to stdout with `logger`, keeping any other logger (tracing, a file, ...).
 *
 * @internal
 */
export const useLogger =
  (logger: Logger.Logger<unknown, void>) =>
  (loggers: HashSet.HashSet<Logger.Logger<unknown, any>>): HashSet.HashSet<Logger.Logger<unknown, any>> =>
    loggers.pipe(
      HashSet.remove(Logger.defaultLogger),
      HashSet.remove(Logger.prettyLoggerDefault),
      HashSet.add(logger)
    )
