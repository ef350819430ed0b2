/** @internal */
import * as PgClient from "@effect/sql-pg/PgClient"
import type * as Journal from "@lifeline/kernel/Journal"
import * as JournalError from "@lifeline/kernel/JournalError"
import * as JournalSql from "@lifeline/kernel/JournalSql"
import * as NodeJournal from "@lifeline/node/NodeJournal"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"

const storage = (detail: string) => (cause: SqlError) =>
  new JournalError.JournalError({ reason: "Storage", detail: `${detail}: ${cause.message}`, cause })

/** @internal */
export const make = (): Effect.Effect<Journal.Journal.Service, JournalError.JournalError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const isPg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
    if (!isPg) {
      return yield* new JournalError.JournalError({
        reason: "Invalid",
        detail: "PgJournal needs a PostgreSQL SqlClient (PgClient.layer); use JournalSql.make for other servers"
      })
    }
    const [setting] = yield* sql<{ readonly synchronous_commit: string }>`SHOW synchronous_commit`.pipe(
      Effect.mapError(storage("the journal could not read the server's settings"))
    )
    if (setting?.synchronous_commit === "off") {
      yield* Effect.logWarning(
        "journal: the server's synchronous_commit is off: a commit may be lost if the server crashes, so an " +
          "operation begun just before may be forgotten"
      )
    }
    // This process, so that a claimant on this host can tell whether a claim's holder still runs.
    return yield* JournalSql.make({ identity: yield* NodeJournal.identity, liveness: NodeJournal.liveness })
  })

/** @internal */
export const pool = (options: PgClient.PgPoolConfig): Layer.Layer<SqlClient.SqlClient, JournalError.JournalError> =>
  PgClient.layerFrom(PgClient.make(options).pipe(Effect.mapError(storage("cannot connect to the PostgreSQL server"))))
