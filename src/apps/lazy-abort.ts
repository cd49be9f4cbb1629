/**
 * The abort side of one aktor call or polling run. Its AbortController is made only when the aktor
 * reads `context.signal` (most never do, and one per call is a measurable cost at thousands of
 * calls a second). The first abort wins: it is remembered, and a signal asked for afterwards is
 * born aborted with it; one asked for before is aborted then, exactly as an eager one would be.
 */
export class LazyAbort {
  private controller: AbortController | undefined
  /** Why it was aborted; undefined while it was not. */
  reason: unknown

  get signal (): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController()
      if (this.reason !== undefined) this.controller.abort(this.reason)
    }
    return this.controller.signal
  }

  abort (reason: unknown): void {
    if (this.reason !== undefined) return
    this.reason = reason
    this.controller?.abort(reason)
  }
}
