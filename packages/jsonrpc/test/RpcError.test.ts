import { assert, describe, it } from "@effect/vitest"
import { ErrorCode, RpcError } from "@lifeline/jsonrpc"
import { Effect, Result, Schema } from "effect"

describe("RpcError", () => {
  const constructors: ReadonlyArray<readonly [string, RpcError.RpcError, number, string]> = [
    ["parseError", RpcError.RpcError.parseError(), -32700, "Parse error"],
    ["invalidRequest", RpcError.RpcError.invalidRequest(), -32600, "Invalid Request"],
    [
      "methodNotFound",
      RpcError.RpcError.methodNotFound("editor/frobnicate"),
      -32601,
      "Method not found: editor/frobnicate"
    ],
    ["invalidParams", RpcError.RpcError.invalidParams(), -32602, "Invalid params"],
    ["internalError", RpcError.RpcError.internalError(), -32603, "Internal error"],
    [
      "serverNotInitialized",
      RpcError.RpcError.serverNotInitialized("editor/getMessage"),
      -32002,
      "Server not initialized: editor/getMessage"
    ],
    ["shuttingDown", RpcError.RpcError.shuttingDown("editor/getMessage"), -32003, "Shutting down: editor/getMessage"],
    ["requestCancelled", RpcError.RpcError.requestCancelled(), -32800, "Request cancelled"],
    ["requestFailed", RpcError.RpcError.requestFailed("Too many open windows"), -32803, "Too many open windows"]
  ]

  for (const [name, error, code, message] of constructors) {
    it(`${name} has code ${code}`, () => {
      assert.strictEqual(error._tag, "RpcError")
      assert.strictEqual(error.code, code)
      assert.strictEqual(error.message, message)
      assert.deepStrictEqual(error.toWire(), { code, message })
      assert.isFalse("data" in error.toWire())
    })
  }

  it("the constructors use the named codes", () => {
    assert.strictEqual(RpcError.RpcError.parseError().code, ErrorCode.ParseError)
    assert.strictEqual(RpcError.RpcError.invalidRequest().code, ErrorCode.InvalidRequest)
    assert.strictEqual(RpcError.RpcError.methodNotFound("m").code, ErrorCode.MethodNotFound)
    assert.strictEqual(RpcError.RpcError.invalidParams().code, ErrorCode.InvalidParams)
    assert.strictEqual(RpcError.RpcError.internalError().code, ErrorCode.InternalError)
    assert.strictEqual(RpcError.RpcError.serverNotInitialized("m").code, ErrorCode.ServerNotInitialized)
    assert.strictEqual(RpcError.RpcError.shuttingDown("m").code, ErrorCode.ShuttingDown)
    assert.strictEqual(RpcError.RpcError.requestCancelled().code, ErrorCode.RequestCancelled)
    assert.strictEqual(RpcError.RpcError.requestFailed("m").code, ErrorCode.RequestFailed)
  })

  it("requestFailed carries the caller's message and data", () => {
    const data = { reason: "TooManyWindows", limit: 64, actual: 65 }
    const error = RpcError.RpcError.requestFailed("Too many open windows", data)
    assert.deepStrictEqual(error.toWire(), { code: -32803, message: "Too many open windows", data })
    assert.isFalse("data" in RpcError.RpcError.requestFailed("Busy", undefined).toWire())
    assert.deepStrictEqual(RpcError.RpcError.requestFailed("Busy", null).toWire(), {
      code: -32803,
      message: "Busy",
      data: null
    })
  })

  it("toWire keeps every defined detail, null and falsy ones included", () => {
    for (const data of [null, 0, false, "", "Missing required field: method", { issue: ["a"] }]) {
      const wire = RpcError.RpcError.invalidRequest(data).toWire()
      assert.deepStrictEqual(wire, { code: -32600, message: "Invalid Request", data })
      assert.isTrue("data" in wire)
    }
  })

  it("toWire leaves out undefined data, so it never reaches the wire", () => {
    const wire = RpcError.make(1, "custom", undefined).toWire()
    assert.deepStrictEqual(wire, { code: 1, message: "custom" })
    assert.isFalse("data" in wire)
    assert.strictEqual(JSON.stringify(wire), `{"code":1,"message":"custom"}`)
    assert.isFalse("data" in RpcError.RpcError.internalError(undefined).toWire())
  })

  it("fromWire reads back what toWire wrote", () => {
    const withData = RpcError.RpcError.invalidParams({ path: ["a"] })
    assert.deepStrictEqual(RpcError.fromWire(withData.toWire()).toWire(), withData.toWire())
    const read = RpcError.fromWire({ code: -32000, message: "Shutdown failed" })
    assert.strictEqual(read.code, -32000)
    assert.strictEqual(read.message, "Shutdown failed")
    assert.isFalse("data" in read.toWire())
  })

  it.effect("is a yieldable, typed Effect failure", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(RpcError.RpcError.methodNotFound("nope"))
      assert.strictEqual(error._tag, "RpcError")
      assert.strictEqual(error.code, ErrorCode.MethodNotFound)
      const caught = yield* Effect.gen(function*() {
        return yield* RpcError.RpcError.shuttingDown("m")
      }).pipe(Effect.catchTag("RpcError", (e) => Effect.succeed(e.code)))
      assert.strictEqual(caught, ErrorCode.ShuttingDown)
    }))

  it("is a Schema: decodes a tagged error object and refuses a non-integer code", () => {
    const decode = Schema.decodeUnknownResult(RpcError.RpcError)
    const decoded = decode({ _tag: "RpcError", code: -32601, message: "Method not found: x" })
    assert.isTrue(Result.isSuccess(decoded))
    if (Result.isSuccess(decoded)) {
      assert.instanceOf(decoded.success, RpcError.RpcError)
      assert.strictEqual(decoded.success.code, -32601)
    }
    assert.isTrue(Result.isFailure(decode({ _tag: "RpcError", code: 1.5, message: "x" })))
  })
})

describe("ErrorCode", () => {
  it("has the JSON-RPC 2.0 and LSP values", () => {
    assert.strictEqual(ErrorCode.ParseError, -32700)
    assert.strictEqual(ErrorCode.InvalidRequest, -32600)
    assert.strictEqual(ErrorCode.MethodNotFound, -32601)
    assert.strictEqual(ErrorCode.InvalidParams, -32602)
    assert.strictEqual(ErrorCode.InternalError, -32603)
    assert.strictEqual(ErrorCode.ServerErrorStart, -32099)
    assert.strictEqual(ErrorCode.ServerErrorEnd, -32000)
    assert.strictEqual(ErrorCode.ServerNotInitialized, -32002)
    assert.strictEqual(ErrorCode.RequestCancelled, -32800)
    assert.strictEqual(ErrorCode.RequestFailed, -32803)
  })

  it("isReserved covers -32768 ..= -32000", () => {
    for (const code of [-32768, -32700, -32603, -32099, -32000]) assert.isTrue(ErrorCode.isReserved(code), `${code}`)
    for (const code of [-32769, -31999, -32800, -32803, 0, 1, -1, 32000, 32700]) {
      assert.isFalse(ErrorCode.isReserved(code), `${code}`)
    }
  })

  it("isServerError covers -32099 ..= -32000", () => {
    for (const code of [-32099, -32050, -32002, -32003, -32000]) assert.isTrue(ErrorCode.isServerError(code), `${code}`)
    for (const code of [-32100, -31999, -32600, -32700, -32800, 0]) {
      assert.isFalse(ErrorCode.isServerError(code), `${code}`)
    }
  })

  it("every named code but LSP's RequestCancelled and RequestFailed is reserved; only the kernel's own are server errors", () => {
    const named = {
      ParseError: ErrorCode.ParseError,
      InvalidRequest: ErrorCode.InvalidRequest,
      MethodNotFound: ErrorCode.MethodNotFound,
      InvalidParams: ErrorCode.InvalidParams,
      InternalError: ErrorCode.InternalError,
      ServerNotInitialized: ErrorCode.ServerNotInitialized,
      ShuttingDown: ErrorCode.ShuttingDown
    }
    for (const [name, code] of Object.entries(named)) assert.isTrue(ErrorCode.isReserved(code), name)
    // -32800 lies in LSP's own reserved range (-32899 ..= -32800), below JSON-RPC's.
    assert.isFalse(ErrorCode.isReserved(ErrorCode.RequestCancelled))
    assert.isFalse(ErrorCode.isServerError(ErrorCode.RequestCancelled))
    assert.isFalse(ErrorCode.isReserved(ErrorCode.RequestFailed))
    assert.isFalse(ErrorCode.isServerError(ErrorCode.RequestFailed))
    const serverErrors = Object.entries(named).filter(([, code]) => ErrorCode.isServerError(code)).map(([name]) => name)
    assert.deepStrictEqual(serverErrors, ["ServerNotInitialized", "ShuttingDown"])
  })
})
