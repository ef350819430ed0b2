/**
 * The Effect runtime the transports of one process share, so that a host written with Promises only gets Lifeline's
 * supervision: `NodeSupervisedSpawner` from `@lifeline/node` (each server in its own process group, a bounded stop of
 * the whole group, every server recorded in a journal under an owner unique to this process, the servers of dead
 * owners swept when the runtime is built).
 *
 * One runtime per journal (a directory of files, or a journal layer given by the host) and per process, not one per
 * transport: the journal's owner is the process, and its file is named after it, so two runtimes of one process would
 * write one file (and two on one SQLite or Postgres journal would claim one owner twice). It is built when the first
 * transport starts and disposed when the last one has closed, so that an idle host keeps no timer and no claim: the
 * runtime's journal file goes with it when nothing is left in it.
 *
 * @internal
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as Journal from "@lifeline/journal/Journal"
import * as NodeStdio from "@lifeline/node/NodeStdio"
import * as NodeSupervisedSpawner from "@lifeline/node/NodeSupervisedSpawner"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as ManagedRuntime from "effect/ManagedRuntime"
import type * as ChildProcessSpawner from "effect/process/ChildProcessSpawner"

/**
 * @internal
 */
export type Runtime = ManagedRuntime.ManagedRuntime<ChildProcessSpawner.ChildProcessSpawner, unknown>

/**
 * Where the servers are recorded: the default file journal in `directory` (`undefined`: `NodeSupervisedSpawner`'s
 * default directory), or the journal a layer builds (SQLite, Postgres).
 *
 * @internal
 */
export type JournalChoice =
  | { readonly _tag: "Directory"; readonly directory: string | undefined }
  | { readonly _tag: "Layer"; readonly layer: Layer.Layer<Journal.Journal, unknown> }

interface Shared {
  readonly runtime: Runtime
  /** Leases not yet released (the background work of a close holds its lease until it is done). */
  users: number
  /** Leases whose transport has not begun to release them: the runtime stays while one is left. */
  open: number
  /** The background work of closes ({@link Lease.releaseInBackground}): the last release waits for it. */
  readonly pending: Set<Promise<void>>
}

/** By directory, or by the layer object: one runtime, so one owner, per journal. */
const shared = new Map<unknown, Shared>()
/** Disposals under way, by journal: a new runtime for the same journal waits for the old one's journal to close. */
const disposing = new Map<unknown, Promise<void>>()

const spawnerLayer = (choice: JournalChoice) =>
  choice._tag === "Directory"
    ? NodeSupervisedSpawner.layerOptions({ directory: choice.directory })
    : Layer.unwrap(Effect.gen(function*() {
      const journal = yield* Journal.Journal
      return NodeSupervisedSpawner.layerOptions({ journal })
    })).pipe(Layer.provide(choice.layer))

const build = (choice: JournalChoice): Runtime =>
  ManagedRuntime.make(
    spawnerLayer(choice).pipe(
      Layer.provide([NodeFileSystem.layer, NodePath.layer]),
      // Logs (a sweep at start, a group that needed SIGKILL) go to stderr as logfmt lines, never to stdout: the host
      // may itself be a stdio server, whose stdout carries frames only.
      Layer.provideMerge(Logger.layer([NodeStdio.logger]))
    )
  )

/**
 * A lease on the shared runtime of a journal. Its layer (and so the sweep of dead owners, and the opening of a
 * journal layer) is built by the first lease of a runtime, before it is returned.
 *
 * @internal
 */
export interface Lease {
  readonly runtime: Runtime
  /**
   * Idempotent: the last release of a runtime waits for the background work of the closes before it, then disposes
   * it (its journal closed, and its file removed when nothing is left in it).
   */
  readonly release: () => Promise<void>
  /**
   * When another transport still holds the runtime open, runs `work` in the background and releases the lease after
   * it, and returns `true`: the runtime's disposal (the last release) waits for it. Otherwise does nothing and returns
   * `false`: the last close of a runtime does its work and disposes the runtime before it returns, so that a host that
   * exits right after loses nothing (its journal file removed).
   */
  readonly releaseInBackground: (work: () => Promise<void>) => boolean
}

/**
 * @internal
 */
export const acquire = async (choice: JournalChoice): Promise<Lease> => {
  const key = choice._tag === "Directory" ? choice.directory ?? "" : choice.layer
  let entry = shared.get(key)
  if (entry === undefined) {
    await disposing.get(key)
    entry = shared.get(key)
    if (entry === undefined) {
      entry = { runtime: build(choice), users: 0, open: 0, pending: new Set() }
      shared.set(key, entry)
    }
  }
  entry.users++
  entry.open++
  const self = entry
  let released = false
  const drop = async (): Promise<void> => {
    self.users--
    if (self.users > 0 || shared.get(key) !== self) return
    shared.delete(key)
    const done = self.runtime.dispose().finally(() => {
      if (disposing.get(key) === done) disposing.delete(key)
    })
    disposing.set(key, done)
    await done
  }
  const release = async (): Promise<void> => {
    if (released) return
    released = true
    // The last open lease: the work left in the background by the closes before holds their leases; once it is
    // done, this release is the last one and disposes the runtime.
    if (--self.open === 0) {
      while (self.pending.size > 0) await Promise.all(self.pending)
    }
    await drop()
  }
  const releaseInBackground = (work: () => Promise<void>): boolean => {
    if (released || self.open <= 1 || shared.get(key) !== self) return false
    released = true
    self.open--
    const done: Promise<void> = work().catch(() => {}).then(drop).catch(() => {}).finally(() =>
      self.pending.delete(done)
    )
    self.pending.add(done)
    return true
  }
  try {
    // Built here, so that the sweep of dead owners is done before the first spawn.
    await self.runtime.context()
  } catch (error) {
    await release()
    throw error
  }
  return { runtime: self.runtime, release, releaseInBackground }
}
