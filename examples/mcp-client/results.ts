/**
 * What the client reads of a server's answers, validated with Schema before anything of it is used or shown: the
 * server is untrusted. Each bound below is what a generic client can show a person; an answer over one fails with a
 * `SchemaError` that names the bound, and the program reports it instead of printing the answer.
 */
import * as Schema from "effect/Schema"

/**
 * The longest message the server may write (one NDJSON line): 10 MiB, the MCP SDK's `maxBufferSize` and
 * `@lifeline/mcp`'s default. A longer one ends the connection with the kernel's framing error, before the line ends.
 */
export const maxMessageBytes = 10 * 1024 * 1024

/** The most tools one `tools/list` may return, and the longest tool name. */
export const maxTools = 1000
export const maxToolNameLength = 256
/** The most content blocks one `tools/call` result may hold. */
export const maxContentBlocks = 1000

const ToolName = Schema.String.check(Schema.isMaxLength(maxToolNameLength))

/** `tools/list`: the tools' names; `nextCursor` when there are more (this client reads the first page only). */
export const ListToolsResult = Schema.Struct({
  tools: Schema.Array(Schema.Struct({ name: ToolName })).check(Schema.isMaxLength(maxTools)),
  nextCursor: Schema.optional(Schema.String.check(Schema.isMaxLength(maxToolNameLength)))
})

/**
 * `tools/call`: its content (shown as JSON, escaped), `structuredContent`, `isError`. Under 2026-07-28 a result may
 * instead ask the client for input (`resultType: "input_required"`, multi round-trip requests): this client offers
 * none, and reports such a result as not supported.
 */
export const CallToolResult = Schema.Struct({
  resultType: Schema.optional(Schema.Literals(["complete", "input_required"])),
  content: Schema.optional(Schema.Array(Schema.Unknown).check(Schema.isMaxLength(maxContentBlocks))),
  structuredContent: Schema.optional(Schema.Unknown),
  isError: Schema.optional(Schema.Boolean)
})

export const decodeListTools = Schema.decodeUnknownEffect(ListToolsResult)
export type CallToolResult = Omit<typeof CallToolResult.Type, "resultType">

export const decodeCallTool = Schema.decodeUnknownEffect(CallToolResult)
