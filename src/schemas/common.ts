import { Type, type Static } from 'typebox'

/** Every error body of the service. */
export const ErrorBody = Type.Object({
  statusCode: Type.Integer(),
  error: Type.String(),
  message: Type.String()
})
export type ErrorBodyType = Static<typeof ErrorBody>
