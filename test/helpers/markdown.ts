/**
 * Reading the project's Markdown pages in tests: fenced blocks, code spans, the prose between them,
 * and one `## ` section of a page.
 */

/** An inline code span: its backticks (group 1) and what they hold (group 2). */
const CODE_SPAN = /(`+)([\s\S]*?[^`])\1(?!`)/g

/** The text without fenced code blocks (their lines blanked, so line numbers hold). */
export function withoutFences (text: string): string {
  let fenced = false
  return text.split('\n').map((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced
      return ''
    }
    return fenced ? '' : line
  }).join('\n')
}

/** The contents of the inline code spans of a text outside its fenced blocks. */
export function codeSpans (text: string): string[] {
  return [...withoutFences(text).matchAll(CODE_SPAN)].map((m) => m[2].trim())
}

/** The text outside fenced blocks with its code spans emptied: what is left can hold real links. */
export function prose (text: string): string {
  return withoutFences(text).replace(CODE_SPAN, '``')
}

/** The `## heading` section of a page, up to the next `## ` heading; empty when there is none. */
export function section (text: string, heading: string): string {
  const start = text.indexOf(`\n## ${heading}\n`)
  if (start === -1) return ''
  const end = text.indexOf('\n## ', start + 1)
  return text.slice(start, end === -1 ? undefined : end)
}
