/** Reading Prometheus text as `GET /metrics` serves it. */

export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

/** Every sample line (comments skipped); label values unescaped. */
export function parseMetrics (text: string): Sample[] {
  const samples: Sample[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (m === null) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]] = l[2].replace(/\\(.)/g, (_s, c: string) => c === 'n' ? '\n' : c)
    }
    samples.push({ name: m[1], labels, value: Number(m[3]) })
  }
  return samples
}

/** The samples of one metric, by their `reaktor` label (a reaktor seen twice throws). */
export function byReaktor (samples: Sample[], name: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const s of samples) {
    if (s.name !== name) continue
    if (out.has(s.labels.reaktor)) throw new Error(`${name}: reaktor ${s.labels.reaktor} twice in one scrape`)
    out.set(s.labels.reaktor, s.value)
  }
  return out
}
