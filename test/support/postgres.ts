/**
 * A Postgres database for the tests of one file, in any vitest project (packages/postgres/test, packages/fleet/test,
 * the root test/).
 *
 *   const pg = usePostgres()                       // at the top of the test file, before any describe
 *   describePostgres(pg, "PgJournal", () => {      // = describe.skipIf(pg.skip)(…), the reason in the name
 *     it("…", async () => { const url = pg.url() }) // this file's own fresh database
 *     it("…", async () => { const url = await pg.freshDatabase() }) // one more, empty, on the same server
 *   })
 *
 * Where the server comes from:
 * - `LIFELINE_PG_URL` set (CI, `.ci/run`): that server; every database this file created is dropped afterwards;
 * - else, when this machine has Postgres server binaries: a throwaway server (`scripts/postgres.sh start <tmpdir>`)
 *   started once for the file in `beforeAll` and stopped (data deleted) in `afterAll`, or at exit if the worker dies;
 * - else: `pg.skip` names what is missing, one line goes to stderr, and `describePostgres` skips with that reason in
 *   the suite's name, so the run says plainly that the Postgres tests did not run.
 *
 * Each file gets a database of its own (`CREATE DATABASE lifeline_test_<random>`), so files never collide on a
 * shared server. Databases are created with the server's `psql` (found beside `initdb`, or on the PATH).
 *
 * @since 0.1.0
 */
import { execFile, execFileSync } from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe } from "vitest"

/** One test file's access to Postgres. */
export interface PostgresForTests {
  /** Why the Postgres tests of this file are skipped (what is missing), or `undefined` when they run. */
  readonly skip: string | undefined
  /** The URL of this file's own fresh database. Only inside tests and hooks (after this helper's `beforeAll`). */
  readonly url: () => string
  /** Creates one more empty database on the same server and answers its URL (dropped with the others). */
  readonly freshDatabase: () => Promise<string>
}

const script = new URL("../../scripts/postgres.sh", import.meta.url).pathname

const serverBin = (): string | undefined => {
  try {
    const versions = Fs.readdirSync("/usr/lib/postgresql").sort((a, b) => Number(a) - Number(b))
    for (const version of versions.reverse()) {
      const bin = `/usr/lib/postgresql/${version}/bin`
      if (Fs.existsSync(`${bin}/initdb`)) return bin
    }
  } catch {
    // no Debian-style install: look on the PATH
  }
  for (const dir of (process.env.PATH ?? "").split(Path.delimiter)) {
    if (dir !== "" && Fs.existsSync(Path.join(dir, "pg_ctl")) && Fs.existsSync(Path.join(dir, "initdb"))) return dir
  }
  return undefined
}

const psqlPath = (bin: string | undefined): string | undefined => {
  if (bin !== undefined && Fs.existsSync(`${bin}/psql`)) return `${bin}/psql`
  for (const dir of (process.env.PATH ?? "").split(Path.delimiter)) {
    if (dir !== "" && Fs.existsSync(Path.join(dir, "psql"))) return Path.join(dir, "psql")
  }
  return undefined
}

const run = (file: string, args: ReadonlyArray<string>) =>
  new Promise<string>((resolve, reject) =>
    execFile(file, args, { encoding: "utf8" }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${Path.basename(file)} ${args[0]} failed (${error.code}): ${stderr.trim()}`))
      else resolve(stdout)
    })
  )

/** The URL of database `name` on the server of `url`. */
const withDatabase = (url: string, name: string): string => {
  const parsed = new URL(url)
  parsed.pathname = `/${name}`
  return parsed.toString()
}

/**
 * Registers this file's `beforeAll`/`afterAll` (call it once, at the top level of the test file) and answers how to
 * reach its database. See the top of this module.
 */
export const usePostgres = (): PostgresForTests => {
  const shared = process.env.LIFELINE_PG_URL
  const bin = shared === undefined || shared === "" ? serverBin() : undefined
  const psql = psqlPath(bin)
  const skip = shared !== undefined && shared !== ""
    ? (psql === undefined ? "LIFELINE_PG_URL is set but no psql client is on this machine" : undefined)
    : bin === undefined
    ? "no Postgres: LIFELINE_PG_URL is not set and this machine has no Postgres server (initdb, pg_ctl)"
    : psql === undefined
    ? "no psql client beside the Postgres server binaries"
    : undefined
  if (skip !== undefined) {
    process.stderr.write(`[postgres] SKIPPED the Postgres tests of this file: ${skip}\n`)
  }

  let server: string | undefined = shared !== undefined && shared !== "" ? shared : undefined
  let dataDir: string | undefined
  let fileDatabase: string | undefined
  const created: Array<string> = []
  const stopSync = () => {
    if (dataDir === undefined) return
    try {
      execFileSync("bash", [script, "stop", dataDir], { stdio: "ignore" })
    } catch {
      // best effort at exit
    }
    dataDir = undefined
  }

  const freshDatabase = async (): Promise<string> => {
    if (skip !== undefined) throw new Error(`Postgres tests are skipped: ${skip}`)
    if (server === undefined) throw new Error("usePostgres: the server is not started yet (call inside tests)")
    const name = `lifeline_test_${Crypto.randomBytes(6).toString("hex")}`
    await run(psql!, ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", server, "-c", `CREATE DATABASE "${name}"`])
    created.push(name)
    return withDatabase(server, name)
  }

  beforeAll(async () => {
    if (skip !== undefined) return
    if (server === undefined) {
      dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "lifeline-pg-"))
      process.once("exit", stopSync)
      server = (await run("bash", [script, "start", dataDir])).trim()
    }
    fileDatabase = await freshDatabase()
  }, 60_000)

  afterAll(async () => {
    if (skip !== undefined) return
    if (dataDir !== undefined) {
      await run("bash", [script, "stop", dataDir])
      process.removeListener("exit", stopSync)
      dataDir = undefined
    } else if (server !== undefined) {
      for (const name of created) {
        await run(psql!, ["-X", "-q", "-d", server, "-c", `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`])
      }
    }
  }, 60_000)

  return {
    skip,
    url: () => {
      if (fileDatabase === undefined) {
        throw new Error(skip ?? "usePostgres: no database yet (call url() inside tests or hooks)")
      }
      return fileDatabase
    },
    freshDatabase
  }
}

/** `describe` that skips when there is no Postgres, with the reason in the suite's name. */
export const describePostgres = (pg: PostgresForTests, name: string, body: () => void): void => {
  describe.skipIf(pg.skip !== undefined)(pg.skip === undefined ? name : `${name} (skipped: ${pg.skip})`, body)
}
