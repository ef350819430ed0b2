/**
 * The child's stderr as lines: each one (cut at `maxStderrLineLength`) kept in a tail of the last `stderrTailLines`,
 * for `PeerExited.stderrTail`, and logged: at `stderrLogLevel` when it is set, else the first `stderrInfoLines` at Info
 * (a child that fails to start says why where a user looks) and the rest at Debug. A logfmt line (what a Lifeline or
 * Effect child logs) becomes an entry of its own: its message, its fields as `child.*` annotations, at its own level
 * when that is higher.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as LogLevel from "effect/LogLevel"
import * as Stream from "effect/Stream"
import type { Settings } from "./childProcess.js"
import { LineSplitter, Tail } from "./lines.js"
import * as LogfmtLine from "./logfmtLine.js"

/** @internal */
interface Stderr {
  /** The last lines read. */
  readonly tail: Tail<string>
  /** Reads `stderr` to its end, line by line; what is left at the end is a last line. */
  readonly read: (stderr: Stream.Stream<Uint8Array>) => Effect.Effect<void>
}

/** @internal */
export const makeStderr = (
  settings: Pick<Settings, "stderrTailLines" | "maxStderrLineLength" | "stderrLogLevel" | "stderrInfoLines">
): Stderr => {
  const tail = new Tail<string>(settings.stderrTailLines)
  const splitter = new LineSplitter(settings.maxStderrLineLength)
  let lines = 0
  // `All` is no level an entry can have in Effect 4 (`Effect.logWithLevel` takes a `Severity`): the lowest one.
  const levelOf = (): LogLevel.Severity | undefined => {
    const set = settings.stderrLogLevel
    if (set === undefined) return lines <= settings.stderrInfoLines ? "Info" : "Debug"
    return set === "None" ? undefined : set === "All" ? "Trace" : set
  }
  const logLine = (line: string): Effect.Effect<void> => {
    tail.push(line)
    lines++
    const level = levelOf()
    if (level === undefined) return Effect.void
    const entry = LogfmtLine.parse(line)
    if (entry === undefined) return Effect.logWithLevel(level)(line)
    const annotations: Record<string, string> = { "child.level": entry.level }
    for (const [key, value] of entry.fields) annotations[`child.${key}`] = value
    return Effect.logWithLevel(LogLevel.isGreaterThan(entry.level, level) ? entry.level : level)(entry.message).pipe(
      Effect.annotateLogs(annotations)
    )
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
