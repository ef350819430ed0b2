// The bundle entry of bin/mcp-client: scripts/run-bundled.mjs caches a bundle by its entry's base name, and the other
// examples already have a `main.ts`.
import "./main.js"
