import { Ajv, type ValidateFunction } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { RegisteredReaktor } from './types.js'

// ajv-formats is CommonJS: its default export arrives as the module object under NodeNext.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (ajv: Ajv) => Ajv

/** Checks one input against a standard reaktor's `inputSchema`: the 400 message, or undefined when it fits. */
export type InputCheck = (input: unknown) => string | undefined

/**
 * The input checks of standard reaktors, by id (none for a reaktor without `inputSchema`), compiled
 * at once so that a broken schema fails where they are compiled (the start), naming its reaktor,
 * instead of at the first call. Ajv as Fastify configures it, minus coercion: an aktor gets exactly
 * the JSON it was sent. The aktor route and reaktor-service/testing both check through these.
 */
export function compileInputChecks (reaktors: ReadonlyMap<string, RegisteredReaktor>): Map<string, InputCheck> {
  const ajv = addFormats(new Ajv({ allErrors: false, useDefaults: true, coerceTypes: false, strict: false }))
  const checks = new Map<string, InputCheck>()
  for (const [id, registered] of reaktors) {
    const schema = registered.registration.inputSchema
    if (schema === undefined) continue
    let validate: ValidateFunction
    try {
      validate = ajv.compile(schema)
    } catch (err) {
      throw new Error(`app ${registered.app.name}@${registered.app.version}: reaktor "${id}": inputSchema is not a valid JSON Schema: ${(err as Error).message}`, { cause: err })
    }
    checks.set(id, (input) => validate(input) ? undefined : ajv.errorsText(validate.errors, { dataVar: 'body' }))
  }
  return checks
}
