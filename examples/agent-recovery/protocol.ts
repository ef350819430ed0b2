/**
 * What the agent and its tool worker say to each other over the worker's stdin and stdout (JSON-RPC 2.0,
 * Content-Length framing): the agent asks the worker to run one tool; the worker tells the agent when the tool has
 * started.
 */
import * as Method from "@lifeline/kernel/Method"
import * as Protocol from "@lifeline/kernel/Protocol"
import * as Schema from "effect/Schema"

/** Runs one tool call. `key` is the journal key of the step, `attempt` which attempt this is (a retry is 2 or more). */
export const RunTool = Method.request("tool/run", {
  params: Schema.Struct({
    key: Schema.String,
    tool: Schema.String,
    input: Schema.String,
    attempt: Schema.Int,
    ms: Schema.Number
  }),
  result: Schema.Struct({ output: Schema.String })
})

/** The worker has started the tool call of `key`. */
export const ToolStarted = Method.notification("tool/started", {
  params: Schema.Struct({ key: Schema.String, pid: Schema.Int })
})

/** The worker's side. */
export const Worker = Protocol.make({ serves: [RunTool], calls: [ToolStarted] })

/** The agent's side. */
export const Agent = Protocol.flip(Worker)
