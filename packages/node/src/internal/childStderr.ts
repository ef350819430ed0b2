/**
 * The child's stderr as lines: each one (cut at `maxStderrLineLength`) kept in a tail of the last `stderrTailLines`,
 * for `PeerExited.stderrTail`, and logged at `stderrLogLevel`.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as LogLevel from "effect/LogLevel"
import * as Stream from "effect/Stream"
import type { Settings } from "./childProcess.js"
import { LineSplitter, Tail } from "./lines.js"

/** @internal */
export interface Stderr {
  /** The last lines read. */
  readonly tail: Tail<string>
  /** Reads `stderr` to its end, line by line; what is left at the end is a last line. */
  readonly read: (stderr: Stream.Stream<Uint8Array>) => Effect.Effect<void>
}

/** @internal */
export const makeStderr = (
  settings: Pick<Settings, "stderrTailLines" | "maxStderrLineLength" | "stderrLogLevel">
): Stderr => {
  const tail = new Tail<string>(settings.stderrTailLines)
  const splitter = new LineSplitter(settings.maxStderrLineLength)
  // `All` is no level an entry can have in Effect 4 (`Effect.logWithLevel` takes a `Severity`): the lowest one.
  const level: LogLevel.Severity | undefined = settings.stderrLogLevel === "None"
    ? undefined
    : settings.stderrLogLevel === "All"
    ? "Trace"
    : settings.stderrLogLevel
  const logLine = (line: string): Effect.Effect<void> => {
    tail.push(line)
    return level === undefined ? Effect.void : Effect.logWithLevel(level)(line)
  }
  return {
    tail,
    read: (stderr) =>
      stderr.pipe(
        Stream.runForEach((chunk) => Effect.forEach(splitter.push(chunk), logLine, { discard: true })),
        Effect.andThen(Effect.suspend(() => Effect.forEach(splitter.end(), logLine, { discard: true }))),
        Effect.annotateLogs("stream", "stderr")
      )
  }
}
