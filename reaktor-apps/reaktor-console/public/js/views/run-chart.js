// @ts-check
// A bar chart of run durations as SVG built with DOM calls (the app CSP allows no inline script and
// no library is needed for a few dozen bars). One bar per run, oldest on the left, coloured by
// outcome; the caption says the same in words for those who do not see the colours.
import { h, formatDuration } from '../ui.js'

const SVG = 'http://www.w3.org/2000/svg'
const WIDTH = 600
const HEIGHT = 120

/**
 * @param {string} tag
 * @param {Record<string, string | number>} attrs
 * @param {...(Node | string)} children
 */
function svg (tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag)
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value))
  el.append(...children)
  return el
}

/**
 * The chart's figure content for `runs` (oldest first): the SVG and its caption.
 * @param {import('../api.js').Answer[]} runs as GET /polling/{id}/runs lists them
 * @param {(outcome: string) => string} kindOf an outcome's colour class
 * @returns {Element[]}
 */
export function durationChart (runs, kindOf) {
  if (runs.length === 0) return [h('p', { class: 'muted' }, 'No run recorded yet.')]
  const max = Math.max(1, ...runs.map((r) => r.durationMs ?? 0))
  const step = WIDTH / Math.max(runs.length, 10)
  /** @type {Record<string, number>} */
  const counts = {}
  const bars = runs.map((run, i) => {
    counts[run.outcome] = (counts[run.outcome] ?? 0) + 1
    const height = run.durationMs === null ? HEIGHT : Math.max(4, ((run.durationMs ?? 0) / max) * HEIGHT)
    return svg('rect', {
      class: `bar ${kindOf(run.outcome)}${run.durationMs === null ? ' unsettled' : ''}`,
      'data-outcome': run.outcome,
      x: (i * step + step * 0.15).toFixed(1), y: (HEIGHT - height).toFixed(1),
      width: (step * 0.7).toFixed(1), height: height.toFixed(1)
    }, svg('title', {}, `${run.outcome.replace('_', ' ')}, ${formatDuration(run.durationMs)}, ${new Date(run.startedAt).toLocaleString()}`))
  })
  const durations = runs.map((r) => r.durationMs).filter((d) => d !== null).sort((a, b) => a - b)
  const median = durations.length ? durations[Math.floor(durations.length / 2)] : null
  const parts = Object.entries(counts).map(([outcome, n]) => `${n} ${outcome.replace('_', ' ')}`)
  const longest = durations.at(-1) ?? null
  const summary = `${runs.length === 1 ? '1 run' : `${runs.length} most recent runs`}: ${parts.join(', ')}; median ${formatDuration(median)}, longest ${formatDuration(longest)}.`
  const captionId = `chart-summary-${Math.random().toString(36).slice(2)}`
  const chart = svg('svg', { class: 'durations', viewBox: `0 0 ${WIDTH} ${HEIGHT + 1}`, role: 'img', 'aria-labelledby': captionId, preserveAspectRatio: 'none' },
    svg('line', { class: 'axis', x1: 0, x2: WIDTH, y1: HEIGHT + 0.5, y2: HEIGHT + 0.5 }),
    ...bars)
  // The tallest named is the longest run, as the caption says, not the scale (1 ms at the least).
  // The axis words are HTML: text inside an SVG stretched to the page width would be distorted.
  const axis = h('div', { class: 'axis-labels', 'aria-hidden': 'true' }, h('span', null, '← oldest'), h('span', null, `bar height: duration${longest === null ? '' : `, tallest ${formatDuration(longest)}`}`), h('span', null, 'newest →'))
  return [chart, axis, h('figcaption', { id: captionId }, summary)]
}
