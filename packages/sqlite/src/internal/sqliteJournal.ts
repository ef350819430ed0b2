/** @internal */
import type * as Journal from "@lifeline/journal/Journal"
import * as JournalError from "@lifeline/journal/JournalError"
import * as JournalSql from "@lifeline/journal/JournalSql"
import * as NodeJournal from "@lifeline/node/NodeJournal"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as NodeSqlite from "./nodeSqlite.js"

/** @internal */
export type Synchronous = "FULL" | "NORMAL"

/** @internal */
export const make = (
  options?: {
    readonly synchronous?: Synchronous | undefined
    readonly operationTimeout?: Duration.Input | undefined
    readonly maxPayloadBytes?: number | undefined
  }
): Effect.Effect<Journal.Journal.Service, JournalError.JournalError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // FULL syncs the WAL on every commit: an entry `begin` returned survives a power loss or an OS crash, not only
    // a crash or a kill of the process (which NORMAL already survives, since the WAL is in the OS's page cache).
    const synchronous = options?.synchronous ?? "FULL"
    yield* sql.onDialectOrElse({
      sqlite: () =>
        Effect.all([
          sql.unsafe(`PRAGMA synchronous = ${synchronous}`),
          // Another process on the same file (a tool, a second host) makes a write wait this long, not fail at once.
          sql.unsafe("PRAGMA busy_timeout = 5000")
        ], { discard: true }),
      orElse: () => Effect.void
    }).pipe(
      Effect.mapError((cause: SqlError) =>
        new JournalError.JournalError({
          reason: "Storage",
          detail: `the journal could not be configured: ${cause.message}`,
          cause
        })
      )
    )
    // This process, so that a claimant on this host can tell whether a claim's holder still runs.
    return yield* JournalSql.make({
      identity: yield* NodeJournal.identity,
      liveness: NodeJournal.liveness,
      operationTimeout: options?.operationTimeout,
      maxPayloadBytes: options?.maxPayloadBytes
    })
  })

/** @internal */
export const makeClient = (
  filename: string
): Effect.Effect<SqlClient.SqlClient, JournalError.JournalError, Scope.Scope> =>
  Effect.gen(function*() {
    if (filename !== ":memory:") {
      yield* Effect.tryPromise({
        try: () => Fs.mkdir(Path.dirname(Path.resolve(filename)), { recursive: true }),
        catch: (cause) =>
          new JournalError.JournalError({
            reason: "Storage",
            detail: `cannot create the directory of ${filename}`,
            cause
          })
      })
    }
    return yield* NodeSqlite.make({ filename }).pipe(
      Effect.mapError((cause) =>
        new JournalError.JournalError({ reason: "Storage", detail: `cannot open ${filename}`, cause })
      )
    )
  })

/** @internal */
export const SqlClientTag = SqlClient.SqlClient
