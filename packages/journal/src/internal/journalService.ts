/**
 * The journal's service key, apart from `Journal.ts` so that the journal's bodies (claims, tracking, recovery, process
 * records) read the service without importing the public module that imports them. `Journal.Journal` extends it.
 *
 * @internal
 */
import * as Context from "effect/Context"
import type * as Journal from "../Journal.js"

/** @internal */
export const JournalService = Context.Service<Journal.Journal, Journal.Journal.Service>()("@lifeline/journal/Journal")
