/**
 * The tables the `Content-Length` decoder (`contentLength.ts`) reads header bytes with: RFC 9110 token characters
 * folded to lower case in one look-up, the two header names it recognises, the rolling search's expected bytes, and
 * the `charset` parameter of a `Content-Type` value.
 *
 * @internal
 */

const asciiBytes = (s: string): Uint8Array => {
  const out = new Uint8Array(s.length)
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i)
  return out
}

/** Token characters (RFC 9110 `tchar`) mapped to their lower case; 0 for every other byte. @internal */
export const TOKEN_LOWER = ((): Uint8Array => {
  const table = new Uint8Array(256)
  const specials = "!#$%&'*+-.^_`|~"
  for (let b = 48; b <= 57; b++) table[b] = b
  for (let b = 97; b <= 122; b++) table[b] = b
  for (let b = 65; b <= 90; b++) table[b] = b + 32
  for (let i = 0; i < specials.length; i++) table[specials.charCodeAt(i)] = specials.charCodeAt(i)
  return table
})()

/** @internal */
export const CONTENT_LENGTH = asciiBytes("content-length")
/** @internal */
export const CONTENT_TYPE = asciiBytes("content-type")
/**
 * The name bytes the rolling search expects after `k` matched ones; 255 (no token byte) once all 14 matched.
 *
 * @internal
 */
export const SEARCH = asciiBytes("content-length\u00ff")
/** @internal */
export const NAME_LENGTH = CONTENT_LENGTH.length

/** `charset` of a `Content-Type` value, lower-cased and unquoted, or `undefined` when it has none. @internal */
export const charsetOf = (value: string): string | undefined => {
  const params = value.split(";")
  let charset: string | undefined
  for (let i = 1; i < params.length; i++) {
    const param = params[i]
    const eq = param.indexOf("=")
    if (eq === -1 || param.slice(0, eq).trim().toLowerCase() !== "charset") continue
    let v = param.slice(eq + 1).trim()
    if (v.length >= 2 && v.startsWith("\"") && v.endsWith("\"")) v = v.slice(1, -1)
    v = v.toLowerCase()
    if (charset === undefined || charset === "utf-8" || charset === "utf8") charset = v
  }
  return charset
}
