/**
 * The smallest Hermes extension (docs/writing-an-extension.md). Run it under the headless host:
 *
 *   examples/headless-host/bin/hermes-host --extension "node_modules/.bin/tsx examples/hermes-hello.ts"
 */
import * as NodeExtension from "@lifeline/hermes-node/NodeExtension"
import * as Editor from "@lifeline/hermes/Editor"
import * as Extension from "@lifeline/hermes/Extension"
import * as Effect from "effect/Effect"

NodeExtension.runMain(Extension.make({
  name: "hello",
  version: "1.0.0",
  commands: {
    "hello.sign": {
      title: "Sign the message",
      run: () => Effect.asVoid(Editor.patchMessage([{ path: "MSH-3", value: "HELLO" }]))
    }
  }
}))
