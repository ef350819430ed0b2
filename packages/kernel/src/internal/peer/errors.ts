/**
 * The peer's own errors, made without a JavaScript stack trace, as Effect's `SchemaError` is. They are made by the
 * peer's reader, timer or teardown, never at a caller's line, so a stack would only point into the peer (a caller's
 * fiber adds its own span to the Cause); and they are made in bulk: one `RequestTimeout` per call when calls time out
 * together, where capturing a stack cost ~4 µs of the ~5 µs each took (10,000 at once: ~40 ms).
 *
 * @internal
 */
import * as PeerError from "../../PeerError.js"

interface ErrorWithStackTraceLimit {
  stackTraceLimit?: number | undefined
}

const errorConstructor = Error as ErrorWithStackTraceLimit

/** False under frozen intrinsics (SES, hardened JavaScript): errors are then made as usual. */
const limitIsWritable = ((): boolean => {
  const descriptor = Object.getOwnPropertyDescriptor(Error, "stackTraceLimit")
  if (descriptor === undefined) return Object.isExtensible(Error)
  return Object.hasOwn(descriptor, "writable") ? descriptor.writable === true : descriptor.set !== undefined
})()

/** @internal */
export const withoutStackTrace = <A>(construct: () => A): A => {
  if (!limitIsWritable) return construct()
  const limit = errorConstructor.stackTraceLimit
  errorConstructor.stackTraceLimit = 0
  try {
    return construct()
  } finally {
    errorConstructor.stackTraceLimit = limit
  }
}

/** @internal */
export const requestTimeout = (method: string, id: string | number, timeoutMillis: number): PeerError.RequestTimeout =>
  withoutStackTrace(() => new PeerError.RequestTimeout({ method, id, timeoutMillis }))

/** @internal */
export const peerClosed = (
  reason: PeerError.PeerClosed["reason"],
  detail?: string | undefined
): PeerError.PeerClosed =>
  withoutStackTrace(() => new PeerError.PeerClosed(detail === undefined ? { reason } : { reason, detail }))

/** @internal */
export const shutdownError = (reason: PeerError.ShutdownError["reason"], phase: string): PeerError.ShutdownError =>
  withoutStackTrace(() => new PeerError.ShutdownError({ reason, phase }))
