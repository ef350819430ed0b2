/**
 * Deprecated: the module is `DurationText` now (`DurationInput` read like Effect's `Duration.Input`).
 *
 * @since 0.1.0
 * @deprecated Use `DurationText`.
 */
export {
  /**
   * @since 0.1.0
   * @deprecated Use `DurationText.config`.
   */
  config,
  /**
   * @since 0.1.0
   * @deprecated Use `DurationText.forms`.
   */
  forms,
  /**
   * @since 0.1.0
   * @deprecated Use `DurationText.FromString`.
   */
  FromString,
  /**
   * @since 0.1.0
   * @deprecated Use `DurationText.parse`.
   */
  parse,
  /**
   * @since 0.1.0
   * @deprecated Use `DurationText.ParseOptions`.
   */
  type ParseOptions
} from "./DurationText.js"
