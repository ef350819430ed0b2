import { it } from "@effect/vitest"
import * as fc from "fast-check"

/**
 * A fast-check property test, registered like `it.prop` of @effect/vitest 0.x. The 4.x `it.prop` takes
 * `effect/Arbitrary` values and Schemas only, so fast-check arbitraries go through `fc.assert` here.
 */
export const prop = <const Arbs extends ReadonlyArray<fc.Arbitrary<any>>>(
  name: string,
  arbitraries: Arbs,
  self: (values: { -readonly [K in keyof Arbs]: Arbs[K] extends fc.Arbitrary<infer A> ? A : never }) => void,
  options?: { readonly fastCheck?: fc.Parameters<unknown> | undefined }
): void =>
  it(name, () => {
    const tuple = fc.tuple(...(arbitraries as ReadonlyArray<fc.Arbitrary<unknown>>)) as fc.Arbitrary<any>
    fc.assert(
      fc.property(tuple, (values) => {
        self(values)
      }),
      options?.fastCheck as fc.Parameters<[unknown]> | undefined
    )
  })
