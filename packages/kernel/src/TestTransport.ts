/**
 * `TestTransport` under its old path, kept so that existing imports compile: the test kit lives in
 * `@lifeline/kernel/testing` (as Effect ships `effect/testing`), which is where new code imports it from.
 *
 * @deprecated since 0.2.0: import `TestTransport` from `@lifeline/kernel/testing`.
 * @since 0.1.0
 */
export * from "./testing/TestTransport.js"
