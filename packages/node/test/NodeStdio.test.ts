import { assert, describe, it } from "@effect/vitest"
import { Framing } from "@lifeline/jsonrpc"
import { Transport } from "@lifeline/kernel"
import { NodeStdio } from "@lifeline/node"
import { Deferred, Effect, Exit, Fiber, Option, Scope, Stream } from "effect"
import { PassThrough, Writable } from "node:stream"
import { unsafeGuard } from "../src/internal/guardedStream.js"
import { makeWriter } from "../src/internal/streamWriter.js"

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text)

/** A writable that records what reaches it, as one string. */
const makeSink = () => {
  const chunks: Array<Buffer> = []
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(Buffer.from(chunk))
      callback()
    }
  })
  return { stream, text: () => Buffer.concat(chunks).toString("utf8") }
}

const makeStreams = () => {
  const stdin = new PassThrough()
  const stdout = makeSink()
  const stderr = makeSink()
  return { stdin, stdout, stderr, options: { stdin, stdout: stdout.stream, stderr: stderr.stream } }
}

const epipe = () => Object.assign(new Error("write EPIPE"), { code: "EPIPE" })

/** Lets Node deliver what was written to a stream: its callbacks run on the event loop, not on a fiber. */
const tick = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

describe("NodeStdio", () => {
  it.effect("sends each batch as one write, and reads stdin until it ends", () =>
    Effect.gen(function*() {
      const streams = makeStreams()
      const writes: Array<number> = []
      const original = streams.stdout.stream._write.bind(streams.stdout.stream)
      streams.stdout.stream._write = (chunk, encoding, callback) => {
        writes.push(chunk.length)
        original(chunk, encoding, callback)
      }
      const transport = yield* NodeStdio.make(streams.options)
      const frame = Framing.contentLength.encodeString(`{"jsonrpc":"2.0","method":"a"}`)
      yield* transport.send([frame, frame])
      yield* tick
      assert.deepStrictEqual(writes, [frame.length * 2])
      assert.strictEqual(streams.stdout.text(), new TextDecoder().decode(frame).repeat(2))

      const reading = yield* Effect.forkChild(Stream.runCollect(transport.incoming))
      streams.stdin.write("abc")
      yield* tick
      streams.stdin.end("def")
      const chunks = yield* Fiber.join(reading)
      assert.strictEqual(Buffer.concat(chunks).toString("utf8"), "abcdef")
    }))

  it.effect("a console.log from user code goes to stderr and the frame on stdout stays whole", () =>
    Effect.gen(function*() {
      const streams = makeStreams()
      const originalLog = globalThis.console.log
      const scope = yield* Scope.make()
      const transport = yield* NodeStdio.make(streams.options).pipe(Scope.provide(scope))
      const frame = Framing.contentLength.encodeString(`{"jsonrpc":"2.0","id":1,"result":"whole"}`)
      // eslint-disable-next-line no-console
      console.log("stray output from user code")
      streams.stdout.stream.write("stray direct write\n")
      yield* transport.send([frame])
      // eslint-disable-next-line no-console
      console.info("more stray output")
      yield* tick
      assert.strictEqual(streams.stdout.text(), new TextDecoder().decode(frame))
      assert.include(streams.stderr.text(), "stray output from user code\n")
      assert.include(streams.stderr.text(), "stray direct write\n")
      assert.include(streams.stderr.text(), "more stray output\n")
      const decoded = Framing.contentLength.unsafeMakeDecoder().push(utf8(streams.stdout.text()))
      assert.strictEqual(decoded.frames.length, 1)

      assert.notStrictEqual(globalThis.console.log, originalLog)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(globalThis.console.log, originalLog, "console.log is restored on release")
      assert.isFalse(Object.prototype.hasOwnProperty.call(streams.stdout.stream, "write"), "write is restored")
    }))

  it.effect("logs go to stderr as logfmt lines, never to stdout", () =>
    Effect.gen(function*() {
      const streams = makeStreams()
      yield* NodeStdio.make(streams.options)
      yield* Effect.logInfo("hello from the extension")
      yield* Effect.forkChild(Effect.logWarning("from a forked fiber"))
      yield* tick
      assert.strictEqual(streams.stdout.text(), "")
      assert.match(streams.stderr.text(), /level=INFO .*message="hello from the extension"/)
      assert.match(streams.stderr.text(), /level=WARN .*message="from a forked fiber"/)
    }))

  it.effect("a logged value from the other side cannot drive the terminal or forge a line", () =>
    Effect.gen(function*() {
      const streams = makeStreams()
      yield* NodeStdio.make(streams.options)
      // A clipboard write (OSC 52), a screen clear, a C1 CSI, a right-to-left override and a forged second entry.
      yield* Effect.logWarning(
        "peer stderr:",
        "\u001b]52;c;aGk=\u0007\u001b[2J\u009b31m\u202e",
        "x\nlevel=ERROR forged"
      )
      yield* tick
      const text = streams.stderr.text()
      assert.notMatch(text, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/)
      assert.strictEqual(text.split("\n").filter((line) => line.length > 0).length, 1)
      assert.include(text, "\\u001b]52;c;aGk=\\u0007\\u001b[2J\\u009b31m\\u202e")
    }))

  it.effect("the layer moves logging to stderr for the program it is provided to", () =>
    Effect.gen(function*() {
      const streams = makeStreams()
      yield* Effect.gen(function*() {
        yield* Transport.Transport
        yield* Effect.logInfo("through the layer")
      }).pipe(Effect.provide(NodeStdio.layer(streams.options)))
      yield* tick
      assert.strictEqual(streams.stdout.text(), "")
      assert.include(streams.stderr.text(), "through the layer")
    }))

  it.effect("a host that does not read pushes back: send waits for drain", () =>
    Effect.gen(function*() {
      let release: (() => void) | undefined
      const received: Array<number> = []
      const slow = new Writable({
        highWaterMark: 8,
        write(chunk: Buffer, _encoding, callback) {
          received.push(chunk.length)
          release = callback
        }
      })
      const transport = yield* NodeStdio.make({ stdin: new PassThrough(), stdout: slow, stderr: makeSink().stream })
      const sent = yield* Deferred.make<void>()
      const sending = yield* Effect.forkChild(
        Effect.andThen(transport.send([utf8("0123456789")]), Deferred.succeed(sent, void 0))
      )
      yield* tick
      assert.deepStrictEqual(received, [10])
      assert.isFalse(yield* Deferred.isDone(sent), "the write went over the high-water mark: send waits")
      release!()
      yield* Fiber.join(sending)
      assert.isTrue(yield* Deferred.isDone(sent))
    }))

  it.effect("sends after end fail with Closed; a failed stdout fails sends with Write", () =>
    Effect.gen(function*() {
      const streams = makeStreams()
      const transport = yield* NodeStdio.make(streams.options)
      yield* transport.end
      yield* transport.end
      const closed = yield* Effect.flip(transport.send([utf8("late")]))
      assert.strictEqual(closed.reason, "Closed")

      const broken = new Writable({
        write(_chunk, _encoding, callback) {
          callback(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }))
        }
      })
      const other = yield* NodeStdio.make({ stdin: new PassThrough(), stdout: broken, stderr: makeSink().stream })
      yield* other.send([utf8("first")])
      yield* tick
      const failed = yield* Effect.flip(other.send([utf8("second")]))
      assert.strictEqual(failed.reason, "Write")
      assert.include(failed.message, "EPIPE")
    }))

  it.effect("a stdout that breaks after a send fails incoming with a Write error, without waiting for another send", () =>
    Effect.gen(function*() {
      const broken = new Writable({
        write(_chunk, _encoding, callback) {
          callback(epipe())
        }
      })
      const transport = yield* NodeStdio.make({ stdin: new PassThrough(), stdout: broken, stderr: makeSink().stream })
      const reading = yield* Effect.forkChild(Effect.flip(Stream.runDrain(transport.incoming)))
      yield* transport.send([utf8("the answer nobody reads")])
      const error = yield* Fiber.join(reading)
      assert.strictEqual(error.reason, "Write")
      assert.include(error.message, "EPIPE")
    }))

  it.effect("ending stdout is a half-close: incoming keeps flowing after stdout has closed", () =>
    Effect.gen(function*() {
      const streams = makeStreams()
      const transport = yield* NodeStdio.make(streams.options)
      const reading = yield* Effect.forkChild(Stream.runCollect(transport.incoming))
      yield* transport.end
      yield* tick
      assert.isTrue(streams.stdout.stream.closed)
      streams.stdin.end("after")
      const chunks = yield* Fiber.join(reading)
      assert.strictEqual(Buffer.concat(chunks).toString("utf8"), "after")
    }))

  it.effect("a broken stderr drops log lines and redirected output instead of killing the process", () =>
    Effect.gen(function*() {
      let writes = 0
      const stderr = new Writable({
        write(_chunk, _encoding, callback) {
          writes++
          callback(epipe())
        }
      })
      const stdout = makeSink()
      const transport = yield* NodeStdio.make({ stdin: new PassThrough(), stdout: stdout.stream, stderr })
      yield* Effect.logInfo("the first line meets EPIPE")
      yield* tick
      assert.isTrue(stderr.destroyed)
      yield* Effect.logInfo("dropped")
      // eslint-disable-next-line no-console
      console.log("dropped too")
      stdout.stream.write("and this")
      yield* tick
      assert.strictEqual(writes, 1)
      const frame = utf8("still serving")
      yield* transport.send([frame])
      yield* tick
      assert.strictEqual(stdout.text(), "still serving")
    }))

  it("unsafeGuard keeps a stream's errors from becoming uncaught, and counts what it drops afterwards", async () => {
    const stream = new Writable({
      write(_chunk, _encoding, callback) {
        callback(Object.assign(new Error("write EAGAIN"), { code: "EAGAIN" }))
      }
    })
    const guard = unsafeGuard(stream)
    assert.strictEqual(unsafeGuard(stream), guard, "one guard per stream")
    guard.write("fails\n")
    await new Promise<void>((resolve) => setImmediate(resolve))
    guard.write("dropped\n")
    guard.write("dropped\n")
    assert.strictEqual(guard.dropped(), 2)
    // A direct write to the destroyed stream is no uncaught exception either.
    stream.write("direct")
    await new Promise<void>((resolve) => setImmediate(resolve))
  })

  it.effect("a failing stdin fails incoming with a Read error", () =>
    Effect.gen(function*() {
      const streams = makeStreams()
      const transport = yield* NodeStdio.make(streams.options)
      const reading = yield* Effect.forkChild(Effect.flip(Stream.runDrain(transport.incoming)))
      yield* tick
      streams.stdin.destroy(new Error("EIO"))
      const error = yield* Fiber.join(reading)
      assert.strictEqual(error.reason, "Read")
    }))

  it.effect("awaitHostExit completes when the process is gone", () =>
    Effect.gen(function*() {
      const gone = yield* NodeStdio.awaitHostExit(2 ** 22 + 12345, { interval: "1 millis" }).pipe(
        Effect.timeoutOption("1 second")
      )
      assert.isTrue(Option.isSome(gone))
    }))

  it.effect("awaitHostExit keeps waiting while the process lives", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.forkChild(NodeStdio.awaitHostExit(process.pid, { interval: "10 millis" }))
      yield* Effect.repeat(Effect.yieldNow, { times: 20 })
      assert.isTrue(fiber.pollUnsafe() === undefined)
      yield* Fiber.interrupt(fiber)
    }))

  it("trySend writes at once, corks a tick's writes into one, and declines when ended", async () => {
    const writes: Array<number> = []
    const sink = new Writable({
      highWaterMark: 1024,
      writev: (chunks, callback) => {
        writes.push(chunks.length)
        callback()
      },
      write: (_chunk, _encoding, callback) => {
        writes.push(1)
        callback()
      }
    })
    const writer = makeWriter(sink)
    assert.isTrue(writer.trySend!(new Uint8Array([1])))
    assert.isTrue(writer.trySend!(new Uint8Array([2])))
    assert.isTrue(writer.trySend!(new Uint8Array([3])))
    await new Promise<void>((resolve) => setImmediate(resolve))
    assert.deepStrictEqual(writes, [3])
    // Past the high-water mark Node asks for a drain: the fast path declines until then.
    assert.isTrue(writer.trySend!(new Uint8Array(2048)))
    assert.isFalse(writer.trySend!(new Uint8Array([4])))
    await new Promise<void>((resolve) => setImmediate(resolve))
    assert.isTrue(writer.trySend!(new Uint8Array([5])))
    await Effect.runPromise(writer.end)
    assert.isFalse(writer.trySend!(new Uint8Array([6])))
  })

  it("bytes through trySend (corked), write, flushed and end keep their order and all leave", async () => {
    const bytes: Array<number> = []
    const sink = new Writable({
      writev: (chunks, callback) => {
        for (const { chunk } of chunks) bytes.push(...chunk)
        callback()
      },
      write: (chunk, _encoding, callback) => {
        bytes.push(...chunk)
        callback()
      }
    })
    const finished = new Promise<void>((resolve) => sink.on("finish", resolve))
    const writer = makeWriter(sink)
    assert.isTrue(writer.trySend!(new Uint8Array([1])))
    await Effect.runPromise(writer.write([new Uint8Array([2]), new Uint8Array([3])]))
    assert.isTrue(writer.trySend!(new Uint8Array([4])))
    await Effect.runPromise(writer.flushed)
    assert.deepStrictEqual(bytes, [1, 2, 3, 4])
    assert.isTrue(writer.trySend!(new Uint8Array([5])))
    await Effect.runPromise(writer.end)
    await finished
    assert.deepStrictEqual(bytes, [1, 2, 3, 4, 5])
    assert.strictEqual(sink.writableLength, 0)
  })

  it("a batch of small frames is written as one buffer, a large batch corked without copying", async () => {
    const calls: Array<Array<number>> = []
    const sink = new Writable({
      highWaterMark: 1024 * 1024,
      writev: (chunks, callback) => {
        calls.push(chunks.map((c) => (c.chunk as Uint8Array).length))
        callback()
      },
      write: (chunk: Uint8Array, _encoding, callback) => {
        calls.push([chunk.length])
        callback()
      }
    })
    const writer = makeWriter(sink)
    await Effect.runPromise(writer.write([new Uint8Array(10), new Uint8Array(20)]))
    await Effect.runPromise(writer.write([new Uint8Array(40 * 1024).fill(1), new Uint8Array(40 * 1024).fill(2)]))
    await new Promise<void>((resolve) => setImmediate(resolve))
    assert.deepStrictEqual(calls, [[30], [40 * 1024, 40 * 1024]])
  })
})
