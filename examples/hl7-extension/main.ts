/**
 * The HL7 extension's executable: `examples/hl7-extension/bin/hl7-extension` runs this file. It speaks the Hermes
 * protocol on stdin/stdout and logs on stderr.
 */
import * as NodeExtension from "@lifeline/hermes-node/NodeExtension"
import { hl7Extension } from "./extension.js"

NodeExtension.runMain(hl7Extension)
