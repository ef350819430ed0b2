/**
 * The extension SDK's command queue: `command/execute` is a notification, so nothing else bounds how many a host
 * sends. At most `maxConcurrentCommands` run at once and `maxQueuedCommands` wait; the rest are refused, each counted,
 * and a burst of refusals is logged as two lines, not one per refusal. The SDK's loop (`extension.ts`) feeds it and
 * stops it at shutdown.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"

/** A `command/execute` accepted: it runs now, or when a running command ends. @internal */
export interface Queued<C> {
  readonly id: string
  readonly command: C
  readonly args: ReadonlyArray<unknown>
}

/** What the queue needs of the loop. @internal */
interface QueueContext<C> {
  readonly commands: FiberSet.FiberSet<void, never>
  readonly maxConcurrent: number
  readonly maxQueued: number
  /** One command's run, logged and contained (it never fails). */
  readonly run: (next: Queued<C>) => Effect.Effect<void>
  /** False once the shutdown checklist has begun: a command that ends then does not start the next one. */
  readonly accepting: () => boolean
  /** `text` quoted for a log line. */
  readonly quote: (text: string) => string
}

/** @internal */
interface CommandQueue<C> {
  /** Runs `next`, queues it, or refuses it. */
  readonly offer: (next: Queued<C>) => Effect.Effect<void>
  /** Drops the commands still waiting and logs the burst of refusals under way; succeeds with how many it dropped. */
  readonly drop: Effect.Effect<number>
  /** Commands refused since the start. */
  readonly refused: () => number
}

/** @internal */
export const make = <C>(ctx: QueueContext<C>): CommandQueue<C> => {
  const { maxConcurrent, maxQueued, quote } = ctx
  const waiting: Array<Queued<C>> = []
  let running = 0
  let refusedCommands = 0
  let refusedInBurst = 0

  /** Starts `next` in the set; when it ends, the first command waiting takes its slot (not once shutting down). */
  const start = (next: Queued<C>): Effect.Effect<void> =>
    Effect.suspend(() => {
      running++
      return Effect.asVoid(FiberSet.run(
        ctx.commands,
        ctx.run(next).pipe(
          Effect.ensuring(Effect.suspend(() => {
            running--
            const following = ctx.accepting() ? waiting.shift() : undefined
            return following === undefined ? Effect.void : start(following)
          }))
        ),
        // Starts after the handler returns, as Effect 3's fork did (Effect 4 would run it here up to a wait).
        { startImmediately: false }
      ))
    })

  /**
   * Says how many commands a burst of refusals refused, once it is over: a flood of notifications must not become
   * a flood of log lines (each refusal is counted, the first one of a burst is logged with its id).
   */
  const endBurst = Effect.suspend(() => {
    const refused = refusedInBurst
    refusedInBurst = 0
    return refused <= 1 ? Effect.void : Effect.logWarning(
      `${refused} command(s) refused in all while ${maxConcurrent} ran and ${maxQueued} waited ` +
        `(${refusedCommands} since the start)`
    )
  })

  const refuse = (id: string) =>
    Effect.suspend(() => {
      refusedCommands++
      refusedInBurst++
      return refusedInBurst > 1 ? Effect.void : Effect.logWarning(
        `command ${quote(id)} refused: ${maxConcurrent} command(s) run and ${maxQueued} wait ` +
          "(maxConcurrentCommands, maxQueuedCommands); the refusals that follow are counted until one is accepted"
      )
    })

  return {
    offer: (next) =>
      Effect.suspend(() => {
        if (running < maxConcurrent) return Effect.andThen(endBurst, start(next))
        if (waiting.length < maxQueued) {
          waiting.push(next)
          return endBurst
        }
        return refuse(next.id)
      }),
    drop: Effect.suspend(() => {
      const dropped = waiting.length
      waiting.length = 0
      return Effect.as(endBurst, dropped)
    }),
    refused: () => refusedCommands
  }
}
