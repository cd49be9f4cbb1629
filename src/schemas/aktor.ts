import { Type } from 'typebox'

export const AktorParams = Type.Object({
  aktorName: Type.String({ minLength: 1, maxLength: 256, description: 'The reaktorDefinitionId of a standard reaktor registration' })
})

/** Whatever JSON value the aktor answers; `undefined` is answered as `null`. */
export const AktorOutput = Type.Unknown({ description: 'The output of the aktor, as JSON' })
