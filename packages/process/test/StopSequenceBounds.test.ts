/**
 * The stop sequence's defaults come from the kernel's one table of default times (`Bounds.ts`), each derived where it
 * depends on another (moved here from the kernel's Bounds.test.ts with `StopSequence`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Bounds, ShutdownPolicy } from "@lifeline/kernel"
import { StopSequence } from "@lifeline/process"
import { Duration } from "effect"

const ms = Duration.toMillis

describe("StopSequence's bounds", () => {
  it("derives the stop's close timeout from the policy's drain, the flush and the slack", () => {
    assert.strictEqual(ms(Bounds.closeTimeout(Duration.seconds(10))), 10_000 + 1000 + 1000)
    const drained = StopSequence.bounds({ policy: ShutdownPolicy.drain("10 seconds") })
    assert.strictEqual(ms(drained.closeTimeout), ms(Bounds.closeTimeout(Duration.seconds(10))))
    const failFast = StopSequence.bounds()
    assert.strictEqual(ms(failFast.closeTimeout), ms(Bounds.closeTimeout(Duration.zero)))
  })

  it("the stop sequence's defaults are the table's", () => {
    const bounds = StopSequence.bounds()
    assert.strictEqual(ms(bounds.shutdownTimeout), ms(Bounds.shutdownTimeout))
    assert.strictEqual(ms(bounds.exitGrace), ms(Bounds.exitGrace))
    assert.strictEqual(ms(bounds.killGrace), ms(Bounds.killGrace))
    assert.strictEqual(ms(bounds.verifyTimeout), ms(Bounds.verifyTimeout))
  })
})
