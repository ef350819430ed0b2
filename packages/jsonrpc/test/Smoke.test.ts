import { describe, it, assert } from "@effect/vitest"
import { Message } from "@lifeline/jsonrpc"
describe("smoke", () => { it("classifies", () => { assert.strictEqual(Message.classify({ jsonrpc: "2.0", id: 1, method: "a" })._tag, "Request") }) })
