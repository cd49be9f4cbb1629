import type { CommandModule } from '../context.js'
import { appCommands } from './apps.js'
import { auditCommands } from './audit.js'
import { databaseCommands } from './database.js'
import { pollingCommands } from './polling.js'
import { publishedAppCommands } from './published-apps.js'
import { sessionCommands } from './session.js'
import { tokensCommands } from './tokens.js'
import { usersCommands } from './users.js'

/** Every command group, in the order `reaktor --help` lists them. */
export const commandModules: readonly CommandModule[] = [
  sessionCommands,
  pollingCommands,
  usersCommands,
  tokensCommands,
  auditCommands,
  databaseCommands,
  appCommands,
  publishedAppCommands
]
