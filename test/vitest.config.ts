import { defineProject, mergeConfig } from "vitest/config"
import shared from "../vitest.shared.js"

// Real processes and signals: one file at a time, with room for the bounds the tests check.
export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "integration",
      include: ["**/*.test.ts"],
      pool: "forks",
      poolOptions: { forks: { singleFork: true } },
      testTimeout: 30_000,
      hookTimeout: 30_000
    }
  })
)
