/**
 * Deprecated: the module is `JournaledOperation` now, and `track` is `JournaledOperation.run` (an effect run as a
 * journaled operation; `JournalTrack.track` said neither).
 *
 * @since 0.1.0
 * @deprecated Use `JournaledOperation`.
 */
import * as JournaledOperation from "./JournaledOperation.js"

/**
 * @since 0.1.0
 * @category models
 * @deprecated Use `JournaledOperation.RunOptions`.
 */
export type TrackOptions<A, I> = JournaledOperation.RunOptions<A, I>

/**
 * @since 0.1.0
 * @category combinators
 * @deprecated Use `JournaledOperation.run`.
 */
export const track: typeof JournaledOperation.run = JournaledOperation.run
