import { ErrorBodySchema } from './common.js'
import { MessageSchema, PollingStatusSchema } from './polling.js'
import { PollingRun } from './polling-runs.js'

/**
 * The shapes more than one answer uses: added once to the root instance (fastify.addSchema), so
 * that routes reference them by $id and the OpenAPI document lists each once under
 * components.schemas instead of repeating it in every operation.
 */
export const SHARED_SCHEMAS = [ErrorBodySchema, MessageSchema, PollingStatusSchema, PollingRun]
