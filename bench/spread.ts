/**
 * The spread of a set of measurements, as the side-by-side rows print it: median, quartiles, extremes.
 */
export interface Spread {
  readonly median: number
  readonly p25: number
  readonly p75: number
  readonly min: number
  readonly max: number
}

/** Nearest-rank quantiles of `values` (at least one). */
export const spreadOf = (values: ReadonlyArray<number>): Spread => {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * (sorted.length - 1) + 0.5))]
  return { median: at(0.5), p25: at(0.25), p75: at(0.75), min: sorted[0], max: sorted[sorted.length - 1] }
}

const ms = (value: number) => value.toFixed(2)

/** A spread of milliseconds as one table cell. */
export const cell = (spread: Spread): string =>
  `${ms(spread.median)} ms (p25–p75 ${ms(spread.p25)}–${ms(spread.p75)}, min–max ${ms(spread.min)}–${ms(spread.max)})`
