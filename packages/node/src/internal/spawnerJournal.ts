/**
 * The record of what a running process started, under an owner unique to it, and the sweep, at start, of what owners
 * that died left running. By default a small file per process under the user's state directory; any `Journal` (memory,
 * SQLite, Postgres) when one is given. Both use the kernel's process records (`ProcessRecord`) and `NodeReaper`.
 *
 * @internal
 */
import * as Journal from "@lifeline/journal/Journal"
import * as JournalClaim from "@lifeline/journal/JournalClaim"
import type { JournalError } from "@lifeline/journal/JournalError"
import * as ProcessRecord from "@lifeline/journal/ProcessRecord"
import type * as Process from "@lifeline/process/Process"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Latch from "effect/Latch"
import type * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as journalFile from "./journalFile.js"
import { identity, liveness } from "./journalIdentity.js"
import { isAlive } from "./processes.js"
import { reapProcess } from "./reaper.js"
import { onSystemClock } from "./supervisor.js"

/**
 * One recorded child: its end, or that it is no longer ours to sweep (unref'ed).
 *
 * @internal
 */
export interface Entry {
  readonly exited: (status: Process.ExitStatus | undefined) => Effect.Effect<void>
  /**
   * `exited` in the background: counted at once (before the write's fiber starts), so that closing the recorder waits
   * for it.
   */
  readonly exitedLater: (status: Process.ExitStatus | undefined) => Effect.Effect<void>
}

/**
 * @internal
 */
export interface Recorder {
  readonly owner: string
  readonly record: (pid: number, command: ReadonlyArray<string>) => Effect.Effect<Entry, JournalError>
}

/**
 * @internal
 */
export interface Options {
  /** Records go here instead of the default file. */
  readonly journal?: Journal.Journal.Service | undefined
  /** Where the default files are. */
  readonly directory?: string | undefined
  /** How long the sweep gives a dead owner's child after SIGTERM, and again after SIGKILL. */
  readonly reapGrace: Duration.Input
}

/** How long closing the recorder waits for the ends of children still being written (on the system clock). */
const pendingWritesBound = "1 second"

/**
 * How long the end of a child waits before it is written, with the ends of the children that closed meanwhile: one
 * write of the file for a batch, and none in the turn of a close (measured: a write there costs about a third of the
 * close of a child that exits at once). A crash in that window leaves the record of a child that is gone, which the
 * next start's sweep finds `Gone` (its safeguards against pid reuse hold). The release writes what waits at once.
 */
const endBatchMillis = 50

/** Owners of this module start with this, so that a sweep of a shared journal touches no one else's entries. */
const ownerPrefix = "spawner/"

/**
 * `$XDG_STATE_HOME/lifeline/children`, or `~/.local/state/lifeline/children`.
 *
 * @internal
 */
export const defaultDirectory = (): string =>
  Path.join(
    process.env.XDG_STATE_HOME !== undefined && process.env.XDG_STATE_HOME !== ""
      ? process.env.XDG_STATE_HOME
      : Path.join(Os.homedir(), ".local", "state"),
    "lifeline",
    "children"
  )

const sweepOwner = (journal: Journal.Journal.Service, owner: string, reapGrace: Duration.Input) =>
  ProcessRecord.reapOrphans(reapProcess({ grace: reapGrace }), { owner }).pipe(
    Effect.scoped,
    Effect.provideService(Journal.Journal, journal),
    Effect.tap((report) =>
      // The counts as annotations: a second message argument would be a second `message=` in a logfmt line.
      Effect.logInfo(`swept the children of ${owner}, which is no longer running`).pipe(
        Effect.annotateLogs({
          killed: report.reaped.filter((reaped) => reaped.outcome === "Killed").length,
          errors: report.errors.length
        })
      )
    )
  )

/** Sweeps one dead owner's file, renamed first so that two processes starting at once do not both sweep it. */
const sweepFile = (file: string, directory: string, reapGrace: Duration.Input) =>
  Effect.gen(function*() {
    const content = yield* journalFile.read(file)
    if (content.rows.length === 0 && content.claims.length === 0) return Fs.rmSync(file, { force: true })
    // A file whose owner let go of its claim (a clean close whose last end records came too late to be written) still
    // names the owner in its rows and its process in its name (`<pid>-<startedAt>.json`): it is swept like the others.
    const named = /^(\d+)-(\d+)\.json/.exec(Path.basename(file))
    const claim = content.claims[0] ?? (named === null || content.rows.length === 0 ? undefined : {
      owner: content.rows[0].owner,
      pid: Number(named[1]),
      startedAt: Number(named[2]) === 0 ? undefined : Number(named[2]),
      host: Os.hostname()
    })
    if (claim === undefined) return
    // A `.sweep` file belongs to the sweeper named in it until that process is gone.
    if (claim.host !== undefined && claim.host !== Os.hostname()) return
    const sweeper = /\.(\d+)\.sweep$/.exec(file)
    if (sweeper !== null ? isAlive(Number(sweeper[1])) : (yield* liveness(claim)) !== "Dead") return
    const mine = Path.join(directory, `${Path.basename(file).replace(/\.\d+\.sweep$/, "")}.${process.pid}.sweep`)
    try {
      Fs.renameSync(file, mine)
    } catch {
      return // another process took it first
    }
    const { backend } = yield* journalFile.make(mine, { deferred: false })
    const journal = yield* Journal.make(backend, { identity: yield* identity, liveness })
    yield* sweepOwner(journal, claim.owner, reapGrace)
    Fs.rmSync(mine, { force: true })
  }).pipe(Effect.catchCause((cause) => Effect.logWarning(`could not sweep ${file}`, cause)))

/** Sweeps every owner recorded in a shared journal whose process is no longer running. */
const sweepJournal = (journal: Journal.Journal.Service, own: string, reapGrace: Duration.Input) =>
  Effect.gen(function*() {
    const entries = yield* journal.unfinished()
    const owners = new Set(
      entries.filter((entry) => entry.kind === ProcessRecord.kind && entry.owner.startsWith(ownerPrefix))
        .map((entry) => entry.owner)
    )
    owners.delete(own)
    for (const owner of owners) {
      // A live owner holds its claim: `OwnerInUse`, and its children are left alone.
      yield* sweepOwner(journal, owner, reapGrace).pipe(Effect.catchTag("OwnerInUse", () => Effect.void))
    }
  }).pipe(Effect.catchCause((cause) => Effect.logWarning("could not sweep the journal", cause)))

const makeFileJournal = (directory: string, reapGrace: Duration.Input, self: JournalClaim.Identity) =>
  Effect.gen(function*() {
    yield* Effect.try({
      try: () => Fs.mkdirSync(directory, { recursive: true, mode: 0o700 }),
      catch: (error) => error
    })
    const own = Path.join(directory, `${self.pid}-${self.startedAt ?? 0}.json`)
    for (const name of Fs.readdirSync(directory)) {
      const file = Path.join(directory, name)
      if (file !== own && (name.endsWith(".json") || name.endsWith(".sweep"))) {
        yield* sweepFile(file, directory, reapGrace)
      }
    }
    const file = yield* journalFile.make(own, { deferred: true })
    const journal = yield* Journal.make(file.backend, { identity: self, liveness })
    // Registered before the claim, so it runs after the claim is released: what is pending is written, nothing is
    // written after, and a file with nothing left in it goes.
    yield* Effect.addFinalizer(() =>
      Effect.map(Effect.exit(Effect.andThen(file.close, journal.unfinished())), (unfinished) => {
        if (unfinished._tag === "Success" && unfinished.value.length === 0) Fs.rmSync(own, { force: true })
      })
    )
    return journal
  })

/**
 * The recorder of this process: its owner claimed for the Scope (so another process's sweep leaves its children
 * alone), and, first, the sweep of the owners that died. A default file that cannot be created is logged, and
 * nothing is recorded.
 *
 * @internal
 */
export const make = (options: Options): Effect.Effect<Recorder | undefined, never, Scope.Scope> =>
  Effect.gen(function*() {
    const self = yield* identity
    const owner = `${ownerPrefix}${Os.hostname()}/${self.pid}/${self.startedAt ?? 0}`
    let journal: Journal.Journal.Service
    if (options.journal === undefined) {
      journal = yield* makeFileJournal(options.directory ?? defaultDirectory(), options.reapGrace, self)
    } else {
      journal = options.journal
      yield* sweepJournal(journal, owner, options.reapGrace)
    }
    yield* journal.claim(owner)
    // The end of a child is written in the background after its stop (a close does not wait for the journal), so a
    // program that ends right after it would close the journal first and leave the record `InFlight` (swept as `Gone`
    // at the next start, but the file lingers until then). Registered after the claim, this runs first: the writes
    // under way finish, within a bound, before the claim is released and the file closed.
    const idle = Latch.makeUnsafe(true)
    let writing = 0
    // The ends waiting for the batch's timer (a timer of the platform: a `TestClock` would hold them forever).
    let batch: Array<() => void> = []
    let batchTimer: ReturnType<typeof setTimeout> | undefined
    const runBatch = () => {
      clearTimeout(batchTimer)
      batchTimer = undefined
      const due = batch
      batch = []
      for (const go of due) go()
    }
    const batched: Effect.Effect<void> = Effect.callback<void>((resume) => {
      const go = () => resume(Effect.void)
      batch.push(go)
      batchTimer ??= setTimeout(runBatch, endBatchMillis)
      return Effect.sync(() => {
        batch = batch.filter((other) => other !== go)
      })
    })
    yield* Effect.addFinalizer(() =>
      Effect.andThen(Effect.sync(runBatch), Effect.ignore(Effect.timeout(idle.await, pendingWritesBound)))
    )
    const inBackground = (write: Effect.Effect<void>) =>
      Effect.suspend(() => {
        writing++
        idle.closeUnsafe()
        return Effect.asVoid(Effect.forkDetach(Effect.ensuring(
          Effect.andThen(batched, write),
          Effect.sync(() => {
            if (--writing === 0) idle.openUnsafe()
          })
        )))
      })
    const recorder: Recorder = {
      owner,
      record: (pid, command) =>
        Effect.map(
          ProcessRecord.record({ pid, command }).pipe(
            Effect.provideService(Journal.Journal, journal),
            Effect.provideService(JournalClaim.Owner, owner),
            onSystemClock
          ),
          (key): Entry => {
            const exited = (status: Process.ExitStatus | undefined) =>
              ProcessRecord.exited(key, status).pipe(
                Effect.provideService(Journal.Journal, journal),
                Effect.catch((error) => Effect.logWarning(`could not record the end of child process ${pid}`, error))
              )
            return { exited, exitedLater: (status) => inBackground(exited(status)) }
          }
        )
    }
    return recorder
  }).pipe(
    onSystemClock,
    Effect.catchCause((cause) =>
      Effect.as(Effect.logWarning("cannot record children: a crash would leave them running", cause), undefined)
    )
  )
