/**
 * The peer's own errors, made without a JavaScript stack trace, as Effect's `SchemaError` is: they are made by the
 * peer's reader, timer or teardown, so a stack would only point into the peer, and in bulk (10,000 timeouts at once),
 * where capturing the stack was most of their cost.
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

const withoutStackTrace = <A>(construct: () => A): A => {
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
