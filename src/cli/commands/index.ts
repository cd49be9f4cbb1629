import type { CommandModule } from '../context.js'

/** Every command group, in the order `reaktor --help` lists them. */
export const commandModules: readonly CommandModule[] = []
