/**
 * `TestTransport` under its old path, kept so that existing imports compile.
 *
 * @deprecated since 0.2.0: import `TestTransport` from `@lifeline/kernel/testing`.
 * @since 0.1.0
 */
export * from "./testing/TestTransport.js"
