import { assert, describe, it } from "@effect/vitest"
import { Duration, Option } from "effect"
import { ShardingConfig } from "effect/cluster"
import * as migrations from "../src/internal/migrations.js"
import * as runner from "../src/internal/runner.js"

describe("FleetRunner", () => {
  it("sets every sharding field: the options over Effect's defaults, the address from host and port", () => {
    const config = runner.shardingConfig({ port: 4100, sharding: { shardLockExpiration: "4 seconds" } })
    assert.deepStrictEqual(
      Option.map(config.runnerAddress, (a) => `${a.host}:${a.port}`),
      Option.some("127.0.0.1:4100")
    )
    assert.isTrue(Option.isNone(config.runnerListenAddress))
    assert.strictEqual(config.shardLockExpiration, "4 seconds")
    assert.deepStrictEqual(config.shardsPerGroup, ShardingConfig.defaults.shardsPerGroup)
    assert.isTrue(Duration.isDuration(config.shardLockRefreshInterval))
    const listening = runner.shardingConfig({ host: "10.0.0.7", listenHost: "0.0.0.0", port: 4101 })
    assert.deepStrictEqual(
      Option.map(listening.runnerListenAddress, (a) => `${a.host}:${a.port}`),
      Option.some("0.0.0.0:4101")
    )
  })

  it("a client has no runner address", () => {
    assert.isTrue(Option.isNone(runner.shardingConfig({ port: undefined as unknown as number }).runnerAddress))
  })
})

describe("FleetMigrations", () => {
  it("locks per prefix: a stable 31-bit key", () => {
    const a = migrations.prefixHash("cluster")
    assert.strictEqual(a, migrations.prefixHash("cluster"))
    assert.notStrictEqual(a, migrations.prefixHash("cluster2"))
    for (const prefix of ["", "cluster", "x".repeat(300)]) {
      const hash = migrations.prefixHash(prefix)
      assert.isTrue(Number.isInteger(hash) && hash >= 0 && hash <= 0x7fffffff)
    }
  })
})
