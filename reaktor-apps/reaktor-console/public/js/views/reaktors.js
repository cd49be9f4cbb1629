import { h } from '../ui.js'

export function mount (container) {
  container.append(h('h1', null, 'reaktors'))
  return () => {}
}
