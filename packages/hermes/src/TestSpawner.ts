/**
 * `TestSpawner` under its old path, kept so that existing imports compile: the test kit lives in
 * `@lifeline/hermes/testing` (as Effect ships `effect/testing`), which is where new code imports it from.
 *
 * @deprecated since 0.2.0: import `TestSpawner` from `@lifeline/hermes/testing`.
 * @since 0.1.0
 */
export * from "./testing/TestSpawner.js"
