// @ts-check
// The series of one reaktor in the Prometheus text of /metrics (label `reaktor`), read line by line.

/**
 * `name{a="x",b="y"} 1` → {name, labels, value}; comments and blank lines → null.
 * @param {string} line
 * @returns {{ name: string, labels: Record<string, string>, value: string } | null}
 */
function parseLine (line) {
  if (line === '' || line.startsWith('#')) return null
  const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)/.exec(line)
  if (!match) return null
  /** @type {Record<string, string>} */
  const labels = {}
  const text = match[2] ?? ''
  // Values may hold escaped quotes, backslashes and line breaks (\", \\, \n).
  const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g
  let m
  while ((m = re.exec(text)) !== null) labels[m[1]] = m[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c))
  return { name: match[1], labels, value: match[3] }
}

/**
 * This reaktor's series, histogram buckets left out: [{series: 'name{other labels}', value}].
 * @param {string} text the Prometheus text
 * @param {string} reaktorId
 */
export function metricsOf (text, reaktorId) {
  /** @type {{ series: string, value: string }[]} */
  const out = []
  for (const line of text.split('\n')) {
    const parsed = parseLine(line)
    if (!parsed || parsed.labels.reaktor !== reaktorId || parsed.name.endsWith('_bucket')) continue
    const others = Object.entries(parsed.labels).filter(([k]) => k !== 'reaktor').map(([k, v]) => `${k}="${v}"`)
    out.push({ series: others.length ? `${parsed.name}{${others.join(',')}}` : parsed.name, value: parsed.value })
  }
  return out.sort((a, b) => (a.series < b.series ? -1 : a.series > b.series ? 1 : 0))
}
