/**
 * The generated regions of a Markdown page: everything between
 * `<!-- bench-report:begin NAME -->` and `<!-- bench-report:end NAME -->`, each on a line of its
 * own, belongs to `npm run bench:report`, which writes the region NAME there.
 */

export interface Region {
  name: string
  /** What stands between the two marker lines. */
  content: string
}

const BEGIN = /^<!-- bench-report:begin ([\w-]+) -->$/

/** The regions of `text`, in order; throws on a region that does not end, or ends under another name. */
export function regions (text: string): Region[] {
  const lines = text.split('\n')
  const found: Region[] = []
  for (let i = 0; i < lines.length; i++) {
    const begin = BEGIN.exec(lines[i])
    if (begin === null) {
      if (lines[i].startsWith('<!-- bench-report:end')) throw new Error(`line ${i + 1}: an end marker without its begin`)
      continue
    }
    const name = begin[1]
    const end = lines.indexOf(`<!-- bench-report:end ${name} -->`, i + 1)
    const next = lines.findIndex((l, j) => j > i && l.startsWith('<!-- bench-report:'))
    if (end === -1 || next !== end) throw new Error(`line ${i + 1}: the region ${name} does not end with <!-- bench-report:end ${name} -->`)
    found.push({ name, content: lines.slice(i + 1, end).join('\n') })
    i = end
  }
  return found
}

/** `body` as a region's content: set off by a blank line from each marker, so Markdown reads it as blocks of its own. */
export function asContent (body: string): string {
  return `\n${body.trim()}\n`
}

/** `text` with every region's content replaced by `asContent(render(name))`. */
export function rewrite (text: string, render: (name: string) => string): string {
  const names = new Set(regions(text).map((r) => r.name))
  let out = text
  for (const name of names) {
    const begin = `<!-- bench-report:begin ${name} -->\n`
    const end = `\n<!-- bench-report:end ${name} -->`
    const content = asContent(render(name))
    let from = 0
    for (;;) {
      const start = out.indexOf(begin, from)
      if (start === -1) break
      const stop = out.indexOf(end, start)
      const replaced = `${begin}${content}${end}`
      out = out.slice(0, start) + replaced + out.slice(stop + end.length)
      from = start + replaced.length
    }
  }
  return out
}

/**
 * Paragraphs and list items of `markdown` wrapped at `width` columns, as the pages are written by
 * hand; tables, code blocks and headings as they are. Breaks fall on spaces outside code spans, so
 * a command stays on one line.
 */
export function wrapMarkdown (markdown: string, width = 100): string {
  let fenced = false
  return markdown.split('\n').flatMap((line): string[] => {
    if (line.startsWith('```')) fenced = !fenced
    if (fenced || line.startsWith('```') || line.startsWith('|') || line.startsWith('#') || line.length <= width) return [line]
    const indent = line.startsWith('- ') ? '  ' : ''
    const out: string[] = []
    let rest = line
    while (rest.length > width) {
      const at = breakBefore(rest, width)
      if (at === -1) break
      out.push(rest.slice(0, at))
      rest = indent + rest.slice(at + 1)
    }
    return [...out, rest]
  }).join('\n')
}

/** The last space at or before `width` that is outside a code span and not after a figure (else the first one after), or -1. */
function breakBefore (line: string, width: number): number {
  let inCode = false
  let best = -1
  for (let i = 0; i < line.length; i++) {
    if (line[i] === '`') inCode = !inCode
    // Not after a digit either: a figure stays with its unit.
    else if (line[i] === ' ' && !inCode && i > 0 && !/[\s\d]/.test(line[i - 1])) {
      if (i <= width || best === -1) best = i
      if (i > width) break
    }
  }
  return best
}
