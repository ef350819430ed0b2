/**
 * The conformance kit's `--html` report: one self-contained file (no script, no external resource; a
 * Content-Security-Policy says so) with the scorecard as a table and the main run as an SVG timeline drawn to scale:
 * spawn, `initialize`, commands, requests served, windows, `shutdown`, the end of stdin, signals and the exit. Every
 * text the extension chose is made visible (`visible`) and then HTML-escaped.
 */
import { visible } from "../TerminalText.js"
import type { Mark, MarkKind } from "./conformanceHost.js"
import type { Summary } from "./conformanceReport.js"
import { count } from "./conformanceReport.js"

/** Text for element content and quoted attribute values. */
export const escapeHtml = (text: string): string =>
  visible(text).replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll("\"", "&quot;")
    .replaceAll("'", "&#39;")

const lanes: ReadonlyArray<{ readonly name: string; readonly kinds: ReadonlyArray<MarkKind> }> = [
  { name: "process", kinds: ["spawn", "exit"] },
  { name: "initialize", kinds: ["initialize", "notification"] },
  { name: "commands", kinds: ["command"] },
  { name: "requests served", kinds: ["request", "ping"] },
  { name: "windows", kinds: ["window"] },
  { name: "shutdown", kinds: ["shutdown", "stdin", "signal"] }
]

const colors: Record<MarkKind, string> = {
  spawn: "#2563eb",
  exit: "#2563eb",
  initialize: "#7c3aed",
  notification: "#7c3aed",
  command: "#0891b2",
  request: "#16a34a",
  ping: "#65a30d",
  window: "#d97706",
  shutdown: "#dc2626",
  stdin: "#9f1239",
  signal: "#000000"
}

/** A step of 1, 2 or 5 × 10^k ms that gives about eight ticks over `total`. */
const tickStep = (total: number): number => {
  const rough = Math.max(total / 8, 1)
  const power = 10 ** Math.floor(Math.log10(rough))
  return [1, 2, 5, 10].map((f) => f * power).find((step) => step >= rough) ?? 10 * power
}

/** The main run as an SVG, to scale: x is time since the spawn. */
export const timeline = (marks: ReadonlyArray<Mark>): string => {
  const left = 130
  const width = 960
  const laneHeight = 34
  const top = 24
  const height = top + lanes.length * laneHeight + 10
  const total = Math.max(1, ...marks.map((m) => m.end ?? m.at)) * 1.03
  const x = (ms: number) => (left + (ms / total) * (width - left - 12)).toFixed(1)
  const parts: Array<string> = []
  const step = tickStep(total)
  for (let t = 0; t <= total; t += step) {
    parts.push(
      `<line x1="${x(t)}" y1="${top - 6}" x2="${x(t)}" y2="${height - 8}" stroke="#e5e7eb"/>`,
      `<text x="${x(t)}" y="${top - 10}" font-size="10" text-anchor="middle" fill="#6b7280">${t} ms</text>`
    )
  }
  const exit = marks.find((m) => m.kind === "exit")
  /** A small caption above a mark, kept inside the drawing. */
  const caption = (at: number, y: number, text: string) => {
    const right = Number(x(at)) > width * 0.7
    return `<text x="${x(at)}" y="${y + 5}" font-size="9" fill="#374151" text-anchor="${right ? "end" : "start"}">` +
      `${escapeHtml(text)}</text>`
  }
  lanes.forEach((lane, i) => {
    const y = top + i * laneHeight
    const own = marks.filter((m) => lane.kinds.includes(m.kind))
    const counted = lane.name === "commands" || lane.name === "requests served" || lane.name === "windows"
    parts.push(
      `<text x="4" y="${y + 20}" font-size="12" fill="#111827">${lane.name}${counted ? ` (${own.length})` : ""}</text>`
    )
    if (lane.name === "process") {
      const end = exit?.at ?? total / 1.03
      parts.push(
        `<rect x="${x(0)}" y="${y + 12}" width="${(Number(x(end)) - left).toFixed(1)}" height="10" fill="#dbeafe">` +
          `<title>the process: ${end} ms</title></rect>`,
        caption(0, y, own[0]?.label ?? "spawn"),
        ...(exit === undefined ? [] : [caption(exit.at, y, `${exit.label} at ${exit.at} ms`)])
      )
    }
    if (lane.name === "initialize" || lane.name === "shutdown") {
      const span = own.find((m) => m.end !== undefined)
      if (span !== undefined) parts.push(caption(span.at, y, `${span.label}: ${span.end! - span.at} ms`))
    }
    for (const mark of own) {
      const title = `<title>${escapeHtml(mark.label)}: ${mark.at} ms${
        mark.end === undefined ? "" : ` → ${mark.end} ms (${mark.end - mark.at} ms)`
      }</title>`
      if (mark.end !== undefined) {
        const w = Math.max(2, Number(x(mark.end)) - Number(x(mark.at)))
        parts.push(
          `<rect x="${x(mark.at)}" y="${y + 8}" width="${w.toFixed(1)}" height="18" rx="2" fill="${
            colors[mark.kind]
          }" ` +
            `fill-opacity="0.55" class="mark ${mark.kind}">${title}</rect>`
        )
      } else {
        const cx = Number(x(mark.at))
        parts.push(
          `<path d="M ${cx} ${y + 7} l 6 10 l -6 10 l -6 -10 z" fill="${
            colors[mark.kind]
          }" class="mark ${mark.kind}">` +
            `${title}</path>`
        )
      }
    }
  })
  return `<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
    `viewBox="0 0 ${width} ${height}" role="img" aria-label="timeline of the main run, ${
      Math.round(total / 1.03)
    } ms">` +
    parts.join("") + `</svg>`
}

const style = `body{font-family:system-ui,sans-serif;margin:2em;color:#111827}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #e5e7eb;padding:4px 8px;
text-align:left;vertical-align:top}td.ms{text-align:right;white-space:nowrap}ul{margin:0;padding-left:1.2em}
.rule{color:#6b7280;font-size:11px}.status{font-weight:bold;white-space:nowrap}tr.pass .status{color:#15803d}
tr.fail .status{color:#b91c1c}tr.warn .status{color:#b45309}tr.na .status{color:#6b7280}tr.fail{background:#fef2f2}
code{font-size:12px}.verdict{font-size:18px}`

/** The whole report. */
export const html = (summary: Summary): string => {
  const failed = count(summary.checks, "fail")
  const rows = summary.checks.map((check) => {
    const css = check.status === "n/a" ? "na" : check.status
    const evidence = check.evidence.map((line) => `<li>${escapeHtml(line)}</li>`).join("")
    return `<tr class="${css}" data-id="${escapeHtml(check.id)}" data-status="${check.status}">` +
      `<td><code>${escapeHtml(check.id)}</code></td><td class="status">${check.status}</td>` +
      `<td class="ms">${check.ms === undefined ? "" : `${check.ms} ms`}</td>` +
      `<td><ul>${evidence}</ul><div class="rule">${escapeHtml(check.rule)}</div></td></tr>`
  }).join("\n")
  const who = summary.name === null
    ? "no valid answer to initialize"
    : `${escapeHtml(summary.name)} ${escapeHtml(summary.version ?? "")}, ${summary.commandCount} command(s)`
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Hermes conformance: ${escapeHtml(summary.name ?? summary.command)}</title>
<style>${style}</style></head>
<body>
<h1>Hermes extension conformance</h1>
<p><code>${escapeHtml(summary.command)}</code>: ${who}</p>
<p class="verdict" id="verdict">${failed === 0 ? "✔ conformant" : "✘ not conformant"}: ${
    count(summary.checks, "pass")
  } passed,
${failed} failed, ${count(summary.checks, "warn")} warned, ${count(summary.checks, "n/a")} not applicable,
in ${(summary.elapsedMs / 1000).toFixed(1)} s</p>
<h2>Scorecard</h2>
<table id="scorecard"><thead><tr><th>check</th><th>status</th><th>time</th><th>evidence and rule</th></tr></thead>
<tbody>
${rows}
</tbody></table>
<h2>The main run</h2>
<p>Time since the spawn, to scale; hover a mark for its details.</p>
${timeline(summary.timeline)}
</body></html>
`
}
