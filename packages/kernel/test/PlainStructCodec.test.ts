/**
 * The peer's shortcut for plain `Struct` params and results (`internal/peer/codecs.ts`): where it applies, it must
 * answer exactly as the Schema codec does, for every input, and it must not apply where Schema would do more.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import * as fc from "fast-check"
import { codec, plainStruct } from "../src/internal/peer/codecs.js"

const Plain = Schema.Struct({ text: Schema.String, n: Schema.Number, ok: Schema.Boolean })

type Make = (schema: any) => (u: unknown) => Result.Result<unknown, Schema.SchemaError>

const reference = (schema: Schema.Top, make: Make) => {
  const run = make(schema)
  return (u: unknown): Result.Result<unknown, string> => {
    try {
      return Result.mapError(run(u), (error) => error.message)
    } catch (cause) {
      return Result.fail(cause instanceof Error ? cause.message : String(cause))
    }
  }
}

const inputs = fc.oneof(
  fc.record({ text: fc.string(), n: fc.double(), ok: fc.boolean() }),
  fc.record({ text: fc.string(), n: fc.double(), ok: fc.boolean(), extra: fc.jsonValue() }),
  fc.record({ text: fc.jsonValue(), n: fc.jsonValue(), ok: fc.jsonValue() }, { requiredKeys: [] }),
  fc.jsonValue(),
  fc.constantFrom(undefined, null, [], {}, Object.create({ text: "inherited", n: 1, ok: true }))
)

describe("plain Struct codec", () => {
  it("applies to a Struct of required String, Number and Boolean fields only", () => {
    assert.isDefined(plainStruct(Plain.ast))
    assert.isDefined(plainStruct(Schema.Struct({ text: Schema.String }).ast))
    assert.isUndefined(plainStruct(Schema.Struct({ text: Schema.optional(Schema.String) }).ast))
    assert.isUndefined(plainStruct(Schema.Struct({ text: Schema.String.check(Schema.isMinLength(1)) }).ast))
    assert.isUndefined(plainStruct(Schema.Struct({ n: Schema.NumberFromString }).ast))
    assert.isUndefined(plainStruct(Schema.Struct({ inner: Schema.Struct({ text: Schema.String }) }).ast))
    assert.isUndefined(plainStruct(Schema.Struct({ text: Schema.String }).check(Schema.makeFilter(() => true)).ast))
    assert.isUndefined(plainStruct(Schema.Record(Schema.String, Schema.String).ast))
    assert.isUndefined(plainStruct(Schema.Struct({}).ast))
    assert.isUndefined(plainStruct(Schema.String.ast))
  })

  it("decodes and encodes as the Schema codec does, for any input", () => {
    for (const make of [Schema.decodeUnknownResult, Schema.encodeUnknownResult] as ReadonlyArray<Make>) {
      const ours = codec(Plain, make)
      const theirs = reference(Plain, make)
      fc.assert(fc.property(inputs, (u) => {
        assert.deepStrictEqual(ours(u), theirs(u))
      }))
    }
  })

  it("gives a fresh object with the declared fields only, in their order", () => {
    const input = { ok: true, extra: 1, n: 2, text: "a" }
    const out = codec(Plain, Schema.decodeUnknownResult)(input)
    assert.isTrue(Result.isSuccess(out))
    const value = Result.getOrThrow(out) as object
    assert.notStrictEqual(value, input)
    assert.deepStrictEqual(Object.keys(value), ["text", "n", "ok"])
  })

  it("reports a getter that throws as the Schema codec does", () => {
    const input = Object.defineProperty({ n: 1, ok: true }, "text", {
      enumerable: true,
      get: () => {
        throw new Error("boom")
      }
    })
    assert.deepStrictEqual(
      codec(Plain, Schema.decodeUnknownResult)(input),
      reference(Plain, Schema.decodeUnknownResult)(input)
    )
  })
})
