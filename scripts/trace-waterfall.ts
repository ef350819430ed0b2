/**
 * docs/tracing.md's waterfall (`docs/trace-waterfall.svg`): the spans of one trace across the process boundary, drawn
 * from the scenario the kernel's trace test asserts (`packages/kernel/test/traceScenario.ts`: host → server → host over
 * two peers, in-memory exporters, on the TestClock). The scenario is deterministic (TestClock times, numbered span
 * ids), so the picture is too, and `--check` can tell when the code no longer draws the committed one.
 *
 * Usage: `pnpm tsx scripts/trace-waterfall.ts` writes the SVG; `--check` (run by `pnpm check`) exits with 1 when the
 * committed file differs from what the scenario draws now.
 *
 * @since 0.3.0
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Url from "node:url"
import { type Recorded, run, timings } from "../packages/kernel/test/traceScenario.js"

const root = Path.resolve(Path.dirname(Url.fileURLToPath(import.meta.url)), "..")
const file = Path.join(root, "docs", "trace-waterfall.svg")

const escape = (text: string): string => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
const fixed = (n: number): string => String(Math.round(n * 10) / 10)

const colours = { host: "#3b6ea5", server: "#c0722a" } as const

/** The spans as rows, each under its parent (depth-first, in start order), with its depth. */
const rowsOf = (spans: ReadonlyArray<Recorded>): Array<{ readonly span: Recorded; readonly depth: number }> => {
  const rows: Array<{ span: Recorded; depth: number }> = []
  const visit = (span: Recorded, depth: number) => {
    rows.push({ span, depth })
    for (const child of spans.filter((s) => s.parent?.spanId === span.spanId)) visit(child, depth + 1)
  }
  for (const top of spans.filter((s) => s.parent === undefined)) visit(top, 0)
  return rows
}

export const render = (spans: ReadonlyArray<Recorded>): string => {
  const rows = rowsOf(spans)
  const end = Math.max(...spans.map((s) => s.endMillis)) + 1
  const left = 330
  const width = 1010
  const plot = width - left - 40
  const x = (ms: number) => left + (ms / end) * plot
  const top = 78
  const rowHeight = 46
  const height = top + rows.length * rowHeight + 76
  const out: Array<string> = []
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>`,
    `<text x="${
      width / 2
    }" y="22" text-anchor="middle" font-size="14" font-weight="bold">One trace across the process boundary: host → server → host (MCP's trace context in params._meta)</text>`,
    `<text x="${
      width / 2
    }" y="40" text-anchor="middle" fill="#555">both sides' in-memory exporters; TestClock times: ${timings.link} ms per message each way, each handler's work as given</text>`
  )
  // Time axis: a line per millisecond.
  for (let ms = 0; ms <= end; ms++) {
    out.push(
      `<line x1="${fixed(x(ms))}" y1="${top - 8}" x2="${fixed(x(ms))}" y2="${
        top + rows.length * rowHeight
      }" stroke="#eee"/>`,
      `<text x="${fixed(x(ms))}" y="${top - 14}" text-anchor="middle" fill="#888" font-size="10">${ms} ms</text>`
    )
  }
  const rowOf = new Map(rows.map((row, i) => [row.span.spanId, i]))
  const barY = (i: number) => top + i * rowHeight + 8
  rows.forEach(({ depth, span }, i) => {
    const y = barY(i)
    const from = x(span.startMillis)
    const w = Math.max(x(span.endMillis) - from, 3)
    out.push(
      `<text x="${12 + depth * 18}" y="${y + 15}" font-weight="bold" fill="${colours[span.side]}">${span.side}</text>`,
      `<text x="${62 + depth * 18}" y="${y + 15}">${escape(span.name)}</text>`,
      `<text x="${62 + depth * 18}" y="${
        y + 29
      }" fill="#888" font-size="10">kind ${span.kind} · span ${span.spanId}</text>`,
      `<rect x="${fixed(from)}" y="${y}" width="${fixed(w)}" height="20" fill="${colours[span.side]}" rx="3"/>`,
      `<text x="${fixed(from + w + 6)}" y="${y + 15}" fill="#333">${span.endMillis - span.startMillis} ms</text>`
    )
    if (span.parent === undefined) return
    const parentRow = rowOf.get(span.parent.spanId)
    if (parentRow === undefined) return
    // The link from the parent's bar down into this one; dashed when it crossed the wire as a traceparent.
    const px = fixed(from + 6)
    out.push(
      `<path d="M${px},${barY(parentRow) + 20} L${px},${y}" fill="none" stroke="#555" stroke-width="1.2"${
        span.parent.external ? ` stroke-dasharray="4 3"` : ""
      } marker-end="url(#arrow)"/>`
    )
    if (span.parent.external) {
      out.push(
        `<text x="${fixed(from + 8)}" y="${
          y - 3
        }" fill="#555" font-size="10" font-style="italic">parent from _meta.traceparent 00-${
          span.parent.traceId.slice(0, 8)
        }…-${span.parent.spanId}-01</text>`
      )
    }
  })
  const legendY = top + rows.length * rowHeight + 24
  out.push(
    `<rect x="12" y="${legendY}" width="14" height="14" fill="${colours.host}" rx="2"/>`,
    `<text x="32" y="${legendY + 11}">host process's spans</text>`,
    `<rect x="190" y="${legendY}" width="14" height="14" fill="${colours.server}" rx="2"/>`,
    `<text x="210" y="${legendY + 11}">server process's spans</text>`,
    `<line x1="380" y1="${legendY + 7}" x2="420" y2="${legendY + 7}" stroke="#555" stroke-width="1.2"/>`,
    `<text x="426" y="${legendY + 11}">parent in the same process</text>`,
    `<line x1="600" y1="${legendY + 7}" x2="640" y2="${
      legendY + 7
    }" stroke="#555" stroke-width="1.2" stroke-dasharray="4 3"/>`,
    `<text x="646" y="${legendY + 11}">parent across the wire (W3C traceparent)</text>`,
    `<text x="12" y="${legendY + 36}" fill="#555">every span: trace ${spans[0]!.traceId}</text>`,
    `</svg>`
  )
  return out.join("\n") + "\n"
}

const main = async () => {
  const { spans } = await Effect.runPromise(run)
  const traces = new Set(spans.map((span) => span.traceId))
  if (traces.size !== 1) throw new Error(`expected one trace, got ${[...traces].join(", ")}`)
  const svg = render(spans)
  if (process.argv.includes("--check")) {
    const committed = Fs.existsSync(file) ? Fs.readFileSync(file, "utf8") : ""
    if (committed !== svg) {
      process.stderr.write(
        `${
          Path.relative(root, file)
        } is not what the trace scenario draws now: run pnpm tsx scripts/trace-waterfall.ts\n`
      )
      process.exit(1)
    }
    return
  }
  Fs.writeFileSync(file, svg)
  process.stderr.write(`wrote ${Path.relative(root, file)} (${spans.length} spans)\n`)
}

await main()
