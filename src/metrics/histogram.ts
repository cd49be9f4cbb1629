/**
 * The two histograms this service keeps itself rather than through prom-client's Histogram
 * (`http_request_duration_seconds`, `reaktor_polling_run_duration_seconds`): an observation counts
 * into one bucket, and the series are written out as prom-client writes a Histogram, at scrape time.
 */

/** A sample as prom-client's custom metrics give it (`labels` of its own, `sharedLabels` of its series). */
export interface Sample { value: number, labels: Record<string, string | number>, sharedLabels?: Record<string, string>, metricName?: string }

/** The bucket of an observation: the first bound it does not exceed, or `bounds.length` past the last. */
export function bucketOf (bounds: readonly number[], value: number): number {
  let i = 0
  while (i < bounds.length && !(value <= bounds[i])) i++
  return i
}

/**
 * Appends one series: a sample per bound with the count up to it (cumulative), +Inf (every
 * observation), then sum and count. `counts[offset + i]` holds bucket i alone; `labels(le)` gives
 * a sample's labels (`le` undefined for sum and count).
 */
export function pushHistogram (out: Sample[], name: string, bounds: readonly number[], counts: Float64Array, offset: number, total: { count: number, sum: number },
  labels: (le: number | string | undefined) => Pick<Sample, 'labels' | 'sharedLabels'>): void {
  let cumulative = 0
  for (let i = 0; i < bounds.length; i++) {
    cumulative += counts[offset + i]
    out.push({ metricName: `${name}_bucket`, value: cumulative, ...labels(bounds[i]) })
  }
  out.push({ metricName: `${name}_bucket`, value: total.count, ...labels('+Inf') })
  out.push({ metricName: `${name}_sum`, value: total.sum, ...labels(undefined) })
  out.push({ metricName: `${name}_count`, value: total.count, ...labels(undefined) })
}
