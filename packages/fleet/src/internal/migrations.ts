/**
 * The fleet's SQL migrations: the tables of Effect's cluster message and runner storage, under a prefix, created under
 * a Postgres advisory lock keyed by the prefix's hash.
 *
 * @internal
 */
import * as SqlMessageStorage from "effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "effect/cluster/SqlRunnerStorage"
import * as Effect from "effect/Effect"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"

const lockKey = 0x4c464c54

/** A stable 31-bit hash of the prefix, the second key of the advisory lock: fleets with other prefixes do not wait. */
export const prefixHash = (prefix: string): number => {
  let hash = 0
  for (let i = 0; i < prefix.length; i++) hash = (Math.imul(hash, 31) + prefix.charCodeAt(i)) | 0
  return hash & 0x7fffffff
}

export const run = (options?: { readonly prefix?: string | undefined }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const prefix = options?.prefix ?? "cluster"
    const migrate = Effect.gen(function*() {
      yield* sql.onDialectOrElse({
        pg: () => sql`SELECT pg_advisory_xact_lock(${lockKey}, ${prefixHash(prefix)})`,
        orElse: () => Effect.void
      })
      yield* Migrator.make({})({ loader: SqlMessageStorage.migrations({ prefix }), table: `${prefix}_migrations` })
      yield* Migrator.make({})({
        loader: SqlRunnerStorage.migrations({ prefix }),
        table: `${prefix}_runner_migrations`
      })
    })
    yield* sql.withTransaction(migrate)
  }).pipe(Effect.withSpan("FleetMigrations.run"))
