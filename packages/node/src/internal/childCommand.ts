/**
 * An Effect 4 `ChildProcess` command as Node's `spawn` takes it: the argument vector as it may be shown, the checks
 * made before spawning, and the environment.
 *
 * @internal
 */
import type * as ChildProcessCommand from "effect/process/ChildProcess"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"

/**
 * A word of the command, with a `Redacted` one revealed: what the child is given.
 *
 * @internal
 */
export const unwrap = (word: string | Redacted.Redacted<string>): string =>
  Redacted.isRedacted(word) ? Redacted.value(word) : word

/**
 * The program and its arguments as they may be shown or recorded: a `Redacted` argument is `<redacted>`.
 *
 * @internal
 */
export const argvOf = (command: ChildProcessCommand.StandardCommand): Array<string> => [
  command.command,
  ...command.args.map((word) => Redacted.isRedacted(word) ? "<redacted>" : word)
]

/**
 * Which word of the command holds a NUL character, or `undefined`. Node's own NUL check throws an error that quotes
 * the value: rejected first, so a `Redacted` value stays hidden.
 *
 * @internal
 */
export const nulCharacter = (command: ChildProcessCommand.StandardCommand): string | undefined => {
  if (command.command.includes("\0")) return "the command contains a NUL character"
  const index = command.args.findIndex((word) => unwrap(word).includes("\0"))
  if (index !== -1) return `argument ${index + 1} contains a NUL character`
  for (const [name, value] of Object.entries(command.options.env ?? {})) {
    if (value !== undefined && unwrap(value).includes("\0")) {
      return `the environment variable ${name} contains a NUL character`
    }
  }
  return undefined
}

/**
 * The environment as Effect 4's `NodeChildProcessSpawner` builds it (no `env`: the host's; `undefined` removes), less
 * the host's own `withheld` variables unless the command's `env` names them.
 *
 * @internal
 */
export const environmentOf = (
  options: ChildProcessCommand.CommandOptions,
  withheld: ReadonlyArray<string> = []
): NodeJS.ProcessEnv | undefined => {
  const inherits = options.env === undefined || options.extendEnv === true
  const withholds = inherits && withheld.some((name) => process.env[name] !== undefined)
  if (options.env === undefined && !withholds) return undefined
  const env: NodeJS.ProcessEnv = inherits ? { ...process.env } : {}
  if (withholds) { for (const name of withheld) delete env[name] }
  for (const [name, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete env[name]
    else env[name] = unwrap(value)
  }
  return env
}

/** @internal */
export const isDirectory = (path: string): boolean => {
  try {
    return Fs.statSync(path).isDirectory()
  } catch {
    return false
  }
}
