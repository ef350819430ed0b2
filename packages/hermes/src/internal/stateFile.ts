/**
 * An extension's state file: read and decoded at start, written atomically at shutdown (a temporary file in the same
 * directory, flushed to disk, then renamed over the old one), so a crash mid-write leaves the previous state intact.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as FileSystem from "effect/FileSystem"
import * as Option from "effect/Option"
import type * as Path from "effect/Path"
import * as Random from "effect/Random"
import * as Schema from "effect/Schema"

/** @internal */
export const directoryOf = (path: Path.Path, dataDir: string, name: string): string =>
  path.join(dataDir, "extensions", name)

/** @internal */
export const fileOf = (path: Path.Path, dataDir: string, name: string): string =>
  path.join(directoryOf(path, dataDir, name), "state.json")

/** @internal */
export const load = <S, I>(
  fs: FileSystem.FileSystem,
  file: string,
  schema: Schema.Codec<S, I>
): Effect.Effect<Option.Option<S>, string> =>
  Effect.gen(function*() {
    const exists = yield* fs.exists(file).pipe(Effect.mapError((e) => `could not read ${file}: ${e.message}`))
    if (!exists) return Option.none()
    const text = yield* fs.readFileString(file).pipe(Effect.mapError((e) => `could not read ${file}: ${e.message}`))
    const state = yield* Schema.decodeUnknownEffect(Schema.fromJsonString(schema))(text).pipe(
      Effect.mapError((e) => `${file} does not hold a valid state: ${e.message}`)
    )
    return Option.some(state)
  })

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
