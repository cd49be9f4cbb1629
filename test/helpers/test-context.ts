/** The part of a tap Test the helpers use: a teardown for what they set up. */
export interface TestContext {
  teardown: (fn: () => unknown) => void
}
