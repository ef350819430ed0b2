import { defineProject, mergeConfig } from "vitest/config"
import shared from "../vitest.shared.js"

// Real processes and signals: one file at a time, with room for the bounds the tests check. Vitest 4 removed
// `poolOptions.forks.singleFork`: `fileParallelism: false` runs the files one after the other in one fork at a time.
export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "integration",
      include: ["**/*.test.ts"],
      pool: "forks",
      fileParallelism: false,
      testTimeout: 30_000,
      hookTimeout: 30_000
    }
  })
)
