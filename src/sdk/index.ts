/**
 * The reaktor SDK: what apps import as `reaktor-service/sdk`. Types, combinators and the typed
 * registration helpers; nothing here depends on the rest of the service.
 */
export * from './types.js'
export * from './combinators.js'
export * from './define.js'
