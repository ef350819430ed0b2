/**
 * A journal backend kept in one small JSON file: the kernel's memory backend, with what is still unfinished (and the
 * claims) written to the file after each change. For a process's own records of the children it started, where one
 * process writes the file and another reads it only once the writer is dead; not a database: no locking between
 * writers.
 *
 * @internal
 */
import * as JournalBackend from "@lifeline/journal/JournalBackend"
import type * as JournalClaim from "@lifeline/journal/JournalClaim"
import { JournalError } from "@lifeline/journal/JournalError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Fs from "node:fs"

/** What the file holds. @internal */
export interface Content {
  readonly rows: ReadonlyArray<JournalBackend.Row>
  readonly claims: ReadonlyArray<JournalClaim.Claim>
}

const storage = (detail: string, cause: unknown) =>
  new JournalError({ reason: "Storage", detail: `${detail}: ${cause instanceof Error ? cause.message : cause}`, cause })

/**
 * What `path` holds; empty when there is no such file. A file that cannot be parsed is `Corrupt`.
 *
 * @internal
 */
export const read = (path: string): Effect.Effect<Content, JournalError> =>
  Effect.suspend(() => {
    let text: string
    try {
      text = Fs.readFileSync(path, "utf8")
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return Effect.succeed({ rows: [], claims: [] })
      return Effect.fail(storage(`cannot read ${path}`, error))
    }
    try {
      const parsed = JSON.parse(text) as Partial<Content>
      return Effect.succeed({
        rows: Array.isArray(parsed.rows) ? parsed.rows : [],
        claims: Array.isArray(parsed.claims) ? parsed.claims : []
      })
    } catch (error) {
      return Effect.fail(new JournalError({ reason: "Corrupt", detail: `${path} is not JSON`, cause: error }))
    }
  })

const finished: ReadonlyArray<"Completed" | "Failed"> = ["Completed", "Failed"]

/**
 * A backend over `path`, and `close`, which writes what is pending now and nothing after.
 *
 * @internal
 */
export interface File {
  readonly backend: JournalBackend.Backend
  /** Writes what is pending, then writes nothing more: a late change must not bring back a file its owner removed. */
  readonly close: Effect.Effect<void, JournalError>
}

/**
 * A backend whose unfinished rows and claims are loaded from `path` and written back to it (a temporary file renamed
 * over it, so a reader never sees half a file) after every change. Finished rows are dropped at once: nobody reads
 * them back, and a long-running process would otherwise keep one per child it ever started.
 *
 * With `deferred`, a change is written in a fiber of its own after the current one yields, and the changes made
 * until then are written together, off the event loop (libuv's thread pool), one write at a time: neither a spawn nor
 * a close waits for the file. The cost: a crash in that window loses
 * the changes (a child started just before it is not swept at the next start); a failed write is logged.
 *
 * @internal
 */
export const make = (path: string, options: { readonly deferred: boolean }): Effect.Effect<File, JournalError> =>
  Effect.gen(function*() {
    const inner = yield* JournalBackend.makeMemory
    const content = yield* read(path)
    const owners = new Set<string>()
    for (const row of content.rows) yield* inner.insert(row)
    for (const claim of content.claims) {
      owners.add(claim.owner)
      yield* inner.insertClaim(claim)
    }
    let closed = false
    /** What the file should hold now: the unfinished rows and the claims. */
    const snapshot = Effect.gen(function*() {
      yield* inner.remove(finished, Number.MAX_SAFE_INTEGER)
      const rows = yield* inner.list(["InFlight", "NeedsRecovery"])
      const claims: Array<JournalClaim.Claim> = []
      for (const owner of owners) {
        const claim = yield* inner.getClaim(owner)
        if (Option.isSome(claim)) claims.push(claim.value)
      }
      return JSON.stringify({ rows, claims })
    })
    const temporary = `${path}.${process.pid}.tmp`
    const writeNow = (text: string) =>
      Effect.try({
        try: () => {
          Fs.writeFileSync(temporary, text)
          Fs.renameSync(temporary, path)
        },
        catch: (error) => storage(`cannot write ${path}`, error)
      })
    const flush: Effect.Effect<void, JournalError> = Effect.suspend(() =>
      closed ? Effect.void : Effect.flatMap(snapshot, writeNow)
    )

    // Deferred writes go through libuv's thread pool, one at a time, by one fiber at a time: a synchronous write and
    // rename block the event loop for about as long as the whole close of a child (measured in `pnpm bench spawner`).
    // Each write holds the whole state, so the changes made while one runs are written by the next, and a write that
    // failed is made good by the next change. `close` waits for the write under way, then writes last.
    let dirty = false
    let running = false
    let writing: Promise<void> | undefined
    const writeLoop: Effect.Effect<void> = Effect.suspend(() => {
      if (!dirty || closed) {
        running = false
        return Effect.void
      }
      dirty = false
      return Effect.flatMap(snapshot, (text) =>
        Effect.tryPromise({
          try: () => {
            writing = Fs.promises.writeFile(temporary, text).then(() => Fs.promises.rename(temporary, path))
            return writing
          },
          catch: (error) => storage(`cannot write ${path}`, error)
        })).pipe(
          Effect.catch((error) => Effect.logWarning("could not write the record of started children", error)),
          Effect.andThen(writeLoop)
        )
    })
    const save: Effect.Effect<void, JournalError> = !options.deferred ? flush : Effect.suspend(() => {
      dirty = true
      if (running) return Effect.void
      running = true
      // After the current fiber yields: the changes of this moment are written together.
      return Effect.asVoid(Effect.forkDetach(Effect.andThen(Effect.yieldNow, writeLoop)))
    })
    const saving = <A>(effect: Effect.Effect<A, JournalError>) => Effect.tap(effect, () => save)
    const backend: JournalBackend.Backend = {
      ...inner,
      insert: (row) => saving(inner.insert(row)),
      update: (key, where, patch) => saving(inner.update(key, where, patch)),
      remove: (statuses, before) => saving(inner.remove(statuses, before)),
      insertClaim: (claim) => {
        owners.add(claim.owner)
        return saving(inner.insertClaim(claim))
      },
      replaceClaim: (claim, where) => {
        owners.add(claim.owner)
        return saving(inner.replaceClaim(claim, where))
      },
      deleteClaim: (owner, holder) => saving(inner.deleteClaim(owner, holder))
    }
    // Closed first, so that no background write starts; then the write under way ends (its rename must not land
    // after the last write, or after the file is removed); then what is pending now is written, and nothing after.
    const close = Effect.suspend(() => {
      closed = true
      return Effect.andThen(
        Effect.promise(() => writing?.catch(() => undefined) ?? Promise.resolve()),
        Effect.flatMap(snapshot, writeNow)
      )
    })
    return { backend, close }
  })
