/** @internal */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Journal from "@lifeline/journal/Journal"
import type * as JournalClaim from "@lifeline/journal/JournalClaim"
import * as JournalError from "@lifeline/journal/JournalError"
import * as JournalSql from "@lifeline/journal/JournalSql"
import * as NodeJournal from "@lifeline/node/NodeJournal"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"

/** @internal */
export interface Options {
  readonly identity?: JournalClaim.Identity | undefined
  readonly operationTimeout?: Duration.Input | undefined
  readonly maxPayloadBytes?: number | undefined
}

const storage = (detail: string) => (cause: SqlError) =>
  new JournalError.JournalError({ reason: "Storage", detail: `${detail}: ${JournalSql.describeError(cause)}`, cause })

const timeoutOf = (options: Options | undefined) =>
  Duration.fromInputUnsafe(options?.operationTimeout ?? Journal.defaultOperationTimeout)

// A start-up step (reading the settings, migrating), bounded like the journal's own steps: it runs in a fiber of its
// own, and on timeout the caller does not wait for the driver's interruption, which waits on a frozen server too.
const bounded =
  (timeout: Duration.Duration, what: string) =>
  <A>(effect: Effect.Effect<A, JournalError.JournalError>): Effect.Effect<A, JournalError.JournalError> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(
        Effect.forkDetach(effect, { startImmediately: true }),
        (fiber) =>
          restore(
            Fiber.join(fiber).pipe(Effect.timeoutOrElse({
              duration: timeout,
              orElse: () =>
                Effect.fail(
                  new JournalError.JournalError({
                    reason: "Storage",
                    detail: `${what}: the server did not answer within ${
                      Duration.toMillis(timeout)
                    } ms (operationTimeout)`
                  })
                )
            }))
          ).pipe(
            Effect.onExit((exit) =>
              Exit.isSuccess(exit) ? Effect.void : Effect.asVoid(Effect.forkDetach(Fiber.interrupt(fiber)))
            )
          )
      )
    )

/** @internal */
export const make = (
  options?: Options
): Effect.Effect<Journal.Journal.Service, JournalError.JournalError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const isPg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
    if (!isPg) {
      return yield* new JournalError.JournalError({
        reason: "Invalid",
        detail: "PgJournal needs a PostgreSQL SqlClient (PgClient.layer); use JournalSql.make for other servers"
      })
    }
    const timeout = timeoutOf(options)
    const [setting] = yield* sql<{ readonly synchronous_commit: string }>`SHOW synchronous_commit`.pipe(
      Effect.mapError(storage("the journal could not read the server's settings")),
      bounded(timeout, "the journal could not read the server's settings")
    )
    if (setting?.synchronous_commit === "off") {
      yield* Effect.logWarning(
        "journal: the server's synchronous_commit is off: a commit may be lost if the server crashes, so an " +
          "operation begun just before may be forgotten"
      )
    }
    // This process, so that a claimant on this host can tell whether a claim's holder still runs; the caller's
    // fields (a container's own host name) replace what Node reports.
    const identity = { ...(yield* NodeJournal.identity), ...definedFields(options?.identity) }
    yield* bounded(timeout, "the journal's migrations did not finish")(
      Effect.provideService(JournalSql.migrate, SqlClient.SqlClient, sql)
    )
    return yield* Journal.make(JournalSql.makeBackend(sql), {
      identity,
      liveness: NodeJournal.liveness,
      operationTimeout: timeout,
      maxPayloadBytes: options?.maxPayloadBytes
    })
  })

const definedFields = (identity: JournalClaim.Identity | undefined): JournalClaim.Identity =>
  Object.fromEntries(Object.entries(identity ?? {}).filter(([, value]) => value !== undefined))

/** @internal */
export const pool = (
  options: PgClient.PgPoolConfig,
  journal?: Options
): Layer.Layer<SqlClient.SqlClient, JournalError.JournalError> => {
  const timeout = Duration.toMillis(timeoutOf(journal))
  return PgClient.layerFrom(
    PgClient.make({
      // The server ends a statement that runs longer than a journal step may take (a lock wait, a slow disk), so
      // that a connection is not left busy after the journal gave up on it.
      ...options,
      connectTimeout: options.connectTimeout ?? timeout,
      startupParameters: { statement_timeout: `${Math.ceil(timeout)}`, ...options.startupParameters }
    }).pipe(Effect.mapError(storage("cannot connect to the PostgreSQL server")))
  )
}

/** @internal */
export const config: Config.Config<Redacted.Redacted<string>> = Config.Redacted("LIFELINE_POSTGRES_URL").pipe(
  Config.orElse(() => Config.Redacted("DATABASE_URL")),
  // Without this, the error names only the last variable tried (DATABASE_URL), not the documented one.
  Config.orElse((error) =>
    Config.fail(
      new ConfigProvider.SourceError({
        message: "the PostgreSQL journal needs a connection URL: set LIFELINE_POSTGRES_URL (or DATABASE_URL), " +
          "e.g. postgres://user@host:5432/database",
        cause: error
      })
    )
  )
)
