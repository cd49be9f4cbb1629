import { Type } from 'typebox'

/** Every error body of the service. */
export const ErrorBody = Type.Object({
  statusCode: Type.Integer(),
  error: Type.String(),
  message: Type.String()
})
