/**
 * The one table of default times (`Bounds.ts`): each default that depends on another is derived from it, and the
 * modules whose options default to these read them from the table (no second literal).
 */
import { assert, describe, it } from "@effect/vitest"
import { Bounds, ShutdownPolicy } from "@lifeline/kernel"
import { StopSequence } from "@lifeline/process"
import { Duration } from "effect"

const ms = Duration.toMillis

describe("Bounds", () => {
  it("derives the stop's close timeout from the policy's drain, the flush and the slack", () => {
    assert.strictEqual(ms(Bounds.closeTimeout(Duration.seconds(10))), 10_000 + 1000 + 1000)
    const drained = StopSequence.bounds({ policy: ShutdownPolicy.drain("10 seconds") })
    assert.strictEqual(ms(drained.closeTimeout), ms(Bounds.closeTimeout(Duration.seconds(10))))
    const failFast = StopSequence.bounds()
    assert.strictEqual(ms(failFast.closeTimeout), ms(Bounds.closeTimeout(Duration.zero)))
  })

  it("the stop sequence's and the policy's defaults are the table's", () => {
    const bounds = StopSequence.bounds()
    assert.strictEqual(ms(bounds.shutdownTimeout), ms(Bounds.shutdownTimeout))
    assert.strictEqual(ms(bounds.exitGrace), ms(Bounds.exitGrace))
    assert.strictEqual(ms(bounds.killGrace), ms(Bounds.killGrace))
    assert.strictEqual(ms(bounds.verifyTimeout), ms(Bounds.verifyTimeout))
    assert.strictEqual(ShutdownPolicy.defaultDrainTimeout, Bounds.drainTimeout)
  })

  it("derives the extension's shutdown budget from the host's shutdown answer", () => {
    assert.strictEqual(ms(Bounds.extensionShutdownBudget), ms(Bounds.shutdownTimeout) - ms(Bounds.answerMargin))
    assert.strictEqual(ms(Bounds.extensionShutdownBudget), 4000)
  })

  it("derives the fleet's claim wait from the session's drain", () => {
    assert.strictEqual(
      ms(Bounds.claimWait(Bounds.fleetDrainTimeout)),
      ms(Bounds.fleetDrainTimeout) + ms(Bounds.recordRetryWindow) + ms(Bounds.claimWaitSlack)
    )
  })
})
