/**
 * A JSON-RPC method defined once with Schemas: a request (params, result, optional typed error) or a notification
 * (params only). Calls and handlers are typed from these definitions.
 *
 * @since 0.1.0
 */
import type * as Duration from "effect/Duration"
import * as Schema from "effect/Schema"

/**
 * A Schema without requirements: method codecs run on the peer's hot path and must not need services.
 *
 * @since 0.1.0
 * @category models
 */
export type Codec<A> = Schema.Codec<A, any, never, never>

/**
 * A request: the caller waits for a result or an error.
 *
 * @since 0.1.0
 * @category models
 */
export interface Request<
  out Name extends string = string,
  in out P extends Codec<any> = Codec<any>,
  in out R extends Codec<any> = Codec<any>,
  in out E extends Schema.Top = Schema.Top
> {
  readonly _tag: "Request"
  readonly name: Name
  readonly params: P
  readonly result: R
  /**
   * The typed failure. A handler failing with it answers an error response whose `data` is the encoded error;
   * `code` and `message` come from the error's own `code` and `message` fields when it has them (default -32000).
   */
  readonly error: E
  /**
   * Overrides the peer's default call timeout for this method. A call that times out fails with `RequestTimeout`;
   * the other side hears of it only if the protocol has a cancellation (see `Protocol.make`).
   */
  readonly timeout: Duration.Input | undefined
}

/**
 * A notification: fire and forget, never answered.
 *
 * @since 0.1.0
 * @category models
 */
export interface Notification<
  out Name extends string = string,
  in out P extends Codec<any> = Codec<any>
> {
  readonly _tag: "Notification"
  readonly name: Name
  readonly params: P
}

/**
 * @since 0.1.0
 * @category models
 */
export type Any = Request<string, any, any, any> | Notification<string, any>

/**
 * @since 0.1.0
 * @category models
 */
export type AnyRequest = Request<string, any, any, any>

/**
 * @since 0.1.0
 * @category models
 */
export type AnyNotification = Notification<string, any>

/**
 * The decoded params type of a method.
 *
 * @since 0.1.0
 * @category models
 */
export type Params<M extends Any> = Schema.Schema.Type<M["params"]>

/**
 * @since 0.1.0
 * @category models
 */
export type Result<M extends AnyRequest> = Schema.Schema.Type<M["result"]>

/**
 * @since 0.1.0
 * @category models
 */
export type Failure<M extends AnyRequest> = Schema.Schema.Type<M["error"]>

/**
 * Params that may be left out: a method whose params Schema accepts `undefined` (or is `Schema.Void`).
 *
 * @since 0.1.0
 * @category models
 */
export const NoParams = Schema.UndefinedOr(Schema.Struct({}))

/**
 * Defines a request.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Method } from "@lifeline/kernel"
 *
 * const GetMessage = Method.request("editor/getMessage", {
 *   params: Schema.Struct({ format: Schema.optional(Schema.Literals(["json", "raw"])) }),
 *   result: Schema.Struct({ message: Schema.String })
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const request = <
  const Name extends string,
  P extends Codec<any>,
  R extends Codec<any>,
  E extends Schema.Top = typeof Schema.Never
>(name: Name, options: {
  readonly params: P
  readonly result: R
  readonly error?: E | undefined
  readonly timeout?: Duration.Input | undefined
}): Request<Name, P, R, E> => ({
  _tag: "Request",
  name,
  params: options.params,
  result: options.result,
  error: (options.error ?? Schema.Never) as E,
  timeout: options.timeout
})

/**
 * Defines a notification.
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { Method } from "@lifeline/kernel"
 *
 * const WindowClosed = Method.notification("window/closed", { params: Schema.Struct({ windowId: Schema.String }) })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const notification = <const Name extends string, P extends Codec<any>>(
  name: Name,
  options: { readonly params: P }
): Notification<Name, P> => ({ _tag: "Notification", name, params: options.params })
