/**
 * The bodies of the Layer-first part of `Connection`: `layer`, `layerConfig` and `Service`.
 *
 * @internal
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type * as Connection from "../Connection.js"
import type * as Method from "../Method.js"
import * as Protocol from "../Protocol.js"
import * as Transport from "../Transport.js"
import { make } from "./connection.js"

/** @internal */
export const layer = <I, Serves extends Method.Any, Calls extends Method.Any, R = never, E = never>(
  tag: Context.Key<I, Connection.Connection<Serves, Calls>>,
  options: Connection.LayerOptions<Serves, Calls, R, E>
): Layer.Layer<I, Connection.LayerError<E>, Transport.Transport | Exclude<R, Scope.Scope>> =>
  Layer.effect(
    tag,
    Effect.flatMap(Transport.Transport, (transport) => make<Serves, Calls, R, E>({ ...options, transport }))
  )

/** @internal */
export const layerConfig = <I, Serves extends Method.Any, Calls extends Method.Any, R = never, E = never>(
  tag: Context.Key<I, Connection.Connection<Serves, Calls>>,
  options: Connection.LayerConfigOptions<Serves, Calls, R, E>
): Layer.Layer<I, Connection.LayerError<E>, Transport.Transport | Exclude<R, Scope.Scope>> =>
  Layer.effect(
    tag,
    Effect.gen(function*() {
      const { config, ...rest } = options
      const settings = yield* Config.unwrap(config)
      const transport = yield* Transport.Transport
      const defined: Record<string, unknown> = {}
      for (const [key, value] of Object.entries(settings)) if (value !== undefined) defined[key] = value
      return yield* make<Serves, Calls, R, E>(
        { ...rest, ...defined, transport } as Connection.Options<Serves, Calls, R, E>
      )
    })
  )

/** @internal */
export const Service = <Self>() =>
<const Id extends string, Serves extends Method.Any, Calls extends Method.Any>(
  id: Id,
  options: { readonly protocol: Protocol.Protocol<Serves, Calls> }
): Connection.Service<Self, Id, Serves, Calls> => {
  const tag = Context.Service<Self, Connection.Connection<Serves, Calls>>()(id)
  const protocol = options.protocol
  return Object.assign(tag, {
    protocol,
    layer: <R = never, E = never>(layerOptions: Omit<Connection.LayerOptions<Serves, Calls, R, E>, "protocol">) =>
      layer<Self, Serves, Calls, R, E>(
        tag,
        { ...layerOptions, protocol } as Connection.LayerOptions<Serves, Calls, R, E>
      ),
    layerConfig: <R = never, E = never>(
      layerOptions: Omit<Connection.LayerConfigOptions<Serves, Calls, R, E>, "protocol">
    ) =>
      layerConfig<Self, Serves, Calls, R, E>(
        tag,
        { ...layerOptions, protocol } as Connection.LayerConfigOptions<Serves, Calls, R, E>
      ),
    client: Effect.map(tag, (connection) => Protocol.client(connection.peer))
  })
}
