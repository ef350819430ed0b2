/**
 * What the MCP tests share: the two transports side by side, the reference servers, and the processes a server is
 * made of, read from /proc.
 *
 * @since 0.1.0
 */
import * as Lifeline from "@lifeline/mcp/StdioClientTransport"
import * as Sdk from "@modelcontextprotocol/sdk/client/stdio.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Url from "node:url"
import { isAlive } from "./processes.js"

const here = Path.dirname(Url.fileURLToPath(import.meta.url))

/** `@modelcontextprotocol/server-everything`'s stdio entry point (protocol 2025-11-25), run with plain `node`. */
export const everything = Path.join(
  here,
  "..",
  "node_modules",
  "@modelcontextprotocol",
  "server-everything",
  "dist",
  "index.js"
)

/**
 * `@modelcontextprotocol/server-filesystem`'s entry point (protocol 2025-11-25), run with plain `node` and the
 * directories it may touch as arguments.
 */
export const filesystem = Path.join(
  here,
  "..",
  "node_modules",
  "@modelcontextprotocol",
  "server-filesystem",
  "dist",
  "index.js"
)

export const stubborn = Path.join(here, "..", "fixtures", "mcp-stubborn.mjs")

export type Parameters = Sdk.StdioServerParameters & Lifeline.StdioServerParameters

export type AnyTransport = Transport & { readonly pid: number | null }

export type Which = "sdk" | "lifeline"

/** The SDK's transport, or ours with its journal in `journalDirectory`. */
export const makeTransport = (which: Which, parameters: Parameters, journalDirectory: string): AnyTransport =>
  which === "sdk"
    ? new Sdk.StdioClientTransport(parameters)
    : new Lifeline.StdioClientTransport({ ...parameters, journalDirectory })

const statOf = (pid: number): Array<string> | undefined => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
    // Fields after the command name (which may hold spaces): state, ppid, pgrp, ...
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  } catch {
    return undefined
  }
}

const allPids = (): Array<number> => Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number)

/** `pid` and every live process under it (by parent links), as /proc shows them now. */
export const treeOf = (pid: number): Array<number> => {
  const children = new Map<number, Array<number>>()
  for (const other of allPids()) {
    const ppid = Number(statOf(other)?.[1])
    children.set(ppid, [...(children.get(ppid) ?? []), other])
  }
  const tree: Array<number> = []
  const visit = (parent: number) => {
    if (!isAlive(parent)) return
    tree.push(parent)
    for (const child of children.get(parent) ?? []) visit(child)
  }
  visit(pid)
  return tree
}

/** The live members of process group `pgid` (zombies are not counted). */
export const groupOf = (pgid: number): Array<number> =>
  allPids().filter((pid) => statOf(pid)?.[2] === String(pgid) && isAlive(pid))

/** The process group of `pid`, while it runs. */
export const groupIdOf = (pid: number): number | undefined => {
  const pgid = statOf(pid)?.[2]
  return pgid === undefined ? undefined : Number(pgid)
}

/** The live processes one of whose arguments contains `word` (a server's entry point, also inside an `sh -c` line). */
export const processesWith = (word: string): Array<number> =>
  allPids().filter((pid) => {
    try {
      return Fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").some((arg) => arg.includes(word)) &&
        isAlive(pid)
    } catch {
      return false
    }
  })

/** Those of `pids` still alive. */
export const alive = (pids: ReadonlyArray<number>): Array<number> => pids.filter(isAlive)

/** SIGKILLs what a test (the SDK's transport) left behind. */
export const killAll = (pids: ReadonlyArray<number>): void => {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // gone
    }
  }
}
