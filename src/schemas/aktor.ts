import { Type } from 'typebox'
import { StoredText } from './common.js'

export const AktorParams = Type.Object({
  aktorName: StoredText({ minLength: 1, maxLength: 256, description: 'The reaktorDefinitionId of a standard reaktor registration' })
})

/** Whatever JSON value the aktor answers; `undefined` is answered as `null`. */
export const AktorOutput = Type.Unknown({ description: 'The output of the aktor, as JSON' })
