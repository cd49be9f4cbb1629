/**
 * What `npm run bench:report` writes into each generated region, from the JSON of kept runs only:
 *
 * - `summary`: the README's short account of the newest full run (HTTP against the ceiling, the
 *   scheduler at a glance, the job queues), each with its target and verdict;
 * - `run`: that run's whole printed output;
 * - `targets`: every target of the current bench, judged on that run;
 * - `runs`: every kept full run, with what it met and missed;
 * - `scale`: what scenario 11 of that run says, in words around its figures;
 * - `history`: the run history's cost (scenario 4 with RUN_HISTORY_PER_REAKTOR 100 and 0);
 * - `publish`: what scenario 12 of that run says (publishing apps), in words around its figures.
 *
 * Links are relative to the page the region is on.
 */
import path from 'node:path'
import { formatTable, median, num, sig, type Row } from '../lib.js'
import { metCell, SCENARIO, TARGETS, verdictText, type Judgment } from '../targets.js'
import { renderHistory } from './history.js'
import { renderPublish } from './publish.js'
import { wrapMarkdown } from './regions.js'
import { renderScale } from './scale.js'
import { fullRuns, httpRow, int, isLegacy, judgmentsOf, scaleOf, type RenderContext, type Run } from './runs.js'

export const REGIONS: Record<string, (ctx: RenderContext) => string> = {
  summary: renderSummary,
  run: renderRun,
  targets: renderTargets,
  runs: renderRuns,
  scale: renderScale,
  history: renderHistory,
  publish: renderPublish
}

export function render (name: string, ctx: RenderContext): string {
  const renderer = REGIONS[name]
  if (renderer === undefined) throw new Error(`${ctx.page}: no region called ${name} (known: ${Object.keys(REGIONS).join(', ')})`)
  return wrapMarkdown(renderer(ctx))
}

/** A Markdown link to a repository file from `page`, its path shown as code. */
export function link (page: string, file: string, anchor = ''): string {
  return `[\`${file}\`](${path.posix.relative(path.posix.dirname(page), file)}${anchor})`
}

/** A link to docs/performance.md (or to an anchor of it), from `page`. */
function docLink (page: string, anchor: string, text: string): string {
  const target = page === 'docs/performance.md' && anchor !== '' ? '' : path.posix.relative(path.posix.dirname(page), 'docs/performance.md')
  return `[${text}](${target}${anchor})`
}
const dec = (v: number, digits = 1): string => Number.isFinite(v) ? v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : v > 0 ? '∞' : 'none'
const table = (header: string[], rows: string[][]): string => [
  `| ${header.join(' | ')} |`,
  `|${header.map(() => '---').join('|')}|`,
  ...rows.map((r) => `| ${r.join(' | ')} |`)
].join('\n')

function verdict (judgments: readonly Judgment[]): string {
  const cell = metCell(judgments)
  return cell === 'not judged' ? 'not judged (older definition)' : cell
}

const of = (all: readonly Judgment[], scenario: string | ((s: string) => boolean)): Judgment[] =>
  all.filter((j) => typeof scenario === 'string' ? j.scenario === scenario : scenario(j.scenario))

/** The run in one line: commit, date, machine. */
function described (run: Run): string {
  const m = run.json.machine
  const machine = m === undefined ? '' : `; ${m.cpus} × ${m.model}, ${m.memoryGB} GB, Node ${m.node}, ${m.platform}`
  return `commit \`${run.json.commit ?? 'unknown'}\` (${String(run.json.at).slice(0, 10)}${machine})`
}

/** What a run made before the current targets needs said before its figures. */
function legacyNote (ctx: RenderContext): string {
  if (!isLegacy(ctx.run)) return ''
  return `That run predates the current targets: a verdict marked *not judged* is of a figure measured under an older definition (${docLink(ctx.page, '#targets', 'the targets')} say which), to be judged again by the next full run.`
}

function renderSummary (ctx: RenderContext): string {
  const { run } = ctx
  const r = run.json.results ?? {}
  const judged = judgmentsOf(run)
  const p = run.json.params
  const ceiling = Number((r.generatorCeiling as Row[] | undefined)?.[0]?.['req/s'])
  const fastest = Math.max(...((r.http as Row[] | undefined) ?? []).filter((row) => !String(row.server).startsWith('nginx')).map((row) => Number(row['req/s'])))
  const limits = fastest <= ceiling / 2 ? ', more than twice the fastest Node server\'s rate: it is not what limits the rates below' : '; a rate near it may be the generator\'s limit, not the server\'s'
  const pinnedText = run.json.machine?.pinned === true ? '; pinned to one core, the servers under test to the other, with `taskset`' : ''
  const intro = [
    `Every figure here comes from the newest full \`npm run bench\` (embedded PostgreSQL), on ${described(run)}; its JSON is ${link(ctx.page, run.file)}. The method, the whole output and every target with its verdict are in ${docLink(ctx.page, '', 'docs/performance.md')}. ${legacyNote(ctx)}`.trim(),
    '',
    `The load generator is \`wrk\` (1 thread, ${p?.connections ?? 50} connections${pinnedText}), which reached ${int(ceiling)} req/s against nginx's 2-byte answer in the same run${limits}. Each HTTP figure is the mean of ${p?.rounds ?? 3} alternating ${p?.httpSeconds ?? 10} s rounds; the reference is a bare Fastify route sending the same answer (the Node ceiling). No HTTP scenario writes to the database.`
  ]
  const httpLine = (label: string, scenario: string, bound: number | undefined, showDoes: boolean): string[] => {
    const ours = httpRow(run, scenario, 'reaktor-service')
    const ref = httpRow(run, scenario, 'bare Fastify route')
    const does = showDoes ? `, ${String(ref?.['per request'])}${scenario === SCENARIO.status && isLegacy(run) ? ' (the older ceiling)' : ''}` : ''
    return [label, `${int(Number(ours?.['req/s']))} req/s`, `${int(Number(ref?.['req/s']))}${does}`, String(ours?.['of ceiling']), bound === undefined ? '' : `≥ ${bound}x`, bound === undefined ? '' : verdict(of(judged, scenario))]
  }
  const http = table(['request', 'reaktor-service', 'reference', 'ratio (per-round spread)', 'target', 'met'], [
    httpLine('app-UI script, 27 KB: session checked, CSP, file from memory', SCENARIO.appScript, TARGETS.http.appScript, false),
    httpLine('app-UI page with the token helper, the same', SCENARIO.appPage, TARGETS.http.appPage, false),
    httpLine('`GET` status: token checked, JSON from the status cache', SCENARIO.status, TARGETS.http.status, true),
    httpLine('`POST` aktor echo: token checked, body parsed, aktor called', '8 POST aktor echo', undefined, true)
  ])
  const fromDisk = httpRow(run, SCENARIO.appScript, '@fastify/static')
  const nginx = httpRow(run, SCENARIO.appScript, 'nginx')
  const context = `For context, in the same run: \`@fastify/static\` (which streams from disk) served the script at ${int(Number(fromDisk?.['req/s']))} req/s, nginx (1 worker, sendfile) at ${int(Number(nginx?.['req/s']))}.`
  return [
    ...intro, '', http, '', context, '',
    'Scheduling, with a no-op aktor. Every run\'s result and history row are written in batches: one statement per flush, a flush at most every 200 ms, nothing in a transaction of the run\'s own.',
    '', scheduling(ctx, judged), '',
    'At scenario 5\'s rate the run history cannot keep up: the oldest pending rows are dropped, and the service logs it.',
    '', queues(ctx)
  ].join('\n')
}

function scheduling (ctx: RenderContext, judged: readonly Judgment[]): string {
  const r = ctx.run.json.results ?? {}
  const rows: string[][] = []
  const s4 = r.s4
  if (s4 !== undefined) {
    const stalls = isLegacy(ctx.run) ? '' : `; ${int(Number(s4.stalled))} did not run again`
    rows.push(['10,000 reaktors at 3 s, one node', `${dec(num(s4.share) * 100)} % of the expected runs; p99 lateness ${dec(num(s4.gapP99))} ms${stalls}; ${dec(num(s4.cpuMs) * 1000 / num(s4.runs))} µs of node CPU per run`, `≥ ${TARGETS.s4.share * 100} %; p99 ≤ ${TARGETS.s4.p99Ms} ms; none stalled`, verdict(of(judged, SCENARIO.s4))])
    const runs = num(s4.runs)
    rows.push(['… what the database saw (history on)', `${dec(num(s4.flushes) / (num(s4.windowMs) / 1000))} result statements a second: ${sig(num(s4.load?.transactions) / runs)} transactions, ${sig(num(s4.load?.rows) / runs)} rows, ${int(num(s4.load?.walBytes) / runs)} WAL bytes per run`, '', ''])
  }
  const { cases, kills, refusals, missing, overlaps, slowest } = scaleOf(r)
  if (cases.length > 0) {
    const labels = cases.map((c) => String(c.label)).join('; ')
    rows.push([labels, `${cases.map((c) => dec(num(c.share) * 100)).join(' / ')} % of the expected runs; p99 lateness ${cases.map((c) => dec(num(c.p99))).join(' / ')} ms; ${int(refusals)} lock refusals`, `≥ ${TARGETS.s11.share * 100} %; p99 ≤ ${cases.map((c) => int(num(c.p99Target))).join(' / ')} ms; none stalled; an even spread; no lock refusal`, verdict(of(judged, (s) => cases.some((c) => s === SCENARIO.s11case(String(c.label)))))])
  }
  if (r.s11_memory !== undefined) {
    rows.push(['memory, a node with 20,000 reaktors', `${int(num(r.s11_memory.rssPer))} MB of RSS per 10,000 reaktors`, `< ${TARGETS.s11.rssPer10kMB} MB`, verdict(of(judged, SCENARIO.s11memory))])
  }
  if (kills.length > 0) {
    rows.push([`\`kill -9\` of one of 3 nodes (3,000 reaktors each), ${kills.length === 1 ? 'once' : `${kills.length} times`}`, `${missing === 0 ? 'every orphan ran again' : `${int(missing)} orphans did not run again; the others ran`} within ${dec(slowest / 1000)} s on a survivor; ${int(overlaps)} overlapping runs`, `every orphan; no overlap; ≤ ${dec(TARGETS.s11.killToFirstRunMaxMs / 1000)} s`, verdict(of(judged, (s) => s.startsWith('11 kill -9')))])
  }
  if (r.s5 !== undefined) rows.push(['one reaktor returning `true`, back to back', `${int(num(r.s5.perSecond))} runs a second`, `≥ ${int(TARGETS.s5.runsPerSecond)}`, verdict(of(judged, SCENARIO.s5))])
  if (r.s6 !== undefined) {
    const same = r.s6.same as number[]
    const cross = r.s6.cross as number[]
    const t = TARGETS.s6
    rows.push(['start → first run: on the owner / through another node', `median ${dec(median(same))} / ${dec(median(cross))} ms, max ${dec(Math.max(...same))} / ${dec(Math.max(...cross))} ms (${same.length} each)`, `median ≤ ${t.sameMedianMs} / ${t.crossMedianMs} ms, max ≤ ${t.sameMaxMs} / ${t.crossMaxMs} ms`, verdict([...of(judged, SCENARIO.s6same), ...of(judged, SCENARIO.s6cross)])])
  }
  if (r.s7 !== undefined) {
    const f = r.s7.failovers as number[]
    rows.push(['failover after `kill -9` of the owner', `median ${int(median(f))} ms, max ${int(Math.max(...f))} ms (${f.length} kills)`, `median ≤ ${int(TARGETS.s7.medianMs)} ms, max ≤ ${int(TARGETS.s7.maxMs)} ms`, verdict(of(judged, SCENARIO.s7))])
  }
  rows.push(...publishing(r, judged))
  return table(['scheduling', 'measured', 'target', 'met'], rows)
}

/** Scenario 12's rows of the summary: publish, reaktors through activations, memory per activation. */
function publishing (r: Record<string, any>, judged: readonly Judgment[]): string[][] {
  const rows: string[][] = []
  const t = TARGETS.s12
  if (r.s12_publish !== undefined) {
    rows.push(['publish of a 1 MiB app package to one of 3 nodes → every node serves and runs it', `median ${int(num(r.s12_publish.p50))} ms, max ${int(num(r.s12_publish.max))} ms (${(r.s12_publish.samples as unknown[]).length} publishes)`, `max ≤ ${int(t.publishMaxMs)} ms`, verdict(of(judged, SCENARIO.s12publish))])
  }
  const runs = r.s12_runs
  if (runs !== undefined) {
    rows.push([`${String(runs.label)} of a published app, 3 nodes`, `${dec(num(runs.share) * 100)} % of the expected runs; p99 lateness ${dec(num(runs.gapP99))} ms; ${int(num(runs.overlaps))} overlapping runs`, `≥ ${t.share * 100} %; p99 ≤ ${t.p99Ms} ms; none stalled; no overlap`, verdict(of(judged, SCENARIO.s12switch(String(runs.label))))])
  }
  if (r.s12_memory !== undefined) {
    rows.push(['memory per activation of a version not loaded before', `${dec(num(r.s12_memory.worstMiB), 2)} MiB of RSS (worst node, ${int(num(r.s12_memory.activations))} activations)`, `≤ ${t.rssPerActivationMiB} MiB`, verdict(of(judged, SCENARIO.s12memory))])
  }
  return rows
}

/** The job queues of scenario 10 on scenario 4, in a sentence: what they kept up with, at what cost per run. */
function queues (ctx: RenderContext): string {
  const r = ctx.run.json.results ?? {}
  const p = ctx.run.json.params
  const versions = r.s10?.versions as Record<string, string> | undefined
  const side = (name: string): string | undefined => {
    const t = r[`s10_4_${name}`]
    if (t === undefined || t.error !== undefined) return undefined
    const share = num(t.cycles) / ((p?.s4Reaktors ?? 10_000) * num(t.windowMs) / 3000)
    const runs = num(t.runs)
    const p99 = num(t.gapP99)
    return `${name} ${versions?.[name] ?? ''} kept up with ${dec(share * 100)} % of the runs at a p99 lateness of ${Number.isFinite(p99) ? `${int(p99)} ms` : '∞, as some reaktors did not run again'} (${sig(num(t.load?.transactions) / runs)} transactions, ${sig(num(t.load?.rows) / runs)} rows and ${int(num(t.load?.walBytes) / runs)} WAL bytes per run)`
  }
  const sides = ['graphile-worker', 'pg-boss'].map(side).filter((s) => s !== undefined)
  if (sides.length === 0) return ''
  return `The same 10,000 reaktors on two job queues, each configured as its docs recommend, each run a durable job: ${sides.join('; ')}. graphile-worker commits once per run, with a NOTIFY; pg-boss polls at its documented minimum of 0.5 s. That is the price of a durable row per run against results written in batches, not slowness at what the queues are built for.`
}

/**
 * A printed table without its verdict columns (`target` and `met`: a run made before the current
 * targets would read as judged by them); a table without `met` (the generator's ceiling, whose
 * `target` is what wrk was aimed at) as it is.
 */
function withoutVerdicts (text: string): string {
  const drop = ['target', 'met']
  const lines = text.trimEnd().split('\n')
  const titleLines = lines.filter((l) => !l.startsWith('|'))
  const cells = lines.filter((l) => l.startsWith('|') && !l.startsWith('|-')).map((l) => l.slice(1, -1).split('|').map((c) => c.trim()))
  if (cells.length === 0) return text
  const [header, ...body] = cells
  if (!header.includes('met')) return text
  const rows = body.map((values): Row => Object.fromEntries(header.map((h, i) => [h, values[i]]).filter(([h]) => !drop.includes(h))))
  return formatTable(titleLines.join('\n'), rows)
}

function renderRun (ctx: RenderContext): string {
  const { run } = ctx
  const m = run.json.machine
  const legacy = isLegacy(run)
  const first = `reaktor-service benchmark (full) of commit ${run.json.commit}, \`npm run bench\`, on ${m?.cpus} × ${m?.model}, ${m?.memoryGB} GB, Node ${m?.node}, ${m?.platform}`
  const tables = (run.json.tables ?? []).map((t) => legacy ? withoutVerdicts(t) : t)
  const end = [`total ${run.json.elapsedSeconds} s`, `results: ${run.file}`]
  if (!legacy) end.push('', verdictText(judgmentsOf(run)))
  const intro = `The whole output of the newest full \`npm run bench\`, on ${described(run)}; its JSON is ${link(ctx.page, run.file)}. Every process under test, the load generator and PostgreSQL share the machine's cores, so compare only figures of one run.`
  const legacyText = legacy ? ` That run predates the current targets, so its tables are shown without the target and verdict columns its bench printed; ${docLink(ctx.page, '#targets', 'Targets')} judges its figures against today's.` : ''
  return [`${intro}${legacyText}`, '', '```', first, '', ...tables.map((t) => t.trimEnd()).flatMap((t) => [t, '']), ...end, '```'].join('\n')
}

function renderTargets (ctx: RenderContext): string {
  const judged = judgmentsOf(ctx.run)
  const intro = `Every target of the current bench (\`bench/targets.ts\`), judged on the newest full run (${link(ctx.page, ctx.run.file)}). \`npm run bench\` exits 1 when one is missed and prints the missed ones last.`
  const legacy = isLegacy(ctx.run) ? ' The run predates some of them: where it measured under an older definition the row is not judged and says why. A p99 it measured over the reaktors that ran again is a lower bound of today\'s, so above the bound it is a miss all the same.' : ''
  const cell = (j: Judgment): string => j.met === null ? `not judged: ${j.note ?? 'older definition'}` : j.met ? 'yes' : 'NO'
  return [`${intro}${legacy}`, '', table(['scenario', 'what', 'target', 'measured', 'met'], judged.map((j) => [j.scenario, j.what, j.target, j.measured, cell(j)]))].join('\n')
}

function renderRuns (ctx: RenderContext): string {
  const rows = fullRuns(ctx.runs).map((run): string[] => {
    const judged = judgmentsOf(run)
    const missed = judged.filter((j) => j.met === false)
    return [
      `\`${run.json.commit}\`, ${String(run.json.at).slice(0, 10)}`,
      link(ctx.page, run.file),
      `${judged.filter((j) => j.met === true).length} of ${judged.length}`,
      missed.length === 0 ? 'none' : missed.map((j) => `${j.scenario}, ${j.what}: ${j.measured} (${j.target})`).join('; '),
      String(judged.filter((j) => j.met === null).length)
    ]
  })
  return [
    `Every kept full run, judged against the current targets as ${docLink(ctx.page, '#targets', 'Targets')} does. The machine is shared: a target met by one run can be missed by the next on the same code, so a verdict is one run's, not the code's.`,
    '',
    table(['run', 'JSON', 'targets met', 'missed', 'not judged'], rows)
  ].join('\n')
}
