/**
 * Deprecated: the module is `WindowPresenter` now (it presents the windows extensions open; the old name read like
 * the operating system). Everything it exports is here under the same names, and `Windows` is `WindowPresenter`
 * itself (the same service).
 *
 * @since 0.1.0
 * @deprecated Use `WindowPresenter`.
 */
import { WindowPresenter } from "./WindowPresenter.js"

export {
  /**
   * @since 0.1.0
   * @deprecated Use `WindowPresenter`.
   */
  DEFAULT_MAX_CONCURRENT_FETCHES,
  /**
   * @since 0.1.0
   * @deprecated Use `WindowPresenter`.
   */
  DEFAULT_MAX_RESPONSE_BYTES,
  /**
   * @since 0.1.0
   * @deprecated Use `WindowPresenter`.
   */
  type HeadlessOptions,
  /**
   * @since 0.1.0
   * @deprecated Use `WindowPresenter`.
   */
  isLoopbackHttpUrl,
  /**
   * @since 0.1.0
   * @deprecated Use `WindowPresenter`.
   */
  layerHeadless,
  /**
   * @since 0.1.0
   * @deprecated Use `WindowPresenter`.
   */
  layerRecordOnly,
  /**
   * @since 0.1.0
   * @deprecated Use `WindowPresenter`.
   */
  makeHeadless,
  /**
   * @since 0.1.0
   * @deprecated Use `WindowPresenter`.
   */
  type Presentation,
  /**
   * @since 0.1.0
   * @deprecated Use `WindowPresenter`.
   */
  type Window
} from "./WindowPresenter.js"

/**
 * The window presenter, by its old name.
 *
 * @since 0.1.0
 * @category models
 * @deprecated Use `WindowPresenter.WindowPresenter`.
 */
export const Windows = WindowPresenter

/**
 * @since 0.1.0
 * @deprecated Use `WindowPresenter.WindowPresenter`.
 */
export type Windows = WindowPresenter

/**
 * @since 0.1.0
 * @deprecated Use `WindowPresenter.WindowPresenter`.
 */
export declare namespace Windows {
  /**
   * @since 0.1.0
   * @deprecated Use `WindowPresenter.WindowPresenter.Service`.
   */
  export type Service = WindowPresenter.Service
}
