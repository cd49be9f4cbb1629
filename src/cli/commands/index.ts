import type { CommandModule } from '../context.js'
import { pollingCommands } from './polling.js'
import { sessionCommands } from './session.js'

/** Every command group, in the order `reaktor --help` lists them. */
export const commandModules: readonly CommandModule[] = [
  sessionCommands,
  pollingCommands
]
