/**
 * What the integration tests ask the operating system: is a process still there, and how long until it is not.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"

/**
 * Whether `pid` is a live process. A zombie (exited, not yet reaped: this container's init does not reap orphans)
 * counts as gone.
 */
export const isAlive = (pid: number): boolean => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
    return state !== "Z" && state !== "X"
  } catch {
    if (process.platform === "linux") return false
    try {
      process.kill(pid, 0)
      return true
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === "EPERM"
    }
  }
}

/** Polls every 5 ms (real time) until `pid` is gone; answers how long that took, or fails after `timeoutMs`. */
export const awaitGone = (pid: number, timeoutMs: number) =>
  Effect.gen(function*() {
    const start = performance.now()
    while (isAlive(pid)) {
      if (performance.now() - start > timeoutMs) {
        return yield* Effect.dieMessage(`process ${pid} still alive after ${timeoutMs} ms`)
      }
      yield* Effect.sleep("5 millis")
    }
    return performance.now() - start
  })

/** Polls every 5 ms (real time) until `condition` holds, or fails after `timeoutMs`. */
export const eventually = (condition: () => boolean, what: string, timeoutMs = 10_000) =>
  Effect.gen(function*() {
    const start = performance.now()
    while (!condition()) {
      if (performance.now() - start > timeoutMs) return yield* Effect.dieMessage(`never happened: ${what}`)
      yield* Effect.sleep("5 millis")
    }
  })
