/**
 * The HL7 extension's executable: `examples/hl7-extension/bin/hl7-extension` runs this file. It speaks the Hermes
 * protocol on stdin/stdout and logs on stderr.
 */
import { runExtension } from "../hermes-node.js"
import { hl7Extension } from "./extension.js"

runExtension(hl7Extension)
