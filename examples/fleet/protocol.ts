/**
 * What a fleet runner says to a session's extension process: one request per operation.
 */
import * as Method from "@lifeline/kernel/Method"
import * as Protocol from "@lifeline/kernel/Protocol"
import * as Schema from "effect/Schema"

/** Works `ms` milliseconds on operation `key` (attempt `attempt`), then answers. */
export const Work = Method.request("work", {
  params: Schema.Struct({ key: Schema.String, attempt: Schema.Int, ms: Schema.Number }),
  result: Schema.Struct({ key: Schema.String, pid: Schema.Int, runner: Schema.Int }),
  // The first call to a session's new extension also waits for the process to start, which takes seconds on a
  // loaded machine: the peer's default (5 s) would fail it.
  timeout: "60 seconds"
})

export const Extension = Protocol.make({ serves: [Work] })
export const Host = Protocol.flip(Extension)
