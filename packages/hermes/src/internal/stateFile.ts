/**
 * An extension's state file: read and decoded at start, written atomically at shutdown (a temporary file in the same
 * directory, flushed to disk, then renamed over the old one), so a crash mid-write leaves the previous state intact.
 * A file that could not be read is never overwritten: it is moved aside first (docs/protocol.md, "shutdown").
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as FileSystem from "effect/FileSystem"
import * as Option from "effect/Option"
import type * as Path from "effect/Path"
import * as Random from "effect/Random"
import * as Schema from "effect/Schema"
import type * as HermesProtocol from "../HermesProtocol.js"

/** @internal */
const directoryOf = (path: Path.Path, dataDir: string, name: string): string => path.join(dataDir, "extensions", name)

/** @internal */
export const fileOf = (path: Path.Path, dataDir: string, name: string): string =>
  path.join(directoryOf(path, dataDir, name), "state.json")

/**
 * Why `load` found a file it could not use.
 *
 * @internal
 */
export interface LoadFailure {
  readonly reason: HermesProtocol.StateProblem
  readonly detail: string
}

const decodeJson = Schema.decodeUnknownEffect(Schema.fromJsonString(Schema.Unknown))

/**
 * A failure's description, for logs and the shutdown answer. It quotes the file (V8's JSON errors show a piece of
 * the text, Schema's the offending value), and the file may hold anything: control and bidirectional characters are
 * escaped, and the description is cut at 500 characters.
 */
const describe = (text: string): string => {
  const cut = text.length > 500 ? `${text.slice(0, 500)}... (cut)` : text
  return cut.replace(
    /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`
  )
}

/**
 * `None` when there is no file; fails when there is one (or may be one: its directory cannot be searched) that does
 * not hold a state: the caller must then not overwrite it.
 *
 * @internal
 */
export const load = <S, I>(
  fs: FileSystem.FileSystem,
  file: string,
  schema: Schema.Codec<S, I>
): Effect.Effect<Option.Option<S>, LoadFailure> =>
  Effect.gen(function*() {
    const unreadable = (e: { readonly message: string }): LoadFailure => ({
      reason: "Unreadable",
      detail: describe(`could not read ${file}: ${e.message}`)
    })
    const exists = yield* fs.exists(file).pipe(Effect.mapError(unreadable))
    if (!exists) return Option.none()
    const text = yield* fs.readFileString(file).pipe(Effect.mapError(unreadable))
    // Parsed, then decoded, so that a truncated file is told from one written by another version of the extension.
    const json = yield* decodeJson(text).pipe(
      Effect.mapError((e): LoadFailure => ({
        reason: "InvalidJson",
        detail: describe(`${file} is not JSON: ${e.message}`)
      }))
    )
    const state = yield* Schema.decodeUnknownEffect(schema)(json).pipe(
      Effect.mapError((e): LoadFailure => ({
        reason: "SchemaMismatch",
        detail: describe(`${file} does not hold a valid state: ${e.message}`)
      }))
    )
    return Option.some(state)
  })

/**
 * Moves `file` out of the way, to `<file>.bad-<timestamp>` (with `-2`, `-3`… when that name is taken, so an earlier
 * bad file is never replaced), and answers the new path. `None` when there was nothing to move.
 *
 * @internal
 */
export const setAside = (
  fs: FileSystem.FileSystem,
  file: string,
  now: number
): Effect.Effect<Option.Option<string>, string> =>
  Effect.gen(function*() {
    // ISO 8601 without colons, which some file systems refuse.
    const base = `${file}.bad-${new Date(now).toISOString().replace(/:/g, "-")}`
    let target = base
    for (let n = 2; yield* fs.exists(target); n++) {
      if (n > 100) return yield* Effect.fail(`could not find a free name next to ${file}`)
      target = `${base}-${n}`
    }
    const moved = yield* fs.rename(file, target).pipe(
      Effect.as(true),
      Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed(false))
    )
    return moved ? Option.some(target) : Option.none()
  }).pipe(
    Effect.mapError((e) => typeof e === "string" ? e : `could not move ${file} aside: ${e.message}`)
  )

/** @internal */
export const save = <S, I>(
  fs: FileSystem.FileSystem,
  path: Path.Path,
  file: string,
  schema: Schema.Codec<S, I>,
  state: S
): Effect.Effect<void, string> =>
  Effect.gen(function*() {
    const text = yield* Schema.encodeEffect(Schema.fromJsonString(schema, { space: 2 }))(state).pipe(
      Effect.mapError((e) => `the state does not match its Schema: ${e.message}`)
    )
    yield* fs.makeDirectory(path.dirname(file), { recursive: true })
    const suffix = yield* Random.nextIntBetween(0, 2 ** 31 - 1)
    const temporary = `${file}.${suffix.toString(36)}.tmp`
    yield* Effect.scoped(
      Effect.flatMap(fs.open(temporary, { flag: "w" }), (handle) =>
        Effect.andThen(handle.writeAll(new TextEncoder().encode(text + "\n")), handle.sync))
    ).pipe(
      Effect.andThen(fs.rename(temporary, file)),
      // The old file is untouched until the rename: only the temporary file can be left over, and it is removed.
      Effect.tapError(() =>
        Effect.ignore(fs.remove(temporary))
      )
    )
  }).pipe(Effect.mapError((e) => typeof e === "string" ? e : `could not save state to ${file}: ${e.message}`))
