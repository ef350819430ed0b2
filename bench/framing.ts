/**
 * Decode throughput of the framing codecs, against vscode-jsonrpc's reader and a minimal hand-written decoder, in one
 * run on the same bytes. Run with `pnpm tsx bench/framing.ts`; `run()` returns the rows for `bench/index.ts`.
 *
 * Every decoder gets the same pre-cut chunks, Node `Buffer`s as a stdin `data` event delivers them, and must decode
 * the expected number of frames or the bench throws. vscode-jsonrpc is driven through its public `StreamMessageReader`
 * (from `vscode-jsonrpc/node`) over a real `PassThrough`: the chunks are emitted as `data` events, exactly what a
 * flowing stream does, without the stream's own scheduling (which neither side would be charged for). Its reader
 * always runs `JSON.parse`, so it is compared with the "ours + JSON.parse" row. The encode rows compare the
 * strategies `encodeString` chose between.
 */
import { Effect, Stream } from "effect"
import { PassThrough } from "node:stream"
import { pathToFileURL } from "node:url"
import { StreamMessageReader } from "vscode-jsonrpc/node.js"
import { Framing } from "../packages/jsonrpc/src/index.js"

/** One measured decoder on one workload. */
export interface Row {
  readonly workload: string
  readonly decoder: string
  readonly frames: number
  readonly bytes: number
  readonly medianMs: number
  readonly mbPerSecond: number
  readonly messagesPerSecond: number
}

interface Workload {
  readonly name: string
  readonly frames: number
  readonly bytes: number
  readonly chunks: ReadonlyArray<Buffer>
  /** How many frames are complete once `chunks[k]` has been read. */
  readonly completeAfter: ReadonlyArray<number>
}

const CHUNK_BYTES = 64 * 1024

const message = (id: number, bodyBytes: number): string => {
  const head =
    `{"jsonrpc":"2.0","id":${id},"method":"textDocument/didChange","params":{"uri":"file:///é/${id}","text":"`
  const tail = "\"}}"
  const room = bodyBytes - Buffer.byteLength(head) - tail.length
  const text = "lorem ipsum dolor sit amet, consectetur adipiscing elit ".repeat(Math.ceil(room / 56) + 1)
  return head + text.slice(0, room) + tail
}

const cut = (stream: Uint8Array): ReadonlyArray<Buffer> => {
  const chunks: Array<Buffer> = []
  // Each chunk owns its memory, as a stream's chunks do.
  for (let offset = 0; offset < stream.length; offset += CHUNK_BYTES) {
    chunks.push(Buffer.from(stream.subarray(offset, offset + CHUNK_BYTES)))
  }
  return chunks
}

const makeWorkload = (name: string, frames: number, bodyBytes: number, framing: Framing.Framing): Workload => {
  const encoded: Array<Uint8Array> = []
  let bytes = 0
  for (let id = 0; id < frames; id++) {
    const frame = framing.encodeString(message(id, bodyBytes))
    encoded.push(frame)
    bytes += frame.length
  }
  const stream = new Uint8Array(bytes)
  let offset = 0
  for (const frame of encoded) {
    stream.set(frame, offset)
    offset += frame.length
  }
  const chunks = cut(stream)
  const completeAfter: Array<number> = []
  const decoder = framing.unsafeMakeDecoder()
  let complete = 0
  for (const chunk of chunks) {
    complete += decoder.push(chunk).frames.length
    completeAfter.push(complete)
  }
  return { name, frames, bytes, chunks, completeAfter }
}

/**
 * The fastest straightforward Content-Length decoder: exactly `Content-Length: <digits>\r\n\r\n`, no limits, no
 * resynchronisation, bodies inside a chunk as views, bodies across chunks copied once.
 */
export class ReferenceDecoder {
  private static readonly prefix = Buffer.from("Content-Length: ")
  /** Body length in progress, or -1 between frames. */
  private length = -1
  private have = 0
  private pieces: Array<Uint8Array> = []
  /** An incomplete header left over from the previous chunk. */
  private head: Uint8Array | undefined = undefined

  push(chunk: Uint8Array, frames: Array<Uint8Array>): void {
    let i = 0
    if (this.length >= 0) {
      const need = this.length - this.have
      if (need > chunk.length) {
        this.pieces.push(chunk)
        this.have += chunk.length
        return
      }
      this.pieces.push(chunk.subarray(0, need))
      frames.push(this.joinBody())
      i = need
    } else if (this.head !== undefined) {
      // Join the header remnant with enough of the chunk to finish any sane header.
      const head = this.head
      const joined = new Uint8Array(head.length + Math.min(chunk.length, 256))
      joined.set(head)
      joined.set(chunk.subarray(0, joined.length - head.length), head.length)
      this.head = undefined
      const bodyStart = this.header(joined, 0)
      if (bodyStart < 0) {
        this.head = joined
        return
      }
      i = bodyStart - head.length
    }
    const n = chunk.length
    for (;;) {
      if (this.length >= 0) {
        const end = i + this.length
        if (end <= n) {
          frames.push(chunk.subarray(i, end))
          this.length = -1
          i = end
          continue
        }
        this.pieces.push(chunk.subarray(i))
        this.have = n - i
        return
      }
      if (i >= n) return
      const bodyStart = this.header(chunk, i)
      if (bodyStart < 0) {
        this.head = chunk.slice(i)
        return
      }
      i = bodyStart
    }
  }

  /** Parses a header at `i`; sets `length` and returns the body start, or -1 if the header is incomplete. */
  private header(buffer: Uint8Array, i: number): number {
    const prefix = ReferenceDecoder.prefix
    const n = buffer.length
    if (n - i < prefix.length + 5) return -1
    for (let k = 0; k < prefix.length; k++) {
      if (buffer[i + k] !== prefix[k]) throw new Error("reference decoder: unexpected header")
    }
    let p = i + prefix.length
    let length = 0
    while (p < n) {
      const digit = buffer[p] - 48
      if (digit < 0 || digit > 9) break
      length = length * 10 + digit
      p++
    }
    if (p + 4 > n) return -1
    if (buffer[p] !== 13 || buffer[p + 1] !== 10 || buffer[p + 2] !== 13 || buffer[p + 3] !== 10) {
      throw new Error("reference decoder: unexpected header")
    }
    this.length = length
    this.have = 0
    return p + 4
  }

  private joinBody(): Uint8Array {
    const out = new Uint8Array(this.length)
    let offset = 0
    for (const piece of this.pieces) {
      out.set(piece, offset)
      offset += piece.length
    }
    this.pieces = []
    this.length = -1
    return out
  }
}

const textDecoder = new TextDecoder("utf-8", { fatal: true })

type Runner = (workload: Workload) => Promise<number>

const runReference = (parse: boolean): Runner => async ({ chunks }) => {
  const decoder = new ReferenceDecoder()
  const frames: Array<Uint8Array> = []
  let count = 0
  for (const chunk of chunks) {
    decoder.push(chunk, frames)
    if (parse) {
      for (const frame of frames) JSON.parse(textDecoder.decode(frame))
    }
    count += frames.length
    frames.length = 0
  }
  return count
}

const runOurs = (framing: Framing.Framing, parse: boolean): Runner => async ({ chunks }) => {
  const decoder = framing.unsafeMakeDecoder()
  let count = 0
  for (const chunk of chunks) {
    const step = decoder.push(chunk)
    if (step.error !== undefined) throw step.error
    if (parse) {
      for (const frame of step.frames) JSON.parse(textDecoder.decode(frame))
    }
    count += step.frames.length
  }
  const error = decoder.end()
  if (error !== undefined) throw error
  return count
}

const sources = new WeakMap<Workload, Stream.Stream<Uint8Array>>()

/**
 * One stream chunk per buffer, as a stdin stream emits them. Built once; `Stream.fromArrays` emits each array as one
 * chunk straight from a channel (`Channel.fromArray`), so the source costs less than the adapters under test.
 */
const source = (workload: Workload): Stream.Stream<Uint8Array> => {
  let stream = sources.get(workload)
  if (stream === undefined) {
    stream = Stream.fromArrays(...workload.chunks.map((chunk): ReadonlyArray<Uint8Array> => [chunk]))
    sources.set(workload, stream)
  }
  return stream
}

const runStream = (
  decode: (self: Stream.Stream<Uint8Array>) => Stream.Stream<Uint8Array, Framing.FramingError>
): Runner =>
async (workload) => Effect.runPromise(Stream.runCount(decode(source(workload))))

/**
 * The simple adapter the Channel one in Framing.ts is measured against: same output, built from stock operators
 * (Effect 3's `Stream.mapConcat` is `Stream.map` then `Stream.flattenIterable` in Effect 4).
 */
const decodeWithMapConcat = (framing: Framing.Framing) => (self: Stream.Stream<Uint8Array>) =>
  Stream.suspend(() => {
    const decoder = framing.unsafeMakeDecoder()
    let failure: Framing.FramingError | undefined
    return self.pipe(
      Stream.takeUntil(() => failure !== undefined),
      Stream.map((chunk) => {
        const step = decoder.push(chunk)
        failure = step.error
        return step.frames
      }),
      Stream.flattenIterable,
      Stream.concat(Stream.suspend(() => {
        const error = failure ?? decoder.end()
        return error === undefined ? Stream.empty : Stream.fail(error)
      }))
    )
  })

/**
 * Its reader hands each message to the listener in its own `setImmediate` turn, from an array queue it `shift`s. Fed
 * all chunks in one go, that queue holds every message and the shifts make the run quadratic (13 s for the small
 * workload), so each chunk is emitted only once the previous chunk's messages have arrived, as when a consumer keeps up
 * with stdin.
 */
const runVscode: Runner = ({ chunks, completeAfter, frames }) =>
  new Promise((resolve, reject) => {
    const readable = new PassThrough()
    const reader = new StreamMessageReader(readable)
    let count = 0
    let next = 0
    const feed = () => {
      while (next < chunks.length) {
        readable.emit("data", chunks[next])
        next++
        if (count < completeAfter[next - 1]) return
      }
    }
    reader.onError(reject)
    reader.listen(() => {
      count++
      if (count === frames) {
        reader.dispose()
        resolve(count)
      } else if (count === completeAfter[next - 1]) {
        feed()
      }
    })
    feed()
  })

const time = async (runner: Runner, workload: Workload): Promise<number> => {
  const start = process.hrtime.bigint()
  const frames = await runner(workload)
  const elapsed = Number(process.hrtime.bigint() - start) / 1e6
  if (frames !== workload.frames) throw new Error(`expected ${workload.frames} frames, decoded ${frames}`)
  return elapsed
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

const measure = async (
  workload: Workload,
  runners: ReadonlyArray<readonly [string, Runner]>,
  warmups: number,
  repeats: number
): Promise<Array<Row>> => {
  for (let w = 0; w < warmups; w++) {
    for (const [, runner] of runners) await time(runner, workload)
  }
  const samples = runners.map((): Array<number> => [])
  // Round-robin, so drift (other load, frequency scaling) spreads over every decoder alike. Each timed run follows an
  // untimed run of the same decoder, so it meets its own garbage, as in a steady state, not the previous decoder's.
  for (let r = 0; r < repeats; r++) {
    for (let k = 0; k < runners.length; k++) {
      await time(runners[k][1], workload)
      samples[k].push(await time(runners[k][1], workload))
    }
  }
  return runners.map(([decoder], k) => {
    const medianMs = median(samples[k])
    return {
      workload: workload.name,
      decoder,
      frames: workload.frames,
      bytes: workload.bytes,
      medianMs,
      mbPerSecond: workload.bytes / 1e6 / (medianMs / 1e3),
      messagesPerSecond: workload.frames / (medianMs / 1e3)
    }
  })
}

const textEncoder = new TextEncoder()

const utf8Length = (json: string): number => {
  let length = json.length
  for (let i = 0; i < json.length; i++) {
    const unit = json.charCodeAt(i)
    if (unit < 0x80) continue
    if (unit < 0x800) length += 1
    else if ((unit & 0xfc00) === 0xd800 && (json.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      length += 2
      i++
    } else length += 2
  }
  return length
}

/** The alternatives to `encodeString` (internal/buffers.ts `encodeJson`), each making the same frame. */
const encodeNaive = (json: string): Uint8Array => {
  const body = textEncoder.encode(json)
  const header = textEncoder.encode(`Content-Length: ${body.length}\r\n\r\n`)
  const out = new Uint8Array(header.length + body.length)
  out.set(header)
  out.set(body, header.length)
  return out
}

const encodeCounted = (json: string): Uint8Array => {
  const length = utf8Length(json)
  const header = `Content-Length: ${length}\r\n\r\n`
  const out = new Uint8Array(header.length + length)
  textEncoder.encodeInto(header, out)
  textEncoder.encodeInto(json, out.subarray(header.length))
  return out
}

const runEncoder = (encode: (json: string) => Uint8Array) => (messages: ReadonlyArray<string>): number => {
  let bytes = 0
  for (const json of messages) bytes += encode(json).length
  return bytes
}

/** The measured decoders and encoders, by key; `BENCH_ONLY=ours,vscode` (keys) or `run({ only })` (values) picks some. */
export const variants = {
  reference: "reference (framing only)",
  referenceParse: "reference + JSON.parse",
  ours: "ours (framing only)",
  oursParse: "ours + JSON.parse",
  vscode: "vscode-jsonrpc (+ JSON.parse)",
  streamChannel: "ours via Framing.decode (Channel)",
  streamMapConcat: "ours via map + flattenIterable adapter",
  ndjson: "ndjson (framing only)",
  encodeString: "encodeString (worst-case room, slab)",
  encodeCounted: "count UTF-8 bytes, exact buffer",
  encodeNaive: "TextEncoder.encode + copy"
} as const

/**
 * Runs every workload and returns one row per decoder and workload.
 */
export const run = async (options?: {
  readonly warmups?: number | undefined
  readonly repeats?: number | undefined
  /** Only these variants (values of `variants`); all by default. */
  readonly only?: ReadonlyArray<string> | undefined
}): Promise<ReadonlyArray<Row>> => {
  const warmups = options?.warmups ?? 1
  const repeats = options?.repeats ?? 7
  const only = options?.only
  const selected = <T>(runners: ReadonlyArray<readonly [string, T]>) =>
    only === undefined ? runners : runners.filter(([name]) => only.includes(name))
  const contentLengthRunners = selected([
    [variants.reference, runReference(false)],
    [variants.referenceParse, runReference(true)],
    [variants.ours, runOurs(Framing.contentLength, false)],
    [variants.oursParse, runOurs(Framing.contentLength, true)],
    [variants.vscode, runVscode],
    [variants.streamMapConcat, runStream(decodeWithMapConcat(Framing.contentLength))],
    [variants.streamChannel, runStream(Framing.decode(Framing.contentLength))]
  ])
  const ndjsonRunners = selected([[variants.ndjson, runOurs(Framing.ndjson, false)]])
  const rows: Array<Row> = []
  const small = "100,000 × 200 B"
  const large = "2,000 × 64 KiB"
  const workloads = [
    [small, 100_000, 200],
    [large, 2_000, 64 * 1024]
  ] as const
  const codecs = [
    [Framing.contentLength, contentLengthRunners, ""],
    [Framing.ndjson, ndjsonRunners, " (ndjson)"]
  ] as const
  for (const [name, frames, bodyBytes] of workloads) {
    for (const [framing, runners, suffix] of codecs) {
      if (runners.length > 0) {
        const workload = makeWorkload(name + suffix, frames, bodyBytes, framing)
        rows.push(...await measure(workload, runners, warmups, repeats))
      }
    }
  }
  const encoders = selected<(messages: ReadonlyArray<string>) => number>([
    [variants.encodeString, runEncoder(Framing.contentLength.encodeString)],
    [variants.encodeCounted, runEncoder(encodeCounted)],
    [variants.encodeNaive, runEncoder(encodeNaive)]
  ])
  for (const [name, frames, bodyBytes] of workloads) {
    if (encoders.length === 0) continue
    const messages = Array.from({ length: frames }, (_, id) => message(id, bodyBytes))
    const bytes = runEncoder(encodeNaive)(messages)
    // Same harness as the decoders: a runner returns its count, here of bytes written.
    const workload: Workload = { name: `encode ${name}`, frames: bytes, bytes, chunks: [], completeAfter: [] }
    const measured = await measure(
      workload,
      encoders.map(([encoder, encode]) => [encoder, async () => encode(messages)] as const),
      warmups,
      repeats
    )
    rows.push(...measured.map((row) => ({ ...row, frames, messagesPerSecond: frames / (row.medianMs / 1e3) })))
  }
  return rows
}

/**
 * A Markdown table. "vs reference" is throughput against the hand-written decoder doing the same work (framing only,
 * or framing + JSON.parse), or for encoders against `TextEncoder.encode` + copy; "vs vscode" is the speed-up over
 * vscode-jsonrpc, like for like (with JSON.parse).
 */
export const format = (rows: ReadonlyArray<Row>): string => {
  const find = (workload: string, decoder: string) =>
    rows.find((row) => row.workload === workload && row.decoder === decoder)
  const lines = [
    "| workload | decoder | median ms | MB/s | messages/s | vs reference | vs vscode |",
    "|---|---|---:|---:|---:|---:|---:|"
  ]
  const parses = (decoder: string) =>
    decoder === variants.oursParse || decoder === variants.referenceParse || decoder === variants.vscode
  for (const row of rows) {
    const baseline = row.workload.startsWith("encode")
      ? variants.encodeNaive
      : parses(row.decoder)
      ? variants.referenceParse
      : variants.reference
    const reference = find(row.workload, baseline)
    const vscode = find(row.workload, variants.vscode)
    const vsReference = reference !== undefined && row.decoder !== variants.vscode
      ? `${(reference.medianMs / row.medianMs * 100).toFixed(0)} %`
      : ""
    const vsVscode = vscode !== undefined && parses(row.decoder) && row !== vscode
      ? `${(vscode.medianMs / row.medianMs).toFixed(2)}x`
      : ""
    const perSecond = Math.round(row.messagesPerSecond).toLocaleString("en-US")
    lines.push(
      `| ${row.workload} | ${row.decoder} | ${row.medianMs.toFixed(1)} | ${
        row.mbPerSecond.toFixed(0)
      } | ${perSecond} | ${vsReference} | ${vsVscode} |`
    )
  }
  return lines.join("\n")
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const only = process.env.BENCH_ONLY?.split(",").map((key) => variants[key as keyof typeof variants] ?? key)
  const rows = await run({ only })
  console.log(`Node ${process.version}, chunks of ${CHUNK_BYTES} bytes, median of 7 runs, each after an untimed run\n`)
  console.log(format(rows))
}
