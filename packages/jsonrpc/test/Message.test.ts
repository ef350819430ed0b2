import { assert, describe, it } from "@effect/vitest"
import { ErrorCode, Message, RpcError } from "@lifeline/jsonrpc"
import { Result, Schema } from "effect"
import * as fc from "fast-check"
import { prop } from "./utils/prop.js"

const exactly = { onExcessProperty: "error" } as const

const decodeAs: Record<
  "Request" | "Notification" | "Success" | "Failure",
  (u: unknown) => Result.Result<unknown, unknown>
> = {
  Request: Schema.decodeUnknownResult(Message.Request, exactly),
  Notification: Schema.decodeUnknownResult(Message.Notification, exactly),
  Success: Schema.decodeUnknownResult(Message.Success, exactly),
  Failure: Schema.decodeUnknownResult(Message.Failure, exactly)
}

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text)

type Outcome =
  | { readonly tag: "Request" | "Notification" | "Response" }
  | {
    readonly tag: "Invalid"
    readonly code: number
    readonly id: Message.RequestId | null
    readonly respond: boolean
  }

const outcome = (item: Message.Classified): Outcome =>
  item._tag === "Invalid"
    ? { tag: "Invalid", code: item.error.code, id: item.id, respond: item.respond }
    : { tag: item._tag }

const outcomes = (incoming: Message.Incoming): Outcome | ReadonlyArray<Outcome> =>
  incoming._tag === "Single" ? outcome(incoming.item) : incoming.items.map(outcome)

const valid = (tag: "Request" | "Notification" | "Response"): Outcome => ({ tag })
const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null
const invalid = (code: number, id: Message.RequestId | null, respond = true): Outcome => ({
  tag: "Invalid",
  code,
  id,
  respond
})

describe("Message", () => {
  describe("schemas", () => {
    const request = { jsonrpc: "2.0", id: 1, method: "editor/getMessage", params: { format: "json" } }
    const notification = { jsonrpc: "2.0", method: "initialized" }
    const success = { jsonrpc: "2.0", id: 1, result: { message: "{}" } }
    const failure = { jsonrpc: "2.0", id: 1, error: { code: -32600, message: "Invalid Request", data: "why" } }

    it("decodes each message shape as exactly one member", () => {
      const members = (u: unknown) => Object.entries(decodeAs).filter(([, decode]) => Result.isSuccess(decode(u)))
      assert.deepStrictEqual(members(request).map(([name]) => name), ["Request"])
      assert.deepStrictEqual(members(notification).map(([name]) => name), ["Notification"])
      assert.deepStrictEqual(members(success).map(([name]) => name), ["Success"])
      assert.deepStrictEqual(members(failure).map(([name]) => name), ["Failure"])
      for (const message of [request, notification, success, failure]) {
        assert.deepStrictEqual<unknown>(Message.decodeMessage(message), Result.succeed(message))
      }
    })

    it("never decodes a request-shaped object as a response", () => {
      for (
        const value of [request, { jsonrpc: "2.0", id: 1, method: "ping" }, { jsonrpc: "2.0", id: "a", method: "" }]
      ) {
        assert.isTrue(Result.isFailure(decodeAs.Success(value)))
        assert.isTrue(Result.isFailure(decodeAs.Failure(value)))
        assert.isTrue(Result.isSuccess(decodeAs.Request(value)))
      }
    })

    it("does not read { jsonrpc, id, method } as a Success, even with the default parse options", () => {
      const requestShaped = { jsonrpc: "2.0", id: 1, method: "ping" }
      assert.isTrue(Result.isFailure(Schema.decodeUnknownResult(Message.Success, exactly)(requestShaped)))
      // What Effect 3 needed `exact: true` for: in Effect 4 a required key must be present, even when its schema is
      // Unknown (a MissingKey issue), so the default decode refuses it too; only a present `result` passes.
      assert.isTrue(Result.isFailure(Schema.decodeUnknownResult(Message.Success)(requestShaped)))
      assert.isTrue(
        Result.isSuccess(Schema.decodeUnknownResult(Message.Success)({ ...requestShaped, result: undefined }))
      )
    })

    it("refuses excess properties, at the top level and in the error object", () => {
      const refused: ReadonlyArray<unknown> = [
        { ...request, extra: 1 },
        { ...notification, extra: null },
        { ...success, method: "m" },
        { ...failure, result: null },
        { ...failure, error: { ...failure.error, stack: "at ..." } },
        { ...notification, ["__proto__"]: {} }
      ]
      for (const value of refused) {
        assert.isTrue(Result.isFailure(Message.decodeMessage(value)), JSON.stringify(value))
        assert.strictEqual(Message.classify(value)._tag, "Invalid", JSON.stringify(value))
      }
    })

    it("decodeMessage returns a Failure, never throws, when jsonrpc cannot be turned into a string", () => {
      // Effect 3's Union decoder called String(input.jsonrpc) to pick candidates, which throws on these; Effect 4's
      // looks the value up in a Map (getCandidateIndex in SchemaAST.ts).
      for (const jsonrpc of [{ toString: null }, { toString: 1, valueOf: 1 }, Object.create(null)]) {
        for (
          const value of [{ jsonrpc, id: 1, method: "m" }, { jsonrpc, method: "m" }, { jsonrpc, id: 1, result: 1 }]
        ) {
          assert.isTrue(Result.isFailure(Message.decodeMessage(value)))
          assert.strictEqual(Message.classify(value)._tag, "Invalid")
        }
      }
      assert.deepStrictEqual(
        outcomes(Message.parse(utf8(`{"jsonrpc":{"toString":null},"id":1,"method":"m"}`))),
        invalid(-32600, 1)
      )
    })

    it("accepts an error response with id null and refuses a success response with id null", () => {
      assert.isTrue(Result.isSuccess(Message.decodeMessage({ ...failure, id: null })))
      assert.isTrue(Result.isFailure(Message.decodeMessage({ ...success, id: null })))
      assert.isTrue(Result.isFailure(Message.decodeMessage({ ...request, id: null })))
    })

    it("accepts string and safe-integer ids only", () => {
      const decode = Schema.decodeUnknownResult(Message.RequestId)
      for (const id of ["", "1", 0, -1, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]) {
        assert.isTrue(Result.isSuccess(decode(id)), String(id))
      }
      for (const id of [1.5, 2 ** 53, Number.NaN, null, true, {}, []]) {
        assert.isTrue(Result.isFailure(decode(id)), String(id))
      }
    })
  })

  describe("classify", () => {
    const Absent = Symbol("Absent")
    type Presence = "required" | "optional" | "forbidden"

    // Mostly well-formed members, so that every tag is reached often; the Schemas decide what is valid.
    const member = (presence: Presence, good: fc.Arbitrary<unknown>, bad: fc.Arbitrary<unknown>) =>
      fc.oneof(
        { weight: presence === "forbidden" ? 1 : 16, arbitrary: good },
        { weight: presence === "forbidden" ? 1 : 2, arbitrary: bad },
        { weight: presence === "required" ? 1 : presence === "optional" ? 8 : 30, arbitrary: fc.constant(Absent) }
      )

    const objectOf = (fields: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      Object.fromEntries([...Object.entries(extra), ...Object.entries(fields).filter(([, value]) => value !== Absent)])

    const json = fc.jsonValue({ maxDepth: 2 })
    const goodId = fc.oneof(
      fc.string(),
      fc.integer(),
      fc.constantFrom(0, -0, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER)
    )
    const badId = fc.oneof(
      fc.constantFrom(null, 1.5, -0.5, 2 ** 53, 1e21, true, false, {}, [], [1], { id: 1 }),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      json
    )
    const jsonrpc = (presence: Presence) =>
      member(
        presence,
        fc.constant("2.0"),
        fc.oneof(fc.constantFrom<Array<unknown>>("1.0", "2", 2, "2.0 ", "", null, { toString: null }), json)
      )
    const id = (presence: Presence, nullable = false) =>
      member(presence, nullable ? fc.oneof(goodId, fc.constant(null)) : goodId, badId)
    const method = (presence: Presence) =>
      member(presence, fc.string(), fc.oneof(fc.constantFrom(null, 1, true, [], {}), json))
    const params = (presence: Presence) =>
      member(
        presence,
        fc.oneof(
          { weight: 8, arbitrary: fc.array(json, { maxLength: 3 }) },
          { weight: 8, arbitrary: fc.dictionary(fc.string(), json, { maxKeys: 3 }) },
          // What other implementations send for "no params": read as absent.
          { weight: 3, arbitrary: fc.constant(null) }
        ),
        fc.oneof(fc.constantFrom(null, "a", 1, true), json)
      )
    const result = (presence: Presence) => member(presence, json, json)
    const errorObject = fc.record({
      code: member("required", fc.integer(), fc.constantFrom(1.5, "1", null, 2 ** 53)),
      message: member("required", fc.string(), fc.constantFrom(null, 1, {})),
      data: member("optional", json, json),
      stack: member("forbidden", fc.string(), fc.string())
    }).map((fields) => objectOf(fields))
    const error = (presence: Presence) => member(presence, errorObject, json)
    const extraMembers = fc.oneof(
      { weight: 8, arbitrary: fc.constant({}) },
      {
        weight: 1,
        arbitrary: fc.dictionary(
          fc.oneof(
            fc.string(),
            fc.constantFrom("__proto__", "constructor", "toString", "hasOwnProperty", "ID", "Method", "data", "code")
          ),
          json,
          { minKeys: 1, maxKeys: 2 }
        )
      }
    )

    const shapes = {
      request: fc.record({
        jsonrpc: jsonrpc("required"),
        id: id("required"),
        method: method("required"),
        params: params("optional"),
        result: result("forbidden"),
        error: error("forbidden")
      }),
      notification: fc.record({
        jsonrpc: jsonrpc("required"),
        id: id("forbidden"),
        method: method("required"),
        params: params("optional"),
        result: result("forbidden")
      }),
      success: fc.record({
        jsonrpc: jsonrpc("required"),
        id: id("required"),
        result: result("required"),
        error: error("forbidden"),
        method: method("forbidden"),
        params: params("forbidden")
      }),
      failure: fc.record({
        jsonrpc: jsonrpc("required"),
        id: id("required", true),
        error: error("required"),
        result: result("forbidden"),
        method: method("forbidden")
      }),
      anything: fc.record({
        jsonrpc: jsonrpc("optional"),
        id: id("optional", true),
        method: method("optional"),
        params: params("optional"),
        result: result("optional"),
        error: error("optional")
      })
    }

    const messageLike: fc.Arbitrary<unknown> = fc.oneof(
      ...Object.values(shapes).map((shape) =>
        fc.tuple(shape, extraMembers).map(([fields, extra]) => objectOf(fields, extra))
      ),
      json.filter((u) => !Array.isArray(u))
    )

    const expectedTag = (u: unknown): Message.Classified["_tag"] => {
      if (Result.isSuccess(decodeAs.Request(u))) return "Request"
      if (Result.isSuccess(decodeAs.Notification(u))) return "Notification"
      if (Result.isSuccess(decodeAs.Success(u)) || Result.isSuccess(decodeAs.Failure(u))) return "Response"
      return "Invalid"
    }

    it("the generator reaches every tag often", () => {
      const counts: Record<string, number> = { Request: 0, Notification: 0, Response: 0, Invalid: 0 }
      let nullParams = 0
      for (const value of fc.sample(messageLike, { numRuns: 2000, seed: 42 })) {
        const tag = expectedTag(value)
        counts[tag]! += 1
        if (tag !== "Invalid" && isObject(value) && value.params === null) nullParams++
      }
      for (const [tag, count] of Object.entries(counts)) {
        assert.isAbove(count, 100, `${tag}: ${JSON.stringify(counts)}`)
      }
      // Valid requests and notifications with `"params": null`, read as absent.
      assert.isAbove(nullParams, 20)
    })

    prop("agrees with decodeMessage on JSON objects", [messageLike], ([value]) => {
      const classified = Message.classify(value)
      const decoded = Message.decodeMessage(value)
      assert.strictEqual(classified._tag !== "Invalid", Result.isSuccess(decoded), JSON.stringify(value))
      assert.strictEqual(classified._tag, expectedTag(value), JSON.stringify(value))
      if (classified._tag === "Invalid") {
        assert.strictEqual(classified.error.code, ErrorCode.InvalidRequest)
      } else if (isObject(value) && "params" in value && value.params === null) {
        // `"params": null` reads as absent: a copy without the member, as the Schema decodes it.
        const { params: _, ...rest } = value
        assert.deepStrictEqual<unknown>(classified.message, rest)
        assert.isFalse("params" in classified.message)
        assert.deepStrictEqual<unknown>(decoded, Result.succeed(rest))
      } else {
        assert.strictEqual(classified.message, value)
      }
      // The same value through the wire path: serialised, parsed, classified.
      // Compared as JSON because an id of -0 comes back as 0.
      const reparsed = Message.parse(utf8(JSON.stringify(value)))
      assert.strictEqual(JSON.stringify(outcomes(reparsed)), JSON.stringify(outcome(classified)))
    }, { fastCheck: { numRuns: 2000 } })

    prop("never decodes a value as more than one member", [messageLike], ([value]) => {
      const members = Object.values(decodeAs).filter((decode) => Result.isSuccess(decode(value)))
      assert.isAtMost(members.length, 1, JSON.stringify(value))
    }, { fastCheck: { numRuns: 1000 } })

    it("recovers the id of an invalid request so the error can be correlated", () => {
      assert.deepStrictEqual(
        outcome(Message.classify({ jsonrpc: "1.0", id: "abc", method: "m" })),
        invalid(-32600, "abc")
      )
      assert.deepStrictEqual(
        outcome(Message.classify({ jsonrpc: "2.0", id: 7, method: "m", x: 1 })),
        invalid(-32600, 7)
      )
      assert.deepStrictEqual(outcome(Message.classify({ jsonrpc: "2.0", id: 1.5, method: "m" })), invalid(-32600, null))
    })
  })

  describe("parse", () => {
    const invalidUtf8 = (prefix: string, bytes: ReadonlyArray<number>, suffix: string) =>
      new Uint8Array([...utf8(prefix), ...bytes, ...utf8(suffix)])

    const cases: ReadonlyArray<{
      readonly name: string
      readonly body: string | Uint8Array
      readonly expected: Outcome | ReadonlyArray<Outcome>
    }> = [
      // Parse errors: the id is never recovered, even when it is visible in the broken text.
      {
        name: "invalid JSON",
        body: `{"jsonrpc":"2.0","method":"foo","params":"bar","baz]`,
        expected: invalid(-32700, null)
      },
      { name: "truncated JSON", body: `{"jsonrpc":"2.0","id":1,"method":"a"`, expected: invalid(-32700, null) },
      { name: "an empty body", body: "", expected: invalid(-32700, null) },
      { name: "two JSON values", body: `{"jsonrpc":"2.0","method":"a"}{}`, expected: invalid(-32700, null) },
      {
        name: "invalid UTF-8 (a lone 0xFF byte) inside a string",
        body: invalidUtf8(`{"jsonrpc":"2.0","id":1,"method":"`, [0xff], `"}`),
        expected: invalid(-32700, null)
      },
      {
        name: "invalid UTF-8 (an overlong encoding of '/')",
        body: invalidUtf8(`{"jsonrpc":"2.0","id":1,"method":"`, [0xc0, 0xaf], `"}`),
        expected: invalid(-32700, null)
      },
      {
        name: "invalid UTF-8 (an encoded surrogate half)",
        body: invalidUtf8(`{"jsonrpc":"2.0","id":1,"method":"`, [0xed, 0xa0, 0x80], `"}`),
        expected: invalid(-32700, null)
      },
      {
        name: "invalid UTF-8 (a truncated sequence at the end)",
        body: invalidUtf8(`{"jsonrpc":"2.0","id":1,"method":"a"}`, [0xe2, 0x82], ""),
        expected: invalid(-32700, null)
      },
      // JSON that is not an object.
      { name: "a number", body: "42", expected: invalid(-32600, null) },
      { name: "a string", body: `"{\\"jsonrpc\\":\\"2.0\\"}"`, expected: invalid(-32600, null) },
      { name: "null", body: "null", expected: invalid(-32600, null) },
      { name: "true", body: "true", expected: invalid(-32600, null) },
      // The envelope.
      { name: `jsonrpc "1.0"`, body: `{"jsonrpc":"1.0","id":1,"method":"a"}`, expected: invalid(-32600, 1) },
      { name: "jsonrpc 2 (a number)", body: `{"jsonrpc":2,"id":1,"method":"a"}`, expected: invalid(-32600, 1) },
      { name: "jsonrpc missing", body: `{"id":"x","method":"a"}`, expected: invalid(-32600, "x") },
      { name: "jsonrpc missing in a notification", body: `{"method":"a"}`, expected: invalid(-32600, null) },
      { name: "neither method nor result nor error", body: `{"jsonrpc":"2.0","id":1}`, expected: invalid(-32600, 1) },
      { name: "an empty object", body: "{}", expected: invalid(-32600, null) },
      // Ids.
      { name: "id an object", body: `{"jsonrpc":"2.0","id":{},"method":"a"}`, expected: invalid(-32600, null) },
      { name: "id a boolean", body: `{"jsonrpc":"2.0","id":true,"method":"a"}`, expected: invalid(-32600, null) },
      { name: "id a float", body: `{"jsonrpc":"2.0","id":1.5,"method":"a"}`, expected: invalid(-32600, null) },
      {
        name: "id beyond 2^53",
        body: `{"jsonrpc":"2.0","id":9007199254740992,"method":"a"}`,
        expected: invalid(-32600, null)
      },
      {
        name: "id null in a request",
        body: `{"jsonrpc":"2.0","id":null,"method":"a"}`,
        expected: invalid(-32600, null)
      },
      {
        name: "id written 1.0 is the integer 1",
        body: `{"jsonrpc":"2.0","id":1.0,"method":"a"}`,
        expected: valid("Request")
      },
      {
        name: "a duplicate id: the last one wins",
        body: `{"jsonrpc":"2.0","id":1,"method":"a","id":"b"}`,
        expected: valid("Request")
      },
      // Method and params.
      { name: "method a number", body: `{"jsonrpc":"2.0","id":1,"method":1}`, expected: invalid(-32600, 1) },
      { name: "method null", body: `{"jsonrpc":"2.0","id":1,"method":null}`, expected: invalid(-32600, 1) },
      {
        name: "params a string",
        body: `{"jsonrpc":"2.0","id":1,"method":"a","params":"x"}`,
        expected: invalid(-32600, 1)
      },
      {
        name: "params a number",
        body: `{"jsonrpc":"2.0","id":1,"method":"a","params":3}`,
        expected: invalid(-32600, 1)
      },
      // `"params": null`, as other implementations send it, reads as absent.
      { name: "params null", body: `{"jsonrpc":"2.0","method":"a","params":null}`, expected: valid("Notification") },
      {
        name: "params null in a request",
        body: `{"jsonrpc":"2.0","id":1,"method":"m","params":null}`,
        expected: valid("Request")
      },
      {
        name: "params an array",
        body: `{"jsonrpc":"2.0","id":1,"method":"a","params":[1,2]}`,
        expected: valid("Request")
      },
      // Extra members.
      {
        name: "a notification with an extra member",
        body: `{"jsonrpc":"2.0","method":"a","x":1}`,
        expected: invalid(-32600, null)
      },
      {
        name: "a request with an extra member",
        body: `{"jsonrpc":"2.0","id":3,"method":"a","x":1}`,
        expected: invalid(-32600, 3)
      },
      {
        name: "a __proto__ member",
        body: `{"jsonrpc":"2.0","method":"a","__proto__":{"id":1}}`,
        expected: invalid(-32600, null)
      },
      // Responses: never answered.
      {
        name: "a response with both result and error",
        body: `{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}`,
        expected: invalid(-32600, 1, false)
      },
      {
        name: "a response with jsonrpc 1.0",
        body: `{"jsonrpc":"1.0","id":1,"result":1}`,
        expected: invalid(-32600, 1, false)
      },
      {
        name: "a success response without id",
        body: `{"jsonrpc":"2.0","result":1}`,
        expected: invalid(-32600, null, false)
      },
      {
        name: "a success response with id null",
        body: `{"jsonrpc":"2.0","id":null,"result":1}`,
        expected: invalid(-32600, null, false)
      },
      {
        name: "a success response with a float id",
        body: `{"jsonrpc":"2.0","id":2.5,"result":1}`,
        expected: invalid(-32600, null, false)
      },
      {
        name: "a response with an extra member",
        body: `{"jsonrpc":"2.0","id":4,"result":1,"x":1}`,
        expected: invalid(-32600, 4, false)
      },
      {
        name: "an error object without code",
        body: `{"jsonrpc":"2.0","id":1,"error":{"message":"x"}}`,
        expected: invalid(-32600, 1, false)
      },
      {
        name: "an error object with a float code",
        body: `{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"x"}}`,
        expected: invalid(-32600, 1, false)
      },
      {
        name: "an error object with a string code",
        body: `{"jsonrpc":"2.0","id":1,"error":{"code":"-32600","message":"x"}}`,
        expected: invalid(-32600, 1, false)
      },
      {
        name: "an error object without message",
        body: `{"jsonrpc":"2.0","id":"q","error":{"code":1}}`,
        expected: invalid(-32600, "q", false)
      },
      {
        name: "an error object with an extra member",
        body: `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x","stack":"at"}}`,
        expected: invalid(-32600, 1, false)
      },
      { name: "error a string", body: `{"jsonrpc":"2.0","id":1,"error":"boom"}`, expected: invalid(-32600, 1, false) },
      {
        name: "an error response with id an object",
        body: `{"jsonrpc":"2.0","id":{},"error":{"code":1,"message":"x"}}`,
        expected: invalid(-32600, null, false)
      },
      {
        name: "an error response with id null",
        body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
        expected: valid("Response")
      },
      {
        name: "an error response with data",
        body: `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request","data":{"a":[1]}}}`,
        expected: valid("Response")
      },
      {
        name: "a success response with result null",
        body: `{"jsonrpc":"2.0","id":1,"result":null}`,
        expected: valid("Response")
      },
      // Batches.
      { name: "an empty batch", body: "[]", expected: invalid(-32600, null) },
      { name: "an empty batch with whitespace", body: " [ ] ", expected: invalid(-32600, null) },
      {
        name: "a batch of valid and invalid items",
        body: `[{"jsonrpc":"2.0","id":1,"method":"sum","params":[1,2]},{"jsonrpc":"2.0","method":"notify"},` +
          `{"foo":"boo"},1,{"jsonrpc":"2.0","id":"9","result":null},{"jsonrpc":"2.0","id":5,"method":7},` +
          `{"jsonrpc":"2.0","id":6,"result":1,"error":{"code":1,"message":"x"}}]`,
        expected: [
          valid("Request"),
          valid("Notification"),
          invalid(-32600, null),
          invalid(-32600, null),
          valid("Response"),
          invalid(-32600, 5),
          invalid(-32600, 6, false)
        ]
      },
      { name: "a batch of one invalid item", body: "[1]", expected: [invalid(-32600, null)] },
      {
        name: "a batch with params null",
        body: `[{"jsonrpc":"2.0","id":1,"method":"a","params":null},{"jsonrpc":"2.0","method":"b","params":null},` +
          `{"jsonrpc":"2.0","id":2,"method":"c","params":"x"}]`,
        expected: [valid("Request"), valid("Notification"), invalid(-32600, 2)]
      },
      {
        name: "a nested batch",
        body: `[[{"jsonrpc":"2.0","method":"a"}],{"jsonrpc":"2.0","method":"b"},[]]`,
        expected: [invalid(-32600, null), valid("Notification"), invalid(-32600, null)]
      },
      // Encoding details.
      {
        name: "a UTF-8 byte order mark is skipped",
        body: new Uint8Array([0xef, 0xbb, 0xbf, ...utf8(`{"jsonrpc":"2.0","method":"a"}`)]),
        expected: valid("Notification")
      },
      {
        name: "non-ASCII text",
        body: `{"jsonrpc":"2.0","id":"ü-1","method":"editor/patchMessage","params":{"PID.5":"Müller^Jürgen"}}`,
        expected: valid("Request")
      },
      {
        name: "surrounding whitespace",
        body: `\r\n {"jsonrpc":"2.0","method":"a"} \n`,
        expected: valid("Notification")
      }
    ]

    it.each(cases)("$name", ({ body, expected }) => {
      const incoming = Message.parse(typeof body === "string" ? utf8(body) : body)
      assert.deepStrictEqual(outcomes(incoming), expected)
      const items = incoming._tag === "Single" ? [incoming.item] : incoming.items
      for (const item of items) {
        const answer = Message.answerTo(item)
        if (item._tag === "Invalid" && item.respond) {
          assert.deepStrictEqual(answer, { jsonrpc: "2.0", id: item.id, error: item.error.toWire() })
        } else {
          assert.isUndefined(answer)
        }
      }
    })

    it("reports parse errors and invalid requests with the standard messages", () => {
      const parseError = Message.parse(utf8("{"))
      const invalidRequest = Message.parse(utf8("42"))
      assert.strictEqual(parseError._tag, "Single")
      assert.strictEqual(invalidRequest._tag, "Single")
      if (parseError._tag !== "Single" || invalidRequest._tag !== "Single") return
      assert.strictEqual(parseError.item._tag, "Invalid")
      assert.strictEqual(invalidRequest.item._tag, "Invalid")
      if (parseError.item._tag !== "Invalid" || invalidRequest.item._tag !== "Invalid") return
      assert.instanceOf(parseError.item.error, RpcError.RpcError)
      assert.strictEqual(parseError.item.error.message, "Parse error")
      assert.strictEqual(invalidRequest.item.error.message, "Invalid Request")
    })

    it("reads \"params\": null as absent, in the classifier and in the Schemas", () => {
      const body = `{"jsonrpc":"2.0","id":1,"method":"m","params":null}`
      const incoming = Message.parse(utf8(body))
      assert.deepStrictEqual(incoming, {
        _tag: "Single",
        item: { _tag: "Request", message: { jsonrpc: "2.0", id: 1, method: "m" } }
      })
      if (incoming._tag === "Single" && incoming.item._tag === "Request") {
        assert.isFalse("params" in incoming.item.message)
      }
      const decoded = Message.decodeMessage(JSON.parse(body))
      assert.deepStrictEqual<unknown>(decoded, Result.succeed({ jsonrpc: "2.0", id: 1, method: "m" }))
      if (Result.isSuccess(decoded)) assert.isFalse("params" in decoded.success)
      const notification = `{"jsonrpc":"2.0","method":"n","params":null}`
      assert.deepStrictEqual(Message.parse(utf8(notification)), {
        _tag: "Single",
        item: { _tag: "Notification", message: { jsonrpc: "2.0", method: "n" } }
      })
      assert.deepStrictEqual<unknown>(
        Message.decodeMessage(JSON.parse(notification)),
        Result.succeed({ jsonrpc: "2.0", method: "n" })
      )
      assert.deepStrictEqual(Message.parse(utf8(`[${body},${notification}]`)), {
        _tag: "Batch",
        items: [
          { _tag: "Request", message: { jsonrpc: "2.0", id: 1, method: "m" } },
          { _tag: "Notification", message: { jsonrpc: "2.0", method: "n" } }
        ]
      })
      // Params that are there are kept as they are, null inside them included.
      const kept: Message.Request = { jsonrpc: "2.0", id: 2, method: "m", params: [null] }
      const classified = Message.classify(kept)
      assert.strictEqual(classified._tag === "Request" ? classified.message : undefined, kept)
      assert.deepStrictEqual<unknown>(Message.decodeMessage(kept), Result.succeed(kept))
      // The Schemas encode a missing key as a missing key, never as null.
      const encoded = Schema.encodeUnknownSync(Message.Request)({ jsonrpc: "2.0", id: 1, method: "m" })
      assert.deepStrictEqual(encoded, { jsonrpc: "2.0", id: 1, method: "m" })
      assert.isFalse("params" in (encoded as object))
    })

    it("keeps the decoded message as it was sent", () => {
      const incoming = Message.parse(utf8(`{"jsonrpc":"2.0","id":"ü","method":"m","params":{"a":[1,{"b":null}]}}`))
      assert.deepStrictEqual(incoming, {
        _tag: "Single",
        item: { _tag: "Request", message: { jsonrpc: "2.0", id: "ü", method: "m", params: { a: [1, { b: null }] } } }
      })
    })
  })

  describe("constructors", () => {
    it("request and notification leave out absent params", () => {
      const request = Message.request(1, "ping")
      assert.deepStrictEqual(request, { jsonrpc: "2.0", id: 1, method: "ping" })
      assert.isFalse("params" in request)
      assert.deepStrictEqual(Message.request("a", "sum", [1, 2]), {
        jsonrpc: "2.0",
        id: "a",
        method: "sum",
        params: [1, 2]
      })
      const notification = Message.notification("initialized")
      assert.deepStrictEqual(notification, { jsonrpc: "2.0", method: "initialized" })
      assert.isFalse("params" in notification)
      assert.deepStrictEqual(Message.notification("window/closed", { id: 3 }), {
        jsonrpc: "2.0",
        method: "window/closed",
        params: { id: 3 }
      })
    })

    it("request and notification given null params leave them out", () => {
      const request = Message.request(1, "m", null)
      assert.deepStrictEqual(request, { jsonrpc: "2.0", id: 1, method: "m" })
      assert.isFalse("params" in request)
      assert.deepStrictEqual(Message.encode(request), Result.succeed(utf8(`{"jsonrpc":"2.0","id":1,"method":"m"}`)))
      const notification = Message.notification("n", null)
      assert.isFalse("params" in notification)
      assert.deepStrictEqual(Message.stringify(notification), Result.succeed(`{"jsonrpc":"2.0","method":"n"}`))
      assert.isFalse("params" in Message.request(2, "m", undefined))
      assert.isFalse("params" in Message.notification("n", undefined))
    })

    it("success turns an undefined result into null, so the response keeps its result member", () => {
      assert.deepStrictEqual(Message.success(1, undefined), { jsonrpc: "2.0", id: 1, result: null })
      assert.deepStrictEqual(Message.success(1, null), { jsonrpc: "2.0", id: 1, result: null })
      assert.deepStrictEqual(Message.success("x", 0), { jsonrpc: "2.0", id: "x", result: 0 })
      assert.deepStrictEqual(Message.success(2, false), { jsonrpc: "2.0", id: 2, result: false })
      const encoded = Message.stringify(Message.success(1, undefined))
      assert.deepStrictEqual(encoded, Result.succeed(`{"jsonrpc":"2.0","id":1,"result":null}`))
    })

    it("failure takes an RpcError or a plain error object", () => {
      assert.deepStrictEqual(Message.failure(1, RpcError.RpcError.methodNotFound("nope")), {
        jsonrpc: "2.0",
        id: 1,
        error: { code: -32601, message: "Method not found: nope" }
      })
      assert.deepStrictEqual(Message.failure(null, RpcError.RpcError.parseError("Unexpected end")), {
        jsonrpc: "2.0",
        id: null,
        error: { code: -32700, message: "Parse error", data: "Unexpected end" }
      })
      const plain = { code: 1, message: "custom" }
      assert.deepStrictEqual(Message.failure("a", plain), { jsonrpc: "2.0", id: "a", error: plain })
    })

    it("every constructed message is valid and classifies as itself", () => {
      const cases: ReadonlyArray<readonly [Message.Message, Message.Classified["_tag"]]> = [
        [Message.request(1, "a"), "Request"],
        [Message.request("1", "a", { x: 1 }), "Request"],
        [Message.notification("a", []), "Notification"],
        [Message.success(1, undefined), "Response"],
        [Message.failure(null, RpcError.RpcError.internalError()), "Response"],
        [Message.failure(1, RpcError.RpcError.invalidParams({ issue: "x" })), "Response"]
      ]
      for (const [message, tag] of cases) {
        assert.isTrue(Result.isSuccess(Message.decodeMessage(message)))
        assert.strictEqual(Message.classify(message)._tag, tag)
      }
    })

    it("answerTo answers only invalid messages that may be answered", () => {
      const error = RpcError.RpcError.invalidRequest("x")
      assert.deepStrictEqual(Message.answerTo({ _tag: "Invalid", id: 3, error, respond: true }), {
        jsonrpc: "2.0",
        id: 3,
        error: { code: -32600, message: "Invalid Request", data: "x" }
      })
      assert.isUndefined(Message.answerTo({ _tag: "Invalid", id: 3, error, respond: false }))
      assert.isUndefined(Message.answerTo(Message.classify(Message.request(1, "a"))))
      assert.isUndefined(Message.answerTo(Message.classify(Message.notification("a"))))
      assert.isUndefined(Message.answerTo(Message.classify(Message.success(1, 1))))
    })
  })

  describe("encode and stringify", () => {
    it("encode writes UTF-8 JSON, counting bytes rather than characters", () => {
      const message = Message.request(1, "editor/setMessage", { text: "Müller 😀" })
      const encoded = Message.encode(message)
      assert.isTrue(Result.isSuccess(encoded))
      if (Result.isFailure(encoded)) return
      const text = JSON.stringify(message)
      assert.deepStrictEqual(encoded.success, utf8(text))
      assert.isAbove(encoded.success.byteLength, text.length)
      assert.deepStrictEqual(Message.stringify(message), Result.succeed(text))
      assert.deepStrictEqual(outcomes(Message.parse(encoded.success)), valid("Request"))
    })

    it("encodes a batch as a JSON array", () => {
      const batch = [Message.request(1, "a"), Message.notification("b")]
      assert.deepStrictEqual(
        Message.stringify(batch),
        Result.succeed(`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]`)
      )
      const encoded = Message.encode(batch)
      assert.isTrue(Result.isSuccess(encoded))
      if (Result.isSuccess(encoded)) {
        assert.deepStrictEqual(outcomes(Message.parse(encoded.success)), [valid("Request"), valid("Notification")])
      }
    })

    it("never puts params null or undefined on the wire, even from a message built by hand", () => {
      const byHand = { jsonrpc: "2.0", id: 1, method: "m", params: null } as unknown as Message.Message
      const expected = `{"jsonrpc":"2.0","id":1,"method":"m"}`
      assert.deepStrictEqual(Message.stringify(byHand), Result.succeed(expected))
      assert.deepStrictEqual(Message.encode(byHand), Result.succeed(utf8(expected)))
      // The caller's message is left as it was.
      assert.isNull((byHand as { readonly params?: unknown }).params)
      const undefinedParams = { jsonrpc: "2.0", method: "n", params: undefined } as unknown as Message.Message
      assert.deepStrictEqual(Message.stringify(undefinedParams), Result.succeed(`{"jsonrpc":"2.0","method":"n"}`))
      const batch = [Message.request(2, "a", [1]), byHand, undefinedParams]
      const batchText =
        `[{"jsonrpc":"2.0","id":2,"method":"a","params":[1]},${expected},{"jsonrpc":"2.0","method":"n"}]`
      assert.deepStrictEqual(Message.stringify(batch), Result.succeed(batchText))
      assert.deepStrictEqual(Message.encode(batch), Result.succeed(utf8(batchText)))
      // A result or error data that is null is a value, not absent params: it stays.
      assert.deepStrictEqual(
        Message.stringify(Message.success(1, null)),
        Result.succeed(`{"jsonrpc":"2.0","id":1,"result":null}`)
      )
    })

    it("drops undefined members", () => {
      const error = { code: 1, message: "x", data: undefined }
      assert.deepStrictEqual(
        Message.stringify(Message.failure(1, error)),
        Result.succeed(`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}`)
      )
    })

    const unserialisable: ReadonlyArray<readonly [string, () => Message.Message]> = [
      ["a BigInt", () => Message.success(1, { n: 10n })],
      ["a cycle", () => {
        const cyclic: Record<string, unknown> = {}
        cyclic.self = cyclic
        return Message.notification("a", cyclic)
      }],
      ["a throwing toJSON", () =>
        Message.success(1, {
          toJSON: () => {
            throw new Error("nope")
          }
        })]
    ]

    for (const [name, make] of unserialisable) {
      it(`reports ${name} as a Failure with -32603`, () => {
        const results: ReadonlyArray<Result.Result<unknown, RpcError.RpcError>> = [
          Message.encode(make()),
          Message.stringify(make())
        ]
        for (const result of results) {
          assert.isTrue(Result.isFailure(result))
          if (Result.isSuccess(result)) return
          assert.instanceOf(result.failure, RpcError.RpcError)
          assert.strictEqual(result.failure.code, ErrorCode.InternalError)
          assert.strictEqual(result.failure.message, "Internal error")
          assert.include(String(result.failure.data), "Could not serialise")
        }
      })
    }
  })
})
