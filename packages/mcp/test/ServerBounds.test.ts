import { afterEach, assert, beforeEach, describe, it, vi } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Server from "../src/internal/server.js"

/** A server whose exit and end of output the test decides. */
const fake = () => {
  let exit!: () => void
  let drain!: () => void
  const server: Server.Server = {
    pid: 0,
    write: () => true,
    endInput: () => {},
    exited: new Promise<void>((resolve) => exit = resolve),
    drained: new Promise<void>((resolve) => drain = resolve),
    stop: Effect.void,
    gone: () => false
  }
  return { server, exit, drain }
}

describe("the bounds of a server's end", () => {
  // `exitedWithin` is Promise code on the platform's timers (the transport's `close()`): Vitest's fake timers are its
  // TestClock.
  describe("exitedWithin, exitedAndDrained", () => {
    beforeEach(() => {
      vi.useFakeTimers()
    })
    afterEach(() => {
      vi.useRealTimers()
    })
    const settled = (promise: Promise<void>) => {
      let done = false
      void promise.then(() => {
        done = true
      })
      return () => done
    }

    it("resolves once the timeout has passed without an exit, not a moment before", async () => {
      const done = settled(Server.exitedWithin(new Promise(() => {}), "2 seconds"))
      await vi.advanceTimersByTimeAsync(1999)
      assert.isFalse(done())
      await vi.advanceTimersByTimeAsync(1)
      assert.isTrue(done())
    })

    it("resolves as soon as the server exits, and leaves no timer behind", async () => {
      let exit!: () => void
      const done = settled(Server.exitedWithin(new Promise<void>((resolve) => exit = resolve), "2 seconds"))
      await vi.advanceTimersByTimeAsync(500)
      assert.isFalse(done())
      exit()
      await vi.advanceTimersByTimeAsync(0)
      assert.isTrue(done())
      assert.strictEqual(vi.getTimerCount(), 0)
    })

    it("an infinite timeout waits for the exit only (a timer beyond its range would fire at once)", async () => {
      let exit!: () => void
      const done = settled(Server.exitedWithin(new Promise<void>((resolve) => exit = resolve), Duration.infinity))
      await vi.advanceTimersByTimeAsync(3_000_000_000)
      assert.isFalse(done())
      exit()
      await vi.advanceTimersByTimeAsync(0)
      assert.isTrue(done())
    })

    it("exitedAndDrained: after the exit, at most the grace for the output to end", async () => {
      const { exit, server } = fake()
      const done = settled(Server.exitedAndDrained(server, "100 millis"))
      await vi.advanceTimersByTimeAsync(1000)
      assert.isFalse(done(), "no exit yet: it waits for it without a bound")
      exit()
      await vi.advanceTimersByTimeAsync(99)
      assert.isFalse(done())
      await vi.advanceTimersByTimeAsync(1)
      assert.isTrue(done())
    })

    it("exitedAndDrained: the end of the output ends the wait at once", async () => {
      const { drain, exit, server } = fake()
      const done = settled(Server.exitedAndDrained(server, "100 millis"))
      exit()
      drain()
      await vi.advanceTimersByTimeAsync(0)
      assert.isTrue(done())
      assert.strictEqual(vi.getTimerCount(), 0)
    })
  })
})
