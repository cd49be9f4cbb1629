import { Counter, Gauge, type Registry } from 'prom-client'

/**
 * Metrics whose value is read from the code that owns it when Prometheus scrapes: nothing is done
 * per event on hot paths (a request answered from a cache, a run), only a number kept there.
 */
export function scrapeGauge (registry: Registry, name: string, help: string, read: () => number): void {
  void new Gauge({ name, help, registers: [registry], collect () { this.set(read()) } })
}

/** A counter read at scrape time: `read` returns the running total. */
export function scrapeCounter (registry: Registry, name: string, help: string, read: () => number): void {
  void new Counter({ name, help, registers: [registry], collect () { this.reset(); this.inc(read()) } })
}
