import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Processes from "../src/internal/processes.js"

/** This process's group, from /proc (Linux, where the suite runs). */
const ownGroup = (): number => {
  const stat = Fs.readFileSync(`/proc/${process.pid}/stat`, "latin1")
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2])
}

// `kill` reads the outcome of kill(2) without Node's throwing path where it can: the codes must be the ones Node's
// `process.kill` would have thrown.
describe("Processes.kill", () => {
  it("reports a process group that does not exist as ESRCH, as process.kill throws it", () => {
    // Linux hands out pids below 2^22: no such group.
    const target = -4_194_305
    let thrown: string | undefined
    try {
      process.kill(target, 0)
    } catch (error) {
      thrown = (error as NodeJS.ErrnoException).code
    }
    assert.strictEqual(thrown, "ESRCH")
    assert.strictEqual(Processes.kill(target, 0), "ESRCH")
    assert.strictEqual(Processes.kill(target, "SIGTERM"), "ESRCH")
    assert.strictEqual(Processes.probeGroup(-target), "Gone")
  })

  it("reports a signal sent as undefined, and a live group as Alive", () => {
    assert.isUndefined(Processes.kill(process.pid, 0))
    assert.isUndefined(Processes.kill(-ownGroup(), 0))
    assert.strictEqual(Processes.probeGroup(ownGroup()), "Alive")
  })
})
