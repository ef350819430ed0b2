import { afterEach, assert, describe, it } from "@effect/vitest"
import { StdioClientTransport } from "@lifeline/mcp"

const saved = { ...process.env }
afterEach(() => {
  for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name]
  Object.assign(process.env, saved)
})

describe("getDefaultEnvironment", () => {
  it("keeps the allowlist only, without unset names and exported shell functions", () => {
    process.env.HOME = "/home/someone"
    process.env.SHELL = "() { echo exported function; }"
    process.env.AWS_SECRET_ACCESS_KEY = "never"
    delete process.env.LOGNAME
    const env = StdioClientTransport.getDefaultEnvironment()
    assert.strictEqual(env.HOME, "/home/someone")
    assert.isUndefined(env.SHELL)
    assert.isUndefined(env.AWS_SECRET_ACCESS_KEY)
    assert.isFalse("LOGNAME" in env)
    for (const name of Object.keys(env)) assert.include(StdioClientTransport.DEFAULT_INHERITED_ENV_VARS, name)
  })
})

describe("StdioClientTransport before start", () => {
  it("has no pid, a piped stderr at once, and refuses to send", async () => {
    const transport = new StdioClientTransport.StdioClientTransport({ command: "true", stderr: "pipe" })
    assert.isNull(transport.pid)
    assert.isNotNull(transport.stderr)
    assert.isNull(new StdioClientTransport.StdioClientTransport({ command: "true" }).stderr)
    const error = await transport.send({ jsonrpc: "2.0", method: "ping", id: 1 }).then(() => undefined, (e) => e)
    assert.match(String(error), /Not connected/)
    let closes = 0
    transport.onclose = () => closes++
    // A transport never started closes without a process to stop, and without onclose (as the SDK's).
    await transport.close()
    assert.strictEqual(closes, 0)
  })
})
