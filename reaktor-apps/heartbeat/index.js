// @ts-check
/*
 * An autoStart polling reaktor: starts with the server and logs one line every 30 seconds.
 * The message is a setting: package.json "reaktor.settings.message", overridden by the
 * environment variable REAKTOR_SETTING_HEARTBEAT_MESSAGE.
 */
import { constant, defineApp, definePollingReaktor, pipe, setting } from 'reaktor-service/sdk'

const startedAt = Date.now()
let beats = 0

/** @type {import('reaktor-service/sdk').Aktor<unknown, void>} */
const logBeat = (message, context) => {
  beats += 1
  context.log.info({ beats, uptimeSeconds: Math.round((Date.now() - startedAt) / 1000) }, String(message))
}

// The entry module may use a default export instead of named exports.
export default defineApp({
  pollingReaktors: [
    definePollingReaktor({
      reaktorDefinitionId: 'heartbeat',
      interval: '30s',
      autoStart: true,
      label: 'Heartbeat',
      description: 'Logs a heartbeat line every 30 seconds; never has more work (returns false).',
      // Read the message, log it, then report "no more work": the next beat comes after the interval.
      createReaktor: () => pipe(setting('message'), logBeat, constant(false))
    })
  ]
})
