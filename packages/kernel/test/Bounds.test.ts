/**
 * The one table of default times (`Bounds.ts`): each default that depends on another is derived from it, and the
 * modules whose options default to these read them from the table (no second literal). The stop sequence's defaults
 * are checked against it in packages/process/test/StopSequenceBounds.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Bounds, ShutdownPolicy } from "@lifeline/kernel"
import { Duration } from "effect"

const ms = Duration.toMillis

describe("Bounds", () => {
  it("the policy's default drain is the table's", () => {
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
