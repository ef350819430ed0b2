import { Framing } from "@lifeline/jsonrpc"
import type { Transport } from "@lifeline/kernel"
import type { Duration, Fiber, Scope } from "effect"
import { Effect, FileSystem, Layer, Option, Path, PlatformError, Queue, Stream } from "effect"
import { TestClock } from "effect/testing"

/** An in-memory file system with just what the SDK uses, and switches to make writes fail or crash. */
export interface MemoryFs {
  readonly files: Map<string, string>
  readonly layer: Layer.Layer<FileSystem.FileSystem | Path.Path>
  /** The next `rename` fails, as a full disk or a permission problem would. */
  failRename: boolean
  /** Every write dies half-way, leaving a partial temporary file: a crash mid-write. */
  crashMidWrite: boolean
  readonly log: Array<string>
}

export const makeMemoryFs = (initial: Record<string, string> = {}): MemoryFs => {
  const files = new Map(Object.entries(initial))
  const directories = new Set<string>()
  const log: Array<string> = []
  const notFound = (method: string, path: string) =>
    PlatformError.systemError({ _tag: "NotFound", module: "FileSystem", method, pathOrDescriptor: path })
  const self: MemoryFs = {
    files,
    log,
    failRename: false,
    crashMidWrite: false,
    layer: Layer.merge(
      FileSystem.layerNoop({
        exists: (path) => Effect.succeed(files.has(path) || directories.has(path)),
        readFileString: (path) =>
          Effect.suspend(() => {
            const text = files.get(path)
            return text === undefined ? Effect.fail(notFound("readFileString", path)) : Effect.succeed(text)
          }),
        makeDirectory: (path) =>
          Effect.sync(() => {
            directories.add(path)
            log.push(`mkdir ${path}`)
          }),
        open: (path) =>
          Effect.sync(() => {
            files.set(path, "")
            log.push(`open ${path}`)
            const decoder = new TextDecoder()
            return {
              writeAll: (bytes: Uint8Array) =>
                Effect.suspend(() => {
                  if (self.crashMidWrite) {
                    files.set(path, decoder.decode(bytes.subarray(0, bytes.length >> 1)))
                    return Effect.die("crashed mid-write")
                  }
                  files.set(path, files.get(path)! + decoder.decode(bytes))
                  return Effect.void
                }),
              sync: Effect.sync(() => {
                log.push(`sync ${path}`)
              })
            } as unknown as FileSystem.File
          }),
        rename: (from, to) =>
          Effect.suspend(() => {
            if (self.failRename) {
              return Effect.fail(
                PlatformError.systemError({
                  _tag: "PermissionDenied",
                  module: "FileSystem",
                  method: "rename",
                  pathOrDescriptor: to
                })
              )
            }
            const text = files.get(from)
            if (text === undefined) return Effect.fail(notFound("rename", from))
            files.delete(from)
            files.set(to, text)
            log.push(`rename ${from} ${to}`)
            return Effect.void
          }),
        remove: (path) =>
          Effect.sync(() => {
            files.delete(path)
            log.push(`remove ${path}`)
          })
      }),
      Path.layer
    )
  }
  return self
}

/** Lets forked fibers run until `condition` holds, without moving the clock. */
export const eventually = (condition: Effect.Effect<boolean>, what = "condition") =>
  Effect.gen(function*() {
    for (let i = 0; i < 10_000; i++) {
      if (yield* condition) return
      yield* Effect.yieldNow
    }
    return yield* Effect.die(new Error(`never reached: ${what}`))
  })

/**
 * Lets the other fibers run until they wait for something, then moves the clock: what Effect 3's `TestClock.adjust`
 * did by waiting for a live timer first. Effect 4's waits for one scheduler turn only, and a message crosses several
 * (the transport, the peer, the handler fiber it forks) before whoever receives it starts a timer.
 */
export const adjust = (duration: Duration.Input) =>
  Effect.gen(function*() {
    for (let i = 0; i < 50; i++) yield* Effect.yieldNow
    yield* TestClock.adjust(duration)
  })

/** What Effect 3's `Fiber.poll` answered: the fiber's exit if it is done, else `None`. */
export const poll = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.sync(() => Option.fromUndefinedOr(fiber.pollUnsafe()))

/** The other end of a transport, driven by hand: send any message, read whatever arrives. */
export interface Raw {
  readonly send: (message: unknown) => Effect.Effect<void, Transport.TransportError>
  readonly next: Effect.Effect<any>
  readonly received: Queue.Queue<any>
}

export const makeRaw = (transport: Transport.Transport.Service): Effect.Effect<Raw, never, Scope.Scope> =>
  Effect.gen(function*() {
    const received = yield* Queue.unbounded<any>()
    yield* transport.incoming.pipe(
      Framing.decode(Framing.contentLength),
      Stream.runForEach((body) => Queue.offer(received, JSON.parse(new TextDecoder().decode(body)))),
      Effect.ignore,
      Effect.forkScoped
    )
    return {
      send: (message) => transport.send([Framing.contentLength.encodeString(JSON.stringify(message))]),
      next: Queue.take(received),
      received
    }
  })
