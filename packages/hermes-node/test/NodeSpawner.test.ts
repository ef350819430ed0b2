import { assert, describe, it } from "@effect/vitest"
import { NodeSpawner } from "@lifeline/hermes-node"

describe("NodeSpawner.splitCommandLine", () => {
  const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
    ["", []],
    ["   ", []],
    ["node ext.js", ["node", "ext.js"]],
    ["  node \t ext.js  \n--flag ", ["node", "ext.js", "--flag"]],
    [`node "my extension.js" --name 'a b'`, ["node", "my extension.js", "--name", "a b"]],
    [`a'b c'd`, ["ab cd"]],
    [`'' ""`, ["", ""]],
    [`a\\ b`, ["a b"]],
    [`"a \\" b"`, [`a " b`]],
    [`'a \\ b'`, ["a \\ b"]],
    [`"it's"`, ["it's"]],
    [`'say "hi"'`, [`say "hi"`]],
    ["trailing\\", ["trailing\\"]],
    [`"unclosed quote`, ["unclosed quote"]],
    ["tsx examples/hermes-hello.ts", ["tsx", "examples/hermes-hello.ts"]]
  ]
  for (const [line, words] of cases) {
    it(JSON.stringify(line), () => {
      assert.deepStrictEqual(NodeSpawner.splitCommandLine(line), words)
    })
  }
})
